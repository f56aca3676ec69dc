// Synthetic training-step traces: the allocation stream one rank of a sharded-data-parallel
// transformer training run sends to PyTorch's caching allocator, generated from the workload model
// (docs/workload-model.md, cited below as "wm §N").
//
// What is modelled (wm §2-§6): model shapes and parameters (§1), per-layer saved and transient
// activation tensors with and without activation recomputation (§2), PyTorch FSDP1 / FSDP2 (§3)
// and DeepSpeed ZeRO-1/2/3 (§4) mechanics, their side streams and record_stream frees, the
// optimizer's lazy state and temporaries, the step timeline (§6) and the knobs of §7. Frees that
// wait for another stream are written as free_requested / free_completed; a simple GPU timing
// model (gpu_timing.hpp) decides when they complete.
//
// Same options, same trace: generation is a pure function of WorkloadOptions (seed included).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/trace.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

// ---- models (wm §1) ---------------------------------------------------------------------------

// The block structure a model uses. Each family has its own per-layer tensor table (wm §2.3-§2.5).
enum class ModelFamily : std::uint8_t {
  Gpt2,   // HF GPT2LMHeadModel: LayerNorm with bias, Conv1D, learned positions, GELU MLP
  T5,     // HF T5ForConditionalGeneration (v1.0): encoder-decoder, relative position bias, ReLU FFN
  Llama,  // HF LlamaForCausalLM: RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases
};

struct ModelConfig {
  std::string name;
  ModelFamily family = ModelFamily::Gpt2;
  std::uint32_t layers = 0;                       // decoder-only: blocks; T5: encoder blocks
  std::uint32_t decoder_layers = 0;               // T5 only
  std::uint64_t hidden = 0;                       // h (d_model)
  std::uint64_t heads = 0;                        // a
  std::uint64_t kv_heads = 0;                     // Llama grouped-query attention (= heads otherwise)
  std::uint64_t head_dim = 0;                     // d; attention inner width is heads * head_dim
  std::uint64_t ffn = 0;                          // f
  std::uint64_t vocab = 0;                        // V
  std::uint64_t max_positions = 0;                // GPT2 wpe rows; the longest sequence accepted
  bool tied_embeddings = true;                    // lm_head shares the input embedding
  std::uint32_t relative_attention_buckets = 32;  // T5

  std::uint64_t inner() const { return heads * head_dim; }
  std::uint64_t kv_inner() const { return kv_heads * head_dim; }
  bool encoder_decoder() const { return family == ModelFamily::T5; }
  bool operator==(const ModelConfig&) const = default;
};

// The accepted range of every model dimension, whichever file gives it (fraglab's model JSON or a
// Hugging Face config.json): far above every released model, and small enough that the sizes the
// generator computes from them cannot overflow 64 bits before check_sizes() compares them with
// what a trace may hold. A value outside is refused naming the key, the value and the range.
struct ModelLimits {
  static constexpr std::uint64_t kLayers = 100'000;       // layers, encoder_layers, decoder_layers
  static constexpr std::uint64_t kHidden = 1 << 20;       // hidden (d_model)
  static constexpr std::uint64_t kHeads = 1 << 16;        // heads, kv_heads
  static constexpr std::uint64_t kHeadDim = 1 << 16;      // head_dim
  static constexpr std::uint64_t kFfn = 1 << 24;          // ffn
  static constexpr std::uint64_t kVocab = 1 << 24;        // vocab
  static constexpr std::uint64_t kPositions = 1'000'000;  // max_positions (= the longest --seq-len)
  static constexpr std::uint64_t kRelativeBuckets = 100'000;
};

// gpt2-xl, t5-3b, llama2-7b, llama3-8b.
std::vector<std::string> builtin_model_names();
// Throws InputError naming the accepted names.
ModelConfig builtin_model(std::string_view name);
// The small JSON model description of traces/models/*.json (keys: see model_config.cpp).
// Throws InputError naming `origin` and the bad key.
ModelConfig parse_model_json(std::string_view text, std::string_view origin);
// A built-in name, or a path to a .json model file.
ModelConfig load_model(const std::string& name_or_path);

// Trainable parameters (Ψ), counted from the same parameter layout the generator shards.
std::uint64_t parameter_count(const ModelConfig& model);

// ---- framework and training knobs (wm §7) -----------------------------------------------------

enum class Framework : std::uint8_t { Fsdp1, Fsdp2, Zero1, Zero2, Zero3 };
enum class ShardingStrategy : std::uint8_t { FullShard, ShardGradOp, NoShard };  // FSDP1
enum class BackwardPrefetch : std::uint8_t { Pre, Post, None };                  // FSDP1
enum class Precision : std::uint8_t { Bf16, Fp32 };
enum class Recompute : std::uint8_t { None, NonReentrant, Reentrant };
enum class AttentionImpl : std::uint8_t { Eager, Sdpa };
enum class GeluImpl : std::uint8_t { Python, Fused };
enum class LossImpl : std::uint8_t { Fp32Upcast, Bf16 };  // HF >= 4.46 ForCausalLMLoss / older
enum class OptimizerKind : std::uint8_t { AdamwForeach, AdamwFused, AdamL2Foreach, DsFusedAdam };
enum class GradFlatten : std::uint8_t { Cat, Prealloc };  // wm §3.5
enum class Padding : std::uint8_t { MaxLength, Longest, MultipleOf };

// DeepSpeed ZeRO configuration (wm §4). Values in elements, as in ds_config.json. Unset values
// take DeepSpeed's defaults (reduce 5e8, prefetch 5e7, persistence 1e5), or with hf_auto the
// "auto" values HF Trainer writes (wm §9, integrations/deepspeed.py): reduce h², prefetch 0.9·h²,
// persistence 10·h. resolved_deepspeed() applies them.
struct DeepSpeedOptions {
  std::optional<std::uint64_t> reduce_bucket_size;
  std::optional<std::uint64_t> prefetch_bucket_size;
  std::optional<std::uint64_t> param_persistence_threshold;
  std::uint64_t max_live_parameters = 1'000'000'000;
  std::uint64_t max_reuse_distance = 1'000'000'000;
  std::uint64_t sub_group_size = 1'000'000'000;
  std::optional<bool> overlap_comm;  // default: true for stage 3, false for stages 1 and 2
  bool contiguous_gradients = true;
  bool hf_auto = false;
};

// The GPU timing model that places deferred frees (gpu_timing.hpp). Defaults: an A100.
struct TimingOptions {
  double matmul_tflops = 0;           // achieved; 0 = 150 (bf16) or 19.5 (fp32, TF32 off)
  double hbm_gbps = 1500;             // achieved memory bandwidth for elementwise kernels
  double bus_gbps = 100;              // collective bus bandwidth
  double cpu_op_us = 15;              // CPU issue time per operator (Python + dispatch + launch)
  double hook_us = 40;                // CPU time of one framework hook (DeepSpeed per module, FSDP per unit)
  std::uint32_t launch_queue = 1024;  // kernels a stream may have queued before launches block
  double jitter = 0.3;                // each GPU duration is scaled by a seeded factor in [1-j, 1+j]
  // Step-to-step skew of the side streams (collectives, copies): each step every side stream draws
  // a seeded delay in [0, side_delay_us] µs added to each kernel it runs in that step (e.g. waiting
  // for the peer rank). 0 = off: no draw, today's timings.
  double side_delay_us = 0;
};

struct WorkloadOptions {
  ModelConfig model;
  Framework framework = Framework::Fsdp1;
  ShardingStrategy sharding = ShardingStrategy::FullShard;
  std::uint32_t world_size = 2;
  std::uint32_t rank = 0;
  std::uint32_t micro_batch = 8;
  std::uint32_t steps = 1;
  std::uint64_t seed = 0;

  // Sequence lengths (wm §6.1): maxima; with Padding::Longest each step's length is the longest
  // sampled example (log-normal lengths), capped by the maximum, rounded up to pad_multiple for
  // Padding::MultipleOf. 0 = the model's default (GPT2 1024, T5 512/150, Llama 4096).
  std::uint32_t seq_len = 0;  // decoder-only models
  std::uint32_t src_len = 0;  // T5 encoder
  std::uint32_t tgt_len = 0;  // T5 decoder
  Padding padding = Padding::MaxLength;
  std::uint32_t pad_multiple = 8;
  double len_median = 600;     // source (or only) sequence, tokens
  double tgt_len_median = 60;  // T5 targets, tokens
  double len_sigma = 0.5;      // log-normal sigma of both
  // Training examples in the data set (0 = unbounded: every micro-batch is full). A
  // DistributedSampler gives each rank ceil(N / world_size) examples and a DataLoader with
  // drop_last=False ends every epoch with a smaller batch of the rest; then the next epoch starts.
  std::uint64_t dataset_size = 0;
  // Evaluation (HF Trainer eval_steps): after every eval_every training steps, eval_batches
  // forward-only micro-batches under no_grad of eval_micro_batch examples (0 = micro_batch).
  // 0 = no evaluation.
  std::uint32_t eval_every = 0;
  std::uint32_t eval_batches = 0;
  std::uint32_t eval_micro_batch = 0;
  // cuBLAS workspace bytes PyTorch allocates through the caching allocator per (handle, stream) at
  // the first GEMM and keeps (CUDABlasHandlePool.cpp; 8,519,680 on an A100, ":4096:2:16:8").
  // Forward and backward run on different CPU threads, so different handles: two workspaces on
  // the default stream. 0 = not modelled.
  std::uint64_t cublas_workspace = 0;

  Precision precision = Precision::Bf16;  // param dtype (bf16 = mixed precision, fp32 master)
  std::optional<Precision> reduce_dtype;  // gradient reduction dtype; default = precision
  Recompute recompute = Recompute::NonReentrant;
  AttentionImpl attention = AttentionImpl::Eager;
  GeluImpl gelu = GeluImpl::Python;
  LossImpl loss = LossImpl::Fp32Upcast;
  bool retain_logits = false;              // the loop keeps outputs.logits until the next forward returns
  std::optional<OptimizerKind> optimizer;  // default: adamw_foreach (FSDP), ds_fusedadam (ZeRO)
  std::uint32_t grad_accum = 1;
  GradFlatten grad_flatten = GradFlatten::Cat;

  // FSDP1 (wm §3.1)
  bool limit_all_gathers = true;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::Pre;
  bool forward_prefetch = false;

  DeepSpeedOptions deepspeed;
  TimingOptions timing;
  std::string name;  // trace name; empty = derived from the options
};

// The options with every default filled in (sequence lengths, optimizer, reduce dtype, DeepSpeed
// values); generate_trace() works from this.
WorkloadOptions resolved_options(const WorkloadOptions& options);

// Checks the options (ranges, combinations the model does not cover). Throws InputError naming
// the option and what is accepted. generate_trace() calls it.
void check_options(const WorkloadOptions& options);

// The sizes the generator will compute for these (resolved) options, checked before it builds
// anything: each tensor it may allocate (activations, attention scores, logits, embeddings, the
// parameters with their gradients and optimizer state, DeepSpeed buckets) must stay below
// kMaxTensorBytes, and the events it will build must fit the memory budget
// (fraglab/memory_budget.hpp). Throws InputError naming the options and model fields the size
// is the product of, their values and the limit. generate_trace() calls it.
inline constexpr std::uint64_t kMaxTensorBytes = std::uint64_t{1} << 56;
void check_sizes(const WorkloadOptions& resolved);

// An upper bound on the events generate_trace() makes for these (resolved) options, for the
// memory estimate of check_sizes().
std::uint64_t estimated_events(const WorkloadOptions& resolved);

// The per-rank allocation stream of `steps` training steps, with an "init" phase before step 1.
// Marks: label "step" with the step number (1-based), label "phase" with "init", "zero_grad",
// "forward", "backward", "grad_sync" (ZeRO-1), "optimizer". Tags: param, grad, act, opt, comm,
// temp. Passes validate_trace(). `progress`, when set, is called with (steps made, steps) after
// each step.
Trace generate_trace(const WorkloadOptions& options,
                     const std::function<void(std::uint64_t done, std::uint64_t total)>& progress = {});

// The attention implementation a model family gets when --attention is not given: the only one
// modelled for t5 (eager) and llama (sdpa); eager for gpt2, whose traces keep that default.
AttentionImpl default_attention(ModelFamily family);
// Why: "the only one modelled for llama", for the note the command line prints.
std::string_view default_attention_reason(ModelFamily family);

// One-line description of the options (the trace's `source`).
std::string describe_options(const WorkloadOptions& options);

// ---- option spellings, shared by the command line and the tests --------------------------------
// Each parse_* throws InputError "FLAG 'VALUE': expected one of A, B, C".
Framework parse_framework(std::string_view value, std::string_view flag = "--framework");
ShardingStrategy parse_sharding(std::string_view value, std::string_view flag = "--sharding");
BackwardPrefetch parse_backward_prefetch(std::string_view value, std::string_view flag = "--backward-prefetch");
Precision parse_precision(std::string_view value, std::string_view flag = "--precision");
Recompute parse_recompute(std::string_view value, std::string_view flag = "--recompute-impl");
AttentionImpl parse_attention(std::string_view value, std::string_view flag = "--attention");
GeluImpl parse_gelu(std::string_view value, std::string_view flag = "--gelu");
LossImpl parse_loss(std::string_view value, std::string_view flag = "--loss");
OptimizerKind parse_optimizer(std::string_view value, std::string_view flag = "--optimizer");
GradFlatten parse_grad_flatten(std::string_view value, std::string_view flag = "--grad-flatten");
Padding parse_padding(std::string_view value, std::string_view flag = "--padding");
bool parse_bool(std::string_view value, std::string_view flag);

std::string_view name_of(Framework v);
std::string_view name_of(ShardingStrategy v);
std::string_view name_of(BackwardPrefetch v);
std::string_view name_of(Precision v);
std::string_view name_of(Recompute v);
std::string_view name_of(AttentionImpl v);
std::string_view name_of(GeluImpl v);
std::string_view name_of(LossImpl v);
std::string_view name_of(OptimizerKind v);
std::string_view name_of(GradFlatten v);
std::string_view name_of(Padding v);
std::string_view name_of(ModelFamily v);

}  // namespace fraglab
