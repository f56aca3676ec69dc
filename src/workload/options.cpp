// Option spellings (the command line's and the trace description's) and the checks that reject
// combinations the workload model does not cover. One table per enum so parse and print agree.
#include <fmt/format.h>

#include <array>
#include <tuple>
#include <utility>

#include "fraglab/workload.hpp"

namespace fraglab {

namespace {

template <typename E, std::size_t N>
using Spellings = std::array<std::pair<E, std::string_view>, N>;

template <typename E, std::size_t N>
E parse_enum(const Spellings<E, N>& table, std::string_view value, std::string_view flag) {
  for (const auto& [e, name] : table)
    if (name == value) return e;
  std::string accepted;
  for (const auto& [e, name] : table) accepted += (accepted.empty() ? "" : ", ") + std::string(name);
  throw InputError(fmt::format("{} '{}': expected one of {}", flag, value, accepted));
}

template <typename E, std::size_t N>
std::string_view name_in(const Spellings<E, N>& table, E v) {
  for (const auto& [e, name] : table)
    if (e == v) return name;
  return "?";
}

constexpr Spellings<Framework, 5> kFrameworks{{{Framework::Fsdp1, "fsdp1"},
                                               {Framework::Fsdp2, "fsdp2"},
                                               {Framework::Zero1, "zero1"},
                                               {Framework::Zero2, "zero2"},
                                               {Framework::Zero3, "zero3"}}};
constexpr Spellings<ShardingStrategy, 3> kShardings{{{ShardingStrategy::FullShard, "full_shard"},
                                                     {ShardingStrategy::ShardGradOp, "shard_grad_op"},
                                                     {ShardingStrategy::NoShard, "no_shard"}}};
constexpr Spellings<BackwardPrefetch, 3> kPrefetches{{{BackwardPrefetch::Pre, "backward_pre"},
                                                      {BackwardPrefetch::Post, "backward_post"},
                                                      {BackwardPrefetch::None, "none"}}};
constexpr Spellings<Precision, 2> kPrecisions{{{Precision::Bf16, "bf16"}, {Precision::Fp32, "fp32"}}};
constexpr Spellings<Recompute, 3> kRecomputes{
    {{Recompute::None, "none"}, {Recompute::NonReentrant, "non_reentrant"}, {Recompute::Reentrant, "reentrant"}}};
constexpr Spellings<AttentionImpl, 2> kAttentions{{{AttentionImpl::Eager, "eager"}, {AttentionImpl::Sdpa, "sdpa"}}};
constexpr Spellings<GeluImpl, 2> kGelus{{{GeluImpl::Python, "python"}, {GeluImpl::Fused, "fused"}}};
constexpr Spellings<LossImpl, 2> kLosses{{{LossImpl::Fp32Upcast, "fp32_upcast"}, {LossImpl::Bf16, "bf16"}}};
constexpr Spellings<OptimizerKind, 4> kOptimizers{{{OptimizerKind::AdamwForeach, "adamw_foreach"},
                                                   {OptimizerKind::AdamwFused, "adamw_fused"},
                                                   {OptimizerKind::AdamL2Foreach, "adam_l2_foreach"},
                                                   {OptimizerKind::DsFusedAdam, "ds_fusedadam"}}};
constexpr Spellings<GradFlatten, 2> kFlattens{{{GradFlatten::Cat, "cat"}, {GradFlatten::Prealloc, "prealloc"}}};
constexpr Spellings<Padding, 3> kPaddings{
    {{Padding::MaxLength, "max_length"}, {Padding::Longest, "longest"}, {Padding::MultipleOf, "multiple_of"}}};
constexpr Spellings<ModelFamily, 3> kFamilies{
    {{ModelFamily::Gpt2, "gpt2"}, {ModelFamily::T5, "t5"}, {ModelFamily::Llama, "llama"}}};
constexpr Spellings<bool, 4> kBools{{{true, "true"}, {false, "false"}, {true, "True"}, {false, "False"}}};

}  // namespace

Framework parse_framework(std::string_view v, std::string_view flag) { return parse_enum(kFrameworks, v, flag); }
ShardingStrategy parse_sharding(std::string_view v, std::string_view flag) { return parse_enum(kShardings, v, flag); }
BackwardPrefetch parse_backward_prefetch(std::string_view v, std::string_view flag) {
  return parse_enum(kPrefetches, v, flag);
}
Precision parse_precision(std::string_view v, std::string_view flag) { return parse_enum(kPrecisions, v, flag); }
Recompute parse_recompute(std::string_view v, std::string_view flag) { return parse_enum(kRecomputes, v, flag); }
AttentionImpl parse_attention(std::string_view v, std::string_view flag) { return parse_enum(kAttentions, v, flag); }
GeluImpl parse_gelu(std::string_view v, std::string_view flag) { return parse_enum(kGelus, v, flag); }
LossImpl parse_loss(std::string_view v, std::string_view flag) { return parse_enum(kLosses, v, flag); }
OptimizerKind parse_optimizer(std::string_view v, std::string_view flag) { return parse_enum(kOptimizers, v, flag); }
GradFlatten parse_grad_flatten(std::string_view v, std::string_view flag) { return parse_enum(kFlattens, v, flag); }
Padding parse_padding(std::string_view v, std::string_view flag) { return parse_enum(kPaddings, v, flag); }
bool parse_bool(std::string_view v, std::string_view flag) { return parse_enum(kBools, v, flag); }

std::string_view name_of(Framework v) { return name_in(kFrameworks, v); }
std::string_view name_of(ShardingStrategy v) { return name_in(kShardings, v); }
std::string_view name_of(BackwardPrefetch v) { return name_in(kPrefetches, v); }
std::string_view name_of(Precision v) { return name_in(kPrecisions, v); }
std::string_view name_of(Recompute v) { return name_in(kRecomputes, v); }
std::string_view name_of(AttentionImpl v) { return name_in(kAttentions, v); }
std::string_view name_of(GeluImpl v) { return name_in(kGelus, v); }
std::string_view name_of(LossImpl v) { return name_in(kLosses, v); }
std::string_view name_of(OptimizerKind v) { return name_in(kOptimizers, v); }
std::string_view name_of(GradFlatten v) { return name_in(kFlattens, v); }
std::string_view name_of(Padding v) { return name_in(kPaddings, v); }
std::string_view name_of(ModelFamily v) { return name_in(kFamilies, v); }

void check_options(const WorkloadOptions& o) {
  auto fail = [](const std::string& message) { throw InputError(message); };
  if (o.world_size < 1 || o.world_size > 65536) fail(fmt::format("--world-size {}: expected 1..65536", o.world_size));
  if (o.rank >= o.world_size)
    fail(fmt::format("--rank {}: expected 0..{} (below --world-size)", o.rank, o.world_size - 1));
  if (o.micro_batch < 1 || o.micro_batch > 65536)
    fail(fmt::format("--micro-batch {}: expected 1..65536", o.micro_batch));
  if (o.steps < 1 || o.steps > 100000) fail(fmt::format("--steps {}: expected 1..100000", o.steps));
  if (o.grad_accum < 1 || o.grad_accum > 1024) fail(fmt::format("--grad-accum {}: expected 1..1024", o.grad_accum));
  if (o.pad_multiple < 1 || o.pad_multiple > 4096)
    fail(fmt::format("--pad-multiple {}: expected 1..4096", o.pad_multiple));
  const bool t5 = o.model.encoder_decoder();
  if (t5 && o.seq_len != 0) fail("--seq-len: t5 is encoder-decoder; use --src-len and --tgt-len");
  if (!t5 && (o.src_len != 0 || o.tgt_len != 0))
    fail(fmt::format("--src-len/--tgt-len: only for encoder-decoder models ({} is decoder-only; use --seq-len)",
                     o.model.name));
  const std::uint64_t limit = o.model.max_positions;
  for (auto [flag, len] : {std::pair<const char*, std::uint32_t>{"--seq-len", o.seq_len},
                           {"--src-len", o.src_len},
                           {"--tgt-len", o.tgt_len}}) {
    if (len > 1'000'000) fail(fmt::format("{} {}: expected 1..1000000", flag, len));
    if (limit != 0 && len > limit)
      fail(fmt::format("{} {}: {} accepts at most {} positions", flag, len, o.model.name, limit));
  }
  if (!(o.len_median > 0) || !(o.tgt_len_median > 0)) fail("--len-median/--tgt-len-median: expected > 0");
  if (!(o.len_sigma >= 0) || o.len_sigma > 5) fail(fmt::format("--len-sigma {}: expected 0..5", o.len_sigma));
  if (o.dataset_size > (std::uint64_t{1} << 50))
    fail(fmt::format("--dataset-size {}: expected 0 (unbounded) .. 2^50 examples", o.dataset_size));
  if (o.eval_every > 100000) fail(fmt::format("--eval-every {}: expected 0..100000 steps", o.eval_every));
  if (o.eval_batches > 100000) fail(fmt::format("--eval-batches {}: expected 0..100000", o.eval_batches));
  if (o.eval_micro_batch > 65536) fail(fmt::format("--eval-micro-batch {}: expected 0..65536", o.eval_micro_batch));
  if (o.eval_every > 0 && o.eval_batches == 0) fail("--eval-every: needs --eval-batches M (M >= 1)");
  if (o.eval_every == 0 && (o.eval_batches > 0 || o.eval_micro_batch > 0))
    fail("--eval-batches/--eval-micro-batch: need --eval-every K (K >= 1)");
  if (o.eval_every > 0 && o.framework != Framework::Zero3)
    fail("--eval-every: evaluation steps are modelled for --framework zero3 only");
  if (o.cublas_workspace > (std::uint64_t{1} << 40))
    fail(fmt::format("--cublas-workspace {}: expected 0..2^40 bytes", o.cublas_workspace));
  if (o.attention == AttentionImpl::Sdpa && o.model.family == ModelFamily::T5)
    fail("--attention sdpa: HF T5 has no SDPA path (docs/workload-model.md §2.4); use eager");
  if (o.attention == AttentionImpl::Eager && o.model.family == ModelFamily::Llama)
    fail("--attention eager: only sdpa is modelled for llama (docs/workload-model.md §2.5)");
  const bool fsdp = o.framework == Framework::Fsdp1 || o.framework == Framework::Fsdp2;
  if (o.optimizer == OptimizerKind::DsFusedAdam && fsdp)
    fail("--optimizer ds_fusedadam: DeepSpeed's FusedAdam needs --framework zero1, zero2 or zero3");
  if (o.sharding != ShardingStrategy::FullShard && o.framework != Framework::Fsdp1)
    fail("--sharding: only for --framework fsdp1");
  if (o.grad_flatten == GradFlatten::Prealloc && o.framework != Framework::Fsdp1)
    fail("--grad-flatten prealloc: only for --framework fsdp1 (docs/workload-model.md §3.5)");
  // DeepSpeed sizes are elements: 2^50 (10^15) is far beyond any configuration and keeps their
  // byte sizes (x 4) below kMaxTensorBytes.
  constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 50;
  const DeepSpeedOptions& ds = o.deepspeed;
  for (auto [flag, value, min] : {std::tuple<const char*, std::optional<std::uint64_t>, std::uint64_t>{
                                      "--ds-reduce-bucket-size", ds.reduce_bucket_size, 1},
                                  {"--ds-prefetch-bucket-size", ds.prefetch_bucket_size, 0},
                                  {"--ds-param-persistence-threshold", ds.param_persistence_threshold, 0},
                                  {"--ds-max-live-parameters", ds.max_live_parameters, 0},
                                  {"--ds-max-reuse-distance", ds.max_reuse_distance, 0},
                                  {"--ds-sub-group-size", ds.sub_group_size, 1}}) {
    if (value && (*value < min || *value > kMaxElements))
      fail(fmt::format("{} {}: expected {}..{} elements (2^50)", flag, *value, min, kMaxElements));
  }
  // The timing model's clock is written as signed 64-bit microseconds: rates and costs are bounded
  // so that no realistic run takes it anywhere near (TraceBuilder refuses a clock past 2^62 µs).
  const TimingOptions& t = o.timing;
  auto check_rate = [&](const char* flag, double v, double min, double max) {
    if (!(v >= min && v <= max)) fail(fmt::format("{} {}: expected {}..{}", flag, v, min, max));
  };
  if (t.matmul_tflops != 0) check_rate("--gpu-tflops", t.matmul_tflops, 0.001, 1e6);
  check_rate("--hbm-gbps", t.hbm_gbps, 0.001, 1e9);
  check_rate("--bus-gbps", t.bus_gbps, 0.001, 1e9);
  check_rate("--cpu-op-us", t.cpu_op_us, 0, 1e6);
  check_rate("--hook-us", t.hook_us, 0, 1e6);
  if (!(t.jitter >= 0) || t.jitter >= 1) fail(fmt::format("--jitter {}: expected 0 <= j < 1", t.jitter));
  check_rate("--side-delay-us", t.side_delay_us, 0, 1e6);
}

AttentionImpl default_attention(ModelFamily family) {
  return family == ModelFamily::Llama ? AttentionImpl::Sdpa : AttentionImpl::Eager;
}

std::string_view default_attention_reason(ModelFamily family) {
  switch (family) {
    case ModelFamily::Gpt2:
      return "the default for gpt2; sdpa is modelled too";
    case ModelFamily::T5:
      return "the only one modelled for t5";
    case ModelFamily::Llama:
      return "the only one modelled for llama";
  }
  return "";
}

std::string describe_options(const WorkloadOptions& o) {
  std::string s = fmt::format("fraglab gen: {} {} N={} rank={} b={} steps={} seed={} {} recompute={} attention={}",
                              o.model.name, name_of(o.framework), o.world_size, o.rank, o.micro_batch, o.steps, o.seed,
                              name_of(o.precision), name_of(o.recompute), name_of(o.attention));
  if (o.model.encoder_decoder())
    s += fmt::format(" src_len={} tgt_len={}", o.src_len, o.tgt_len);
  else
    s += fmt::format(" seq_len={}", o.seq_len);
  s += fmt::format(" padding={}", name_of(o.padding));
  if (o.framework == Framework::Fsdp1) s += fmt::format(" sharding={}", name_of(o.sharding));
  if (o.grad_accum > 1) s += fmt::format(" grad_accum={}", o.grad_accum);
  // The growth mechanisms appear only when on, so that today's descriptions stay as they were.
  if (o.dataset_size > 0) s += fmt::format(" dataset_size={}", o.dataset_size);
  if (o.eval_every > 0)
    s += fmt::format(" eval_every={} eval_batches={} eval_micro_batch={}", o.eval_every, o.eval_batches,
                     o.eval_micro_batch != 0 ? o.eval_micro_batch : o.micro_batch);
  if (o.cublas_workspace > 0) s += fmt::format(" cublas_workspace={}", o.cublas_workspace);
  if (o.timing.side_delay_us > 0) s += fmt::format(" side_delay_us={}", o.timing.side_delay_us);
  return s;
}

}  // namespace fraglab
