// check_sizes and estimated_events (fraglab/workload.hpp): what the generator would build, bounded
// before it builds it.
//
// Each size below is an upper bound of a family of tensors the layer tables and frameworks
// allocate, computed with saturating multiplication, so an overflow shows as a size past the limit
// instead of wrapping to a small one. Below kMaxTensorBytes (2^56) the generator's own products
// (these times small constants: 3h for fused QKV, 8-byte labels, gathered buckets) stay below
// 2^60, what a trace may hold (src/trace/live_allocations.hpp kImpossibleSize), and far from
// wrapping 64 bits; TraceBuilder checks every size and the live total once more as it writes them.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "fraglab/memory_budget.hpp"
#include "fraglab/workload.hpp"

namespace fraglab {

namespace {

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kSaturated : out;
}

std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kSaturated : out;
}

// One factor of a size, as the user gave it: "--micro-batch 8", "hidden 4096".
struct Factor {
  std::string text;
  std::uint64_t value;
};

void check_product(std::string_view what, std::uint64_t element_bytes, const std::vector<Factor>& factors) {
  std::uint64_t bytes = element_bytes;
  std::string named;
  for (const Factor& f : factors) {
    bytes = mul(bytes, f.value);
    named += fmt::format(" x {}", f.text);
  }
  if (bytes < kMaxTensorBytes) return;
  throw InputError(
      fmt::format("{} would take {} bytes ({} B{}), more than the {} bytes (2^56) a generated tensor may take; "
                  "reduce one of them",
                  what, bytes == kSaturated ? std::string("more than 2^64") : fmt::format("{}", bytes), element_bytes,
                  named, kMaxTensorBytes));
}

// Transformer blocks: decoder-only layers, or T5's encoder and decoder blocks.
std::uint64_t blocks_of(const ModelConfig& m) {
  return std::uint64_t{m.layers} + (m.encoder_decoder() ? m.decoder_layers : 0);
}

}  // namespace

std::uint64_t estimated_events(const WorkloadOptions& o) {
  // Measured (tests/workload/limits_test.cpp checks the bound over every family, framework and
  // recomputation choice): a block makes at most a few hundred events per forward + backward of
  // one micro-batch (T5 decoder blocks with recomputation under FSDP2 the most, ~560), and about as
  // many in the optimizer step and in init. The embeddings, the loss and the root unit count as
  // two more blocks.
  constexpr std::uint64_t kEventsPerBlockPass = 1024;
  std::uint64_t passes = add(mul(o.steps, add(o.grad_accum, 1)), 1);
  if (o.eval_every > 0) passes = add(passes, mul(o.steps / o.eval_every, o.eval_batches));  // forward only
  return mul(mul(add(blocks_of(o.model), 2), passes), kEventsPerBlockPass);
}

void check_sizes(const WorkloadOptions& o) {
  const ModelConfig& m = o.model;
  // The largest batch: a training micro-batch or an evaluation batch.
  const std::uint64_t b = std::max(o.micro_batch, o.eval_micro_batch);
  // The longest sequence, as the option that sets it.
  Factor seq{fmt::format("--seq-len {}", o.seq_len), o.seq_len};
  if (m.encoder_decoder()) {
    seq = o.src_len >= o.tgt_len ? Factor{fmt::format("--src-len {}", o.src_len), o.src_len}
                                 : Factor{fmt::format("--tgt-len {}", o.tgt_len), o.tgt_len};
  }
  const Factor batch{
      fmt::format("{} {}", o.eval_micro_batch > o.micro_batch ? "--eval-micro-batch" : "--micro-batch", b), b};
  const Factor heads{fmt::format("heads {}", m.heads), m.heads};
  const Factor hidden{fmt::format("hidden {}", m.hidden), m.hidden};
  const Factor vocab{fmt::format("vocab {}", m.vocab), m.vocab};
  // The widest activation: hidden, ffn or the attention's inner width (heads x head_dim).
  Factor width = hidden;
  if (m.ffn > width.value) width = {fmt::format("ffn {}", m.ffn), m.ffn};
  if (m.inner() > width.value)
    width = {fmt::format("heads {} x head_dim {}", m.heads, m.head_dim), mul(m.heads, m.head_dim)};

  // 4 bytes: fp32, the widest element any activation, gradient or optimizer state has.
  check_product("an activation", 4, {batch, seq, width});
  check_product("the attention scores", 4, {batch, heads, seq, seq});
  check_product("the logits", 4, {batch, seq, vocab});
  check_product("the embedding", 4, {vocab, hidden});

  // Parameters, bounded from above: embeddings (input, output, positions), and per block two
  // attentions (T5's decoder has self- and cross-attention), the MLP (up to three matrices),
  // norms and biases, T5's relative position bias.
  const std::uint64_t attention_width = std::max(m.hidden, mul(m.heads, m.head_dim));
  std::uint64_t per_block = mul(mul(8, m.hidden), attention_width);
  per_block = add(per_block, mul(mul(3, m.hidden), m.ffn));
  per_block = add(per_block, mul(16, m.hidden));
  per_block = add(per_block, mul(m.relative_attention_buckets, m.heads));
  std::uint64_t params = add(mul(mul(2, m.vocab), m.hidden), mul(m.max_positions, m.hidden));
  params = add(params, mul(blocks_of(m), per_block));
  // fp32 master weights, gradients and Adam's two moments: 16 bytes per parameter; the flat
  // buffers of FSDP and ZeRO hold them whole on one rank.
  check_product("the parameters with their gradients and optimizer state", 16,
                {{fmt::format("{} parameters (hidden {}, ffn {}, vocab {}, {} blocks)", params, m.hidden, m.ffn,
                              m.vocab, blocks_of(m)),
                  params}});
  const DeepSpeedOptions& ds = o.deepspeed;
  for (auto [flag, value] :
       {std::pair<const char*, std::optional<std::uint64_t>>{"--ds-reduce-bucket-size", ds.reduce_bucket_size},
        {"--ds-prefetch-bucket-size", ds.prefetch_bucket_size}}) {
    if (value) check_product(fmt::format("the {} bucket", flag), 4, {{fmt::format("{} {}", flag, *value), *value}});
  }

  // The events held in memory until the trace is written: each in the trace's vector (which may
  // hold twice its size while growing) and in the builder's bookkeeping.
  const std::uint64_t events = estimated_events(o);
  const std::uint64_t bytes = mul(events, 2 * sizeof(Event) + 16);
  check_memory_estimate(bytes, fmt::format("{} steps x {} micro-batches x {} blocks of '{}' (up to {} events)", o.steps,
                                           o.grad_accum, blocks_of(m), m.name, events));
}

}  // namespace fraglab
