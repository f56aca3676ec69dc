// fraglab diff on traces whose difference is derived by hand.
#include <gtest/gtest.h>

#include "fraglab/diff.hpp"
#include "fraglab/diff_report.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";
const DeviceSpec sim;  // the default 80 GiB sim device

const SpanProfile* span(const ReplayProfile& p, const std::string& step, const std::string& phase) {
  for (const SpanProfile& s : p.spans) {
    if (s.step == step && s.phase == phase) return &s;
  }
  return nullptr;
}
const TagProfile* tag(const ReplayProfile& p, const std::string& name) {
  for (const TagProfile& t : p.tags) {
    if (t.tag == name) return &t;
  }
  return nullptr;
}

// traces/samples/concat-{before,after}.jsonl, sizes in MiB: 3 FSDP units; per unit a 12 sharded
// fp32 param (kept), a 24 unsharded bf16 param (all-gathered for forward and again for
// backward), a 40 activation, per-parameter fp32 grads of 20, 16 and 12 and their 48 flat grad,
// and a 12 sharded grad (reduce-scatter output, kept until the optimizer phase).
//
// Every size is >= 10 MiB and a multiple of 2 MiB, so PyTorch gives a request that no cached block
// fits a segment of exactly its size, and best fit reuses cached ones. By hand:
//  forward: 3 shard segments (36), one 24 segment reused by all 3 all-gathers, 3 x 40 for the
//    activations: 180 reserved, requested peaks at 36 + 80 + 24 + 40 = 180.
//  backward of unit 3 (the first, all 120 of activations live, 24 param reuses its segment):
//    before: grads 20, 16, 12 and the cat output 48 all live at once: four new segments,
//      180 + 96 = 276 reserved and requested (event 19, the cat); units 2 and 1 then fit in the
//      cache (best fit into the freed 20/16/12/48 and split 40s), so 276 is the peak; 11 mallocs.
//    after: the flat 48 first (new segment, 228), then the 20 piece (new segment, 248, event 17);
//      the 16 and 12 pieces and the 12 shard are carved out of the freed 20: peak 248; 9 mallocs.
//  So B - A = -28 MiB of peak reserved and requested, exactly the cat's second copy minus the
//  largest piece (48 + 20 + 16 + 12 - 48 - 20 = 28), and fragmentation at both peaks is 0.
TEST(Diff, ConcatSamplesByHand) {
  const Trace a = read_trace(kSamples + "concat-before.jsonl");
  const Trace b = read_trace(kSamples + "concat-after.jsonl");
  const TraceDiff d = diff_traces(a, b, "pytorch", sim);
  const Metrics& ma = d.a.result.metrics;
  const Metrics& mb = d.b.result.metrics;
  EXPECT_EQ(ma.peak_reserved, 276 * MiB);
  EXPECT_EQ(mb.peak_reserved, 248 * MiB);
  EXPECT_EQ(ma.peak_requested, 276 * MiB);
  EXPECT_EQ(mb.peak_requested, 248 * MiB);
  EXPECT_EQ(ma.fragmentation_at_peak, 0.0);
  EXPECT_EQ(ma.num_device_alloc, 11u);
  EXPECT_EQ(mb.num_device_alloc, 9u);
  EXPECT_EQ(d.a.peak_event, 19);
  EXPECT_EQ(d.b.peak_event, 17);

  // Per phase: identical forward, the whole difference in backward.
  ASSERT_NE(span(d.a, "", ""), nullptr);  // the shard allocations before the first mark
  EXPECT_EQ(span(d.a, "", "")->peak_reserved, 36 * MiB);
  for (const ReplayProfile* p : {&d.a, &d.b}) {
    ASSERT_NE(span(*p, "0", "forward"), nullptr);
    EXPECT_EQ(span(*p, "0", "forward")->peak_reserved, 180 * MiB);
    EXPECT_EQ(span(*p, "0", "forward")->peak_requested, 180 * MiB);
    EXPECT_EQ(span(*p, "0", "forward")->events, 9u);  // marks are not events of a span
    // Optimizer phase: frees the 3 sharded grads; requested starts at 36 + 36 - 12 after the first.
    EXPECT_EQ(span(*p, "0", "optimizer")->peak_requested, 60 * MiB);
  }
  EXPECT_EQ(span(d.a, "0", "backward")->peak_reserved, 276 * MiB);
  EXPECT_EQ(span(d.b, "0", "backward")->peak_reserved, 248 * MiB);
  // The optimizer phase allocates nothing: reserved stays at the cached 276 / 248 while requested
  // drops to 60 after its first free, so its fragmentation at the span's peak is 1 - 60/276.
  EXPECT_DOUBLE_EQ(span(d.a, "0", "optimizer")->fragmentation_at_peak(), 1.0 - 60.0 / 276.0);

  // Per tag at the reserved peak: param 36 + 24, act 120; grad 20+16+12+48 = 96 vs 48+20 = 68.
  EXPECT_EQ(tag(d.a, "param")->live_at_peak_reserved, 60 * MiB);
  EXPECT_EQ(tag(d.a, "act")->live_at_peak_reserved, 120 * MiB);
  EXPECT_EQ(tag(d.a, "grad")->live_at_peak_reserved, 96 * MiB);
  EXPECT_EQ(tag(d.b, "grad")->live_at_peak_reserved, 68 * MiB);
  // Most grad bytes live at once: in unit 1's backward, two kept shards (24) plus 96 / 68.
  EXPECT_EQ(tag(d.a, "grad")->peak_live, 120 * MiB);
  EXPECT_EQ(tag(d.b, "grad")->peak_live, 92 * MiB);
  EXPECT_EQ(tag(d.a, "grad")->allocs, 15u);

  // The traces are the same up to event 16, the first allocation of unit 3's backward after its
  // all-gather: A's 20 MiB piece vs B's 48 MiB flat buffer; reserved parts right there
  // (180 + 20 vs 180 + 48).
  ASSERT_TRUE(d.divergence.input_event.has_value());
  EXPECT_EQ(*d.divergence.input_event, 16u);
  ASSERT_TRUE(d.divergence.reserved_event.has_value());
  EXPECT_EQ(*d.divergence.reserved_event, 16u);
  EXPECT_EQ(d.a.timeline[16].reserved, 200 * MiB);
  EXPECT_EQ(d.b.timeline[16].reserved, 228 * MiB);
  EXPECT_EQ(describe_event(a, 16), "event 16: alloc 20.00 MiB (20971520 B) tag grad (step 0, phase backward)");

  const std::string text = diff_report(a, b, d);
  EXPECT_NE(text.find("peak reserved                276.00 MiB     248.00 MiB     -28.00 MiB"), std::string::npos)
      << text;
  EXPECT_NE(text.find("inputs part at event 16"), std::string::npos) << text;
  const nlohmann::json j = diff_json(a, b, d);
  EXPECT_EQ(j["peak_reserved_delta_bytes"], -28 * static_cast<std::int64_t>(MiB));
  EXPECT_EQ(j["first_input_difference_event"], 16);
}

// Without a cache the device holds exactly the live requests (sizes are multiples of 512): the
// reserved figures equal the requested ones and both differ by the same 28 MiB.
TEST(Diff, NoCacheReservesWhatIsLive) {
  const Trace a = read_trace(kSamples + "concat-before.jsonl");
  const Trace b = read_trace(kSamples + "concat-after.jsonl");
  const TraceDiff d = diff_traces(a, b, "nocache", sim);
  EXPECT_EQ(d.a.result.metrics.peak_reserved, 276 * MiB);
  EXPECT_EQ(d.b.result.metrics.peak_reserved, 248 * MiB);
  EXPECT_EQ(d.a.result.metrics.num_device_alloc, 27u);  // one per alloc: 3 + 3*2 + 3*6
  EXPECT_EQ(d.b.result.metrics.num_device_alloc, 27u);
}

// Ids are names: renumbering allocations does not make two traces differ; a free of another
// allocation does.
TEST(Diff, FreesAreComparedByTheAllocationTheyFree) {
  const std::string head = "{\"fraglab_trace\":1,\"name\":\"x\"}\n";
  const Trace a = parse_jsonl(head +
                                  "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n"
                                  "{\"op\":\"alloc\",\"id\":2,\"size\":2097152}\n"
                                  "{\"op\":\"free\",\"id\":1}\n"
                                  "{\"op\":\"free\",\"id\":2}\n",
                              "a");
  const Trace renumbered = parse_jsonl(head +
                                           "{\"op\":\"alloc\",\"id\":7,\"size\":1048576}\n"
                                           "{\"op\":\"alloc\",\"id\":9,\"size\":2097152}\n"
                                           "{\"op\":\"free\",\"id\":7}\n"
                                           "{\"op\":\"free\",\"id\":9}\n",
                                       "b");
  const Trace swapped = parse_jsonl(head +
                                        "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n"
                                        "{\"op\":\"alloc\",\"id\":2,\"size\":2097152}\n"
                                        "{\"op\":\"free\",\"id\":2}\n"
                                        "{\"op\":\"free\",\"id\":1}\n",
                                    "c");
  const TraceDiff same = diff_traces(a, renumbered, "nocache", sim);
  EXPECT_FALSE(same.divergence.input_event.has_value());
  EXPECT_FALSE(same.divergence.reserved_event.has_value());
  const TraceDiff other = diff_traces(a, swapped, "nocache", sim);
  ASSERT_TRUE(other.divergence.input_event.has_value());
  EXPECT_EQ(*other.divergence.input_event, 2u);
  // nocache: after event 2, A holds the 2 MiB block, C the 1 MiB one (each rounded to 512 B).
  ASSERT_TRUE(other.divergence.reserved_event.has_value());
  EXPECT_EQ(*other.divergence.reserved_event, 2u);
  EXPECT_EQ(other.a.timeline[2].reserved, 2 * MiB);
  EXPECT_EQ(other.b.timeline[2].reserved, 1 * MiB);
  // A trace that is a prefix of the other parts where it ends.
  const Trace shorter = parse_jsonl(head + "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n", "d");
  EXPECT_EQ(first_divergence(a, same.a, shorter, diff_traces(shorter, shorter, "nocache", sim).a).input_event, 1u);
}

TEST(DiffCli, PrintsTheReportAndJson) {
  const auto run =
      testing::run_fraglab("diff " + kSamples + "concat-before.jsonl " + kSamples + "concat-after.jsonl --json -");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["a"]["run"]["peak_reserved_bytes"], 276 * MiB);
  EXPECT_EQ(j["b"]["run"]["peak_reserved_bytes"], 248 * MiB);
  const auto text = testing::run_fraglab("diff " + kSamples + "concat-before.jsonl " + kSamples + "concat-after.jsonl");
  EXPECT_NE(text.out.find("  0      backward       276.00 MiB   248.00 MiB   -28.00 MiB"), std::string::npos)
      << text.out;
  const auto one = testing::run_fraglab("diff " + kSamples + "concat-before.jsonl");
  EXPECT_EQ(one.status, 2);
  EXPECT_NE(one.err.find("expected two traces (A and B), got 1"), std::string::npos) << one.err;
}

}  // namespace
}  // namespace fraglab
