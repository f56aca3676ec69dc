// The generator's flags shared by `gen` and `maxbatch` (workload_flags.hpp).
#include "cli/workload_flags.hpp"

#include <fmt/format.h>

namespace fraglab::cli {

WorkloadFlags::WorkloadFlags() {
  model_opts.add_options()("model", po::value(&model)->required(),
                           fmt::format("{}, a model .json file (see traces/models/) or a Hugging Face config.json",
                                       fmt::join(builtin_model_names(), ", "))
                               .c_str())("framework", po::value(&framework)->default_value(framework),
                                         "fsdp1, fsdp2, zero1, zero2, zero3")(
      "world-size", po::value(&o.world_size)->default_value(o.world_size), "data-parallel (sharding) world size N")(
      "rank", po::value(&o.rank)->default_value(o.rank), "the rank to emit (ranks differ under dynamic padding)")(
      "seed", po::value(&o.seed)->default_value(o.seed), "seed of sequence lengths and timing jitter");
  train_opts.add_options()("seq-len", po::value(&o.seq_len),
                           "sequence length, decoder-only models (default: the model's context)")(
      "src-len", po::value(&o.src_len), "T5 source (encoder) length (default 512)")(
      "tgt-len", po::value(&o.tgt_len), "T5 target (decoder) length (default 150)")(
      "padding", po::value(&padding)->default_value(padding),
      "max_length (fixed shapes), longest (pad to the longest sampled example), multiple_of")(
      "pad-multiple", po::value(&o.pad_multiple)->default_value(o.pad_multiple),
      "pad_to_multiple_of for --padding multiple_of")("len-median",
                                                      po::value(&o.len_median)->default_value(o.len_median),
                                                      "median example length, tokens (source for T5)")(
      "tgt-len-median", po::value(&o.tgt_len_median)->default_value(o.tgt_len_median),
      "median T5 target length, tokens")("len-sigma", po::value(&o.len_sigma)->default_value(o.len_sigma),
                                         "log-normal sigma of example lengths")(
      "precision", po::value(&precision)->default_value(precision), "bf16 (mixed precision, fp32 master) or fp32")(
      "reduce-dtype", po::value(&reduce_dtype), "gradient reduction dtype: bf16 or fp32 (default: --precision)")(
      "recompute", "activation recomputation per block (default)")("no-recompute", "no activation recomputation")(
      "recompute-impl", po::value(&recompute_impl)->default_value(recompute_impl),
      "non_reentrant or reentrant checkpoint")(
      "attention", po::value(&attention),
      "eager or sdpa (default: eager for gpt2 and t5, sdpa for llama: the ones modelled, "
      "docs/workload-model.md §2.3-§2.5)")("gelu", po::value(&gelu)->default_value(gelu),
                                           "python (HF NewGELUActivation) or fused (GPT2)")(
      "loss", po::value(&loss)->default_value(loss), "fp32_upcast (HF >= 4.46) or bf16 (older GPT2/Llama loss)")(
      "retain-logits", "the loop keeps outputs.logits until the next forward returns")(
      "optimizer", po::value(&optimizer),
      "adamw_foreach, adamw_fused, adam_l2_foreach, ds_fusedadam (default: adamw_foreach for FSDP, ds_fusedadam for "
      "ZeRO)")("grad-accum", po::value(&o.grad_accum)->default_value(o.grad_accum),
               "gradient-accumulation micro-batches per step")(
      "grad-flatten", po::value(&grad_flatten)->default_value(grad_flatten),
      "cat (per-parameter grads concatenated) or prealloc (fairscale optimize_backward_concat fix), FSDP1");
  growth_opts.add_options()("dataset-size", po::value(&o.dataset_size)->default_value(o.dataset_size),
                            "training examples N (0 = unbounded): each rank gets ceil(N / world size), every epoch "
                            "ends with a smaller last batch (drop_last=False)")(
      "eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
      "evaluate after every K training steps (0 = never; zero3 only): forward-only batches under no_grad")(
      "eval-batches", po::value(&o.eval_batches)->default_value(o.eval_batches), "evaluation batches per evaluation")(
      "eval-micro-batch", po::value(&o.eval_micro_batch)->default_value(o.eval_micro_batch),
      "examples per evaluation batch (0 = --micro-batch)")(
      "cublas-workspace", po::value(&o.cublas_workspace)->default_value(o.cublas_workspace),
      "bytes of each cuBLAS workspace, kept from the first GEMM of the forward and of the backward thread (0 = not "
      "modelled; PyTorch on an A100: 8519680)");
  fsdp_opts.add_options()("sharding", po::value(&sharding)->default_value(sharding),
                          "full_shard, shard_grad_op, no_shard")(
      "limit-all-gathers", po::value(&limit_all_gathers)->default_value(limit_all_gathers), "true or false")(
      "backward-prefetch", po::value(&backward_prefetch)->default_value(backward_prefetch),
      "backward_pre, backward_post, none")("forward-prefetch",
                                           "prefetch the next unit's all-gather in forward (from step 2)");
  ds_opts.add_options()("ds-hf-auto", "HF Trainer 'auto' values: reduce bucket h², prefetch 0.9·h², persistence 10·h")(
      "ds-reduce-bucket-size", po::value(&reduce_bucket), "elements (default 5e8)")(
      "ds-prefetch-bucket-size", po::value(&prefetch_bucket), "elements (default 5e7)")(
      "ds-param-persistence-threshold", po::value(&persistence), "elements (default 1e5)")(
      "ds-max-live-parameters",
      po::value(&o.deepspeed.max_live_parameters)->default_value(o.deepspeed.max_live_parameters), "elements")(
      "ds-max-reuse-distance",
      po::value(&o.deepspeed.max_reuse_distance)->default_value(o.deepspeed.max_reuse_distance),
      "elements")("ds-sub-group-size",
                  po::value(&o.deepspeed.sub_group_size)->default_value(o.deepspeed.sub_group_size), "elements")(
      "ds-overlap-comm", po::value(&overlap_comm), "true or false (default: true for zero3, false for zero1/2)")(
      "ds-contiguous-gradients", po::value(&contiguous_gradients)->default_value(contiguous_gradients),
      "true or false");
  timing_opts.add_options()("gpu-tflops", po::value(&o.timing.matmul_tflops),
                            "achieved matmul TFLOPS (default 150 bf16, 19.5 fp32)")(
      "hbm-gbps", po::value(&o.timing.hbm_gbps)->default_value(o.timing.hbm_gbps), "memory bandwidth, GB/s")(
      "bus-gbps", po::value(&o.timing.bus_gbps)->default_value(o.timing.bus_gbps), "collective bus bandwidth, GB/s")(
      "cpu-op-us", po::value(&o.timing.cpu_op_us)->default_value(o.timing.cpu_op_us),
      "CPU issue time per operator, µs")("hook-us", po::value(&o.timing.hook_us)->default_value(o.timing.hook_us),
                                         "CPU time per framework hook (DeepSpeed per module, FSDP per unit), µs")(
      "launch-queue", po::value(&o.timing.launch_queue)->default_value(o.timing.launch_queue),
      "unfinished kernels per stream before a launch blocks (0 = unbounded)")(
      "jitter", po::value(&o.timing.jitter)->default_value(o.timing.jitter, fmt::format("{}", o.timing.jitter)),
      "GPU duration jitter, 0 <= j < 1")(
      "side-delay-us", po::value(&o.timing.side_delay_us)->default_value(o.timing.side_delay_us),
      "per step, each side stream (collectives, copies) draws a delay in [0, D] µs added to each of its kernels "
      "(0 = off)");
}

void WorkloadFlags::add_to(po::options_description& options) const {
  options.add(model_opts).add(train_opts).add(growth_opts).add(fsdp_opts).add(ds_opts).add(timing_opts);
}

std::string WorkloadFlags::read(const po::variables_map& vm, const std::string& command) {
  if (vm.count("recompute") && vm.count("no-recompute"))
    throw InputError("--recompute and --no-recompute: give one of them");
  o.model = load_model(model);
  o.framework = parse_framework(framework);
  o.sharding = parse_sharding(sharding);
  o.precision = parse_precision(precision);
  if (!reduce_dtype.empty()) o.reduce_dtype = parse_precision(reduce_dtype, "--reduce-dtype");
  o.recompute = vm.count("no-recompute") ? Recompute::None : parse_recompute(recompute_impl);
  if (o.recompute == Recompute::None && !vm.count("no-recompute"))
    throw InputError("--recompute-impl 'none': expected one of non_reentrant, reentrant (use --no-recompute)");
  std::string chosen;  // defaults picked for this model, said once the trace is written
  if (vm.count("attention")) {
    o.attention = parse_attention(attention);
  } else {
    // Not given: the model's own default, so that no model fails with a default it lacks.
    o.attention = default_attention(o.model.family);
    chosen = fmt::format("{}: --attention not given: {} ({})", command, name_of(o.attention),
                         default_attention_reason(o.model.family));
  }
  o.gelu = parse_gelu(gelu);
  o.loss = parse_loss(loss);
  o.retain_logits = vm.count("retain-logits") > 0;
  if (!optimizer.empty()) o.optimizer = parse_optimizer(optimizer);
  o.grad_flatten = parse_grad_flatten(grad_flatten);
  o.padding = parse_padding(padding);
  o.limit_all_gathers = parse_bool(limit_all_gathers, "--limit-all-gathers");
  o.backward_prefetch = parse_backward_prefetch(backward_prefetch);
  o.forward_prefetch = vm.count("forward-prefetch") > 0;
  o.deepspeed.hf_auto = vm.count("ds-hf-auto") > 0;
  if (vm.count("ds-reduce-bucket-size")) o.deepspeed.reduce_bucket_size = reduce_bucket;
  if (vm.count("ds-prefetch-bucket-size")) o.deepspeed.prefetch_bucket_size = prefetch_bucket;
  if (vm.count("ds-param-persistence-threshold")) o.deepspeed.param_persistence_threshold = persistence;
  if (!overlap_comm.empty()) o.deepspeed.overlap_comm = parse_bool(overlap_comm, "--ds-overlap-comm");
  o.deepspeed.contiguous_gradients = parse_bool(contiguous_gradients, "--ds-contiguous-gradients");
  return chosen;
}

}  // namespace fraglab::cli
