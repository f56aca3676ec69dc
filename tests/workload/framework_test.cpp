// Framework mechanics against workload-model §3-§5: FSDP1's allocation counts per step (§5.1),
// its rate limiter (§3.1), optimizer state creation (§3.4), DeepSpeed ZeRO-3's step-1 behaviour
// and persistence threshold (§4.1).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "trace_walk.hpp"
#include "workload/streams.hpp"

namespace fraglab {
namespace {

using testing::reference_options;
using testing::TraceWalk;
using workload::Stream;
using workload::stream_id;

// Allocations per (step, phase, stream, tag).
class Counts {
 public:
  explicit Counts(const Trace& t) {
    TraceWalk w(t);
    w.run([&](std::size_t, const Event& e) {
      if (e.op == Op::Alloc) ++n_[{w.pos.step, w.pos.phase, e.stream, std::string(t.string_at(e.tag))}];
    });
  }
  int operator()(std::int64_t step, const std::string& phase, StreamId stream, const std::string& tag) const {
    auto it = n_.find({step, phase, stream, tag});
    return it == n_.end() ? 0 : it->second;
  }

 private:
  std::map<std::tuple<std::int64_t, std::string, StreamId, std::string>, int> n_;
};
Counts count_allocs(const Trace& t) { return Counts(t); }

TEST(Fsdp1, AllocationCountsPerStep) {
  const Trace t = generate_trace(reference_options("gpt2-xl", 2, 2));
  auto n = count_allocs(t);
  const StreamId unshard = stream_id(Stream::Unshard), pre = stream_id(Stream::PreUnshard),
                 post = stream_id(Stream::PostBackward);
  for (std::int64_t step : {1, 2}) {
    // 49 units: the root is gathered once (never resharded after forward), every block twice
    // (forward, and again in backward): 1 + 2·48 = 97 unsharded buffers and as many _mp_shards.
    EXPECT_EQ(n(step, "forward", unshard, "param") + n(step, "backward", unshard, "param"), 97);
    EXPECT_EQ(n(step, "forward", pre, "comm") + n(step, "backward", pre, "comm"), 97);
    // One reduce-scatter output (bf16) and its fp32 copy per unit: 49 sharded gradients.
    EXPECT_EQ(n(step, "backward", post, "grad"), 2 * 49);
    // foreach AdamW: one sqrt temporary per FlatParameter.
    EXPECT_EQ(n(step, "optimizer", 0, "temp"), 49);
  }
  // Adam states: exp_avg and exp_avg_sq per FlatParameter at the first step only.
  EXPECT_EQ(n(1, "optimizer", 0, "opt"), 98);
  EXPECT_EQ(n(2, "optimizer", 0, "opt"), 0);
}

int max_gathered_blocks_in_forward(const WorkloadOptions& o) {
  const Trace t = generate_trace(o);
  TraceWalk w(t);
  int live = 0, most = 0;
  std::set<AllocId> gathered;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Alloc && e.stream == stream_id(Stream::Unshard)) gathered.insert(e.id);
    if ((e.op == Op::Free || e.op == Op::FreeCompleted) && gathered.erase(e.id)) --live;
    if (e.op == Op::Alloc && gathered.count(e.id)) ++live;
    if (w.pos.step == 2 && w.pos.phase == "forward") most = std::max(most, live);
  });
  return most;
}

TEST(Fsdp1, RateLimiterBoundsOutstandingAllGathers) {
  // limit_all_gathers: an unshard with two reshard events queued waits for the oldest, so at
  // most the root, the unit in use and two freed-but-pending buffers are held (wm §3.1).
  WorkloadOptions o = reference_options("gpt2-xl", 8, 2);
  EXPECT_LE(max_gathered_blocks_in_forward(o), 4);
  // Without it the CPU runs ahead of the GPU and pending frees pile up.
  o.limit_all_gathers = false;
  EXPECT_GT(max_gathered_blocks_in_forward(o), 4);
}

TEST(Fsdp1, ShardGradOpKeepsEveryUnitGatheredThroughForward) {
  // SHARD_GRAD_OP: no reshard after forward → the whole bf16 model (2Ψ) is gathered at the end of
  // forward and no unit is all-gathered again in backward (wm §3.1).
  WorkloadOptions o = reference_options("gpt2-xl", 2, 2);
  o.sharding = ShardingStrategy::ShardGradOp;
  auto n = count_allocs(generate_trace(o));
  EXPECT_EQ(n(2, "forward", stream_id(Stream::Unshard), "param"), 49);
  EXPECT_EQ(n(2, "backward", stream_id(Stream::Unshard), "param"), 0);
}

TEST(Zero3, StepOneFetchesOnDemandAndLaterStepsPrefetch) {
  WorkloadOptions o = reference_options("t5-3b", 2, 2);
  o.framework = Framework::Zero3;
  auto n = count_allocs(generate_trace(o));
  const StreamId ag = stream_id(Stream::DsAllGather);
  // Coalesced (multi-parameter) gathers go through a flat "comm" buffer: only prefetches make them.
  EXPECT_EQ(n(1, "forward", ag, "comm") + n(1, "backward", ag, "comm"), 0);
  EXPECT_GT(n(2, "forward", ag, "comm"), 0);
  // Every T5 Linear is gathered (none is under 1e5 elements), norms stay resident.
  EXPECT_GT(n(1, "forward", ag, "param"), 0);
}

TEST(Zero3, PersistenceThresholdKeepsSmallParametersWhole) {
  // HF "auto": persistence 10·h = 16,000 for GPT2-XL; every bias and LayerNorm (≤ 6,400) stays
  // whole, so gathers only ever fetch the four weight matrices of a block and wte/wpe.
  WorkloadOptions o = reference_options("gpt2-xl", 2, 2);
  o.framework = Framework::Zero3;
  o.deepspeed.hf_auto = true;
  const Trace t = generate_trace(o);
  std::set<Bytes> sizes;
  for (const Event& e : t.events)
    if (e.op == Op::Alloc && e.stream == stream_id(Stream::DsAllGather) && t.string_at(e.tag) == "param")
      sizes.insert(e.size);
  // Padded to N·ceil(n/N) elements of bf16: c_attn 7,680,000, c_proj 2,560,000, c_fc and
  // mlp.c_proj 10,240,000, wte 80,411,200, wpe 1,638,400 → bytes ×2. Persistent parameters are
  // gathered again after each step (small sizes); list only the big ones.
  std::set<Bytes> big;
  for (Bytes s : sizes)
    if (s > 100'000) big.insert(s);
  EXPECT_EQ(big, (std::set<Bytes>{2 * 7'680'000u, 2 * 2'560'000u, 2 * 10'240'000u, 2 * 80'411'200u, 2 * 1'638'400u}));
}

TEST(Zero2, IpgBucketPerBackwardAndPartitionUntilTheStep) {
  WorkloadOptions o = reference_options("gpt2-xl", 2, 2);
  o.framework = Framework::Zero2;
  o.deepspeed.reduce_bucket_size = 50'000'000;
  const Trace t = generate_trace(o);
  // The bucket (bf16, 100 MB) is allocated at each backward start; grads_in_partition
  // (2·Ψ/N = 1.56 GB) at the first reduction of each backward.
  auto n = count_allocs(t);
  EXPECT_EQ(n(2, "backward", 0, "comm"), 1);
  std::set<Bytes> grads;
  for (const Event& e : t.events)
    if (e.op == Op::Alloc && t.string_at(e.tag) == "grad" && e.size > 1'000'000'000) grads.insert(e.size);
  EXPECT_TRUE(grads.count(2 * 1'557'611'200u / 2)) << "grads_in_partition";
}

}  // namespace
}  // namespace fraglab
