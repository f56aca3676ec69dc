// generate_trace: the step timeline of wm §6 — an "init" phase (wrapping, engine setup, model
// buffers), then per step: zero_grad, the micro-batches' forward and backward, ZeRO-1's boundary
// reduction, the optimizer step and the loss.item() that synchronises the CPU with the GPU; with
// --eval-every, an "eval" phase of forward-only batches after every K-th step.
#include <fmt/format.h>

#include "fraglab/workload.hpp"
#include "workload/framework.hpp"
#include "workload/model_driver.hpp"
#include "workload/param_layout.hpp"
#include "workload/sequence_lengths.hpp"

namespace fraglab {

WorkloadOptions resolved_options(const WorkloadOptions& options) {
  WorkloadOptions o = options;
  const ModelConfig& m = o.model;
  if (m.encoder_decoder()) {
    // The PyTorch FSDP T5 example: padding='max_length', 512 / 150 (wm §6.1).
    if (o.src_len == 0) o.src_len = 512;
    if (o.tgt_len == 0) o.tgt_len = 150;
  } else if (o.seq_len == 0) {
    o.seq_len = static_cast<std::uint32_t>(m.max_positions != 0 ? m.max_positions : 1024);
  }
  const bool zero =
      o.framework == Framework::Zero1 || o.framework == Framework::Zero2 || o.framework == Framework::Zero3;
  if (!o.optimizer) o.optimizer = zero ? OptimizerKind::DsFusedAdam : OptimizerKind::AdamwForeach;
  if (!o.reduce_dtype) o.reduce_dtype = o.precision;
  DeepSpeedOptions& ds = o.deepspeed;
  const std::uint64_t h = m.hidden;
  if (!ds.reduce_bucket_size) ds.reduce_bucket_size = ds.hf_auto ? h * h : 500'000'000;
  if (!ds.prefetch_bucket_size) ds.prefetch_bucket_size = ds.hf_auto ? (9 * h * h) / 10 : 50'000'000;
  if (!ds.param_persistence_threshold) ds.param_persistence_threshold = ds.hf_auto ? 10 * h : 100'000;
  if (!ds.overlap_comm) ds.overlap_comm = o.framework == Framework::Zero3;
  return o;
}

Trace generate_trace(const WorkloadOptions& options,
                     const std::function<void(std::uint64_t done, std::uint64_t total)>& progress) {
  check_options(options);
  const WorkloadOptions o = resolved_options(options);
  check_sizes(o);  // before anything is built: every size and the events' memory
  const workload::ModelLayout layout = workload::build_layout(o.model);

  Trace trace;
  trace.name = !o.name.empty() ? o.name
                               : fmt::format("{}-{}-n{}-b{}-s{}", o.model.name, name_of(o.framework), o.world_size,
                                             o.micro_batch, o.steps);
  trace.source = describe_options(o);
  workload::GpuTiming gpu(o.timing, o.precision, o.world_size, o.seed, o.rank);
  workload::TraceBuilder tb(trace, gpu);
  std::unique_ptr<workload::FrameworkModel> fw = workload::make_framework({o, layout, tb});
  workload::DriverContext dctx{o, layout, *fw, tb};
  std::unique_ptr<workload::ModelDriver> driver =
      o.model.encoder_decoder() ? workload::make_t5_driver(dctx) : workload::make_decoder_only_driver(dctx);
  const workload::SequenceLengths lengths(o);

  tb.mark_phase("init");
  fw->init();
  if (o.model.family == ModelFamily::Gpt2) {
    // Each GPT2 block registers a [1, 1, ctx, ctx] bool causal-mask buffer, never sharded (wm §1.1).
    for (std::uint32_t k = 0; k < o.model.layers; ++k)
      tb.alloc(o.model.max_positions * o.model.max_positions, workload::Stream::Default, workload::Tag::Param);
  }
  gpu.sync_device();

  for (std::uint32_t step = 1; step <= o.steps; ++step) {
    tb.mark_step(step);
    gpu.begin_step(step);
    fw->begin_step(step);
    tb.mark_phase("zero_grad");
    fw->zero_grad();
    for (std::uint32_t micro = 0; micro < o.grad_accum; ++micro) {
      // The cuBLAS workspaces (WorkloadOptions::cublas_workspace): the first GEMM of the main
      // thread's handle, and of the autograd thread's, each allocates one and keeps it. Placed at
      // the start of the first forward and backward (before the batch and the loss gradient).
      const bool first = step == 1 && micro == 0 && o.cublas_workspace > 0;
      tb.mark_phase("forward");
      if (first) tb.alloc(o.cublas_workspace, workload::Stream::Default, workload::Tag::Temp);
      driver->forward(lengths.shape(step, micro));
      tb.mark_phase("backward");
      if (first) tb.alloc(o.cublas_workspace, workload::Stream::Default, workload::Tag::Temp);
      driver->backward();
      fw->end_backward(micro + 1 == o.grad_accum);
    }
    if (fw->has_grad_sync()) {
      tb.mark_phase("grad_sync");
      fw->grad_sync();
    }
    tb.mark_phase("optimizer");
    fw->optimizer_step();
    gpu.sync_stream(workload::Stream::Default);  // loss.item()
    driver->end_step();
    if (o.eval_every > 0 && step % o.eval_every == 0) {
      // HF Trainer evaluates after the optimizer step of every eval_steps-th step.
      tb.mark_phase("eval");
      fw->begin_eval();
      for (std::uint32_t batch = 0; batch < o.eval_batches; ++batch) {
        driver->eval_forward(lengths.eval_shape(step, batch));
        fw->end_eval_forward();
      }
      driver->end_eval();
      fw->end_eval();
      gpu.sync_stream(workload::Stream::Default);  // the gathered losses are copied to the CPU
    }
    if (progress) progress(step, o.steps);
  }
  driver->finish();
  tb.finish();
  return trace;
}

}  // namespace fraglab
