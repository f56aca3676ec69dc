// The two start states of a trace that begins mid-run (README "What-if answers on a snapshot"): the
// recorded one adopts the segments the run held; the cold one has the policy allocate the live
// allocations on an empty device. Expected figures are derived by hand from allocator-model.
#include <gtest/gtest.h>

#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

constexpr Addr S1 = 0x7f0000000000ull;
constexpr Addr S2 = 0x7f0040000000ull;

// Two 20 MiB large-pool segments (what PyTorch makes for 1-10 MiB requests, allocator-model §1.5), each
// holding one live 3 MiB allocation; the second allocation's free was already requested.
Trace two_segment_start() {
  Trace t;
  t.name = "cut-off";
  t.initial.segments = {InitialSegment{S1, 20 * MiB, 0, false, false}, InitialSegment{S2, 20 * MiB, 0, false, false}};
  t.initial.allocations = {InitialAllocation{1, S1, 3 * MiB, 3 * MiB, 0, false},
                           InitialAllocation{2, S2, 3 * MiB, 3 * MiB, 0, true}};
  t.events = {test::with_op(Op::FreeCompleted, 2), test::alloc(3, 4 * MiB), test::with_op(Op::Free, 3),
              test::with_op(Op::Free, 1)};
  validate_trace(t, "cut-off");
  return t;
}

ReplayResult run(const Trace& t, const std::string& spec, StartState start) {
  SimDevice device(parse_sim_device("sim:1GiB"));
  std::unique_ptr<Policy> policy = create_policy(spec, device);
  Replayer replayer(t, *policy, device, ReplayOptions{.start_state = start});
  return replayer.run(spec);
}

TEST(StartState, RecordedAdoptsTheSegmentsTheRunHeld) {
  const ReplayResult r = run(two_segment_start(), "pytorch", StartState::Recorded);
  EXPECT_EQ(r.start_state, StartState::Recorded);
  EXPECT_EQ(r.metrics.reserved_at_start, 40 * MiB);  // both recorded segments
  // The 4 MiB request fits the 17 MiB free block after allocation 1 (or the freed S2): no new
  // segment, so the peak stays at the start.
  EXPECT_EQ(r.metrics.peak_reserved, 40 * MiB);
  EXPECT_EQ(r.metrics.peak_reserved_event, -1);
  EXPECT_EQ(r.metrics.num_device_alloc, 0u);
}

TEST(StartState, ColdAllocatesTheLiveAllocationsOnAnEmptyDevice) {
  const ReplayResult r = run(two_segment_start(), "pytorch", StartState::Cold);
  EXPECT_EQ(r.start_state, StartState::Cold);
  // Allocation 1 (3 MiB) makes one 20 MiB segment (§1.5); allocation 2 is carved from its 17 MiB
  // free remainder (split: remainder > 1 MiB, §4.1): 20 MiB in all before the first event.
  EXPECT_EQ(r.metrics.reserved_at_start, 20 * MiB);
  // Allocation 2 completes its free (its block merges back: 17 MiB free), then 4 MiB is carved
  // from that block: still 20 MiB.
  EXPECT_EQ(r.metrics.peak_reserved, 20 * MiB);
  EXPECT_EQ(r.metrics.peak_reserved_event, -1);
  EXPECT_EQ(r.metrics.peak_requested, 7 * MiB);  // allocation 1 (3 MiB) and 3 (4 MiB)
  EXPECT_EQ(r.metrics.num_ooms, 0u);
}

TEST(StartState, ColdIsTheSameStartForPoliciesThatCannotAdopt) {
  // nocache has no adopt() of its own: both start states make one cudaMalloc per live allocation.
  const Trace t = two_segment_start();
  const ReplayResult recorded = run(t, "nocache", StartState::Recorded);
  const ReplayResult cold = run(t, "nocache", StartState::Cold);
  EXPECT_EQ(recorded.metrics.reserved_at_start, cold.metrics.reserved_at_start);
  EXPECT_GE(cold.metrics.reserved_at_start, 6 * MiB);
  EXPECT_EQ(cold.metrics.num_device_alloc, 1u);  // only the 4 MiB request during the replay
  EXPECT_EQ(recorded.metrics.peak_reserved, cold.metrics.peak_reserved);
}

TEST(StartState, ColdStartThatDoesNotFitIsAnOomAtTheStart) {
  Trace t = two_segment_start();
  SimDevice device(parse_sim_device("sim:10MiB"));
  std::unique_ptr<Policy> policy = create_policy("pytorch", device);
  const ReplayResult r = Replayer(t, *policy, device, ReplayOptions{.start_state = StartState::Cold}).run("pytorch");
  // A 3 MiB request wants a 20 MiB segment (§1.5), which a 10 MiB device cannot give: both live
  // allocations fail before event 0 (their later frees are ignored), and so does the 4 MiB
  // request of event 1.
  ASSERT_EQ(r.ooms.size(), 3u);
  EXPECT_EQ(r.ooms[0].event_index, 0u);
  EXPECT_NE(r.ooms[0].message.find("initial state"), std::string::npos);
  EXPECT_EQ(r.ooms[2].event_index, 1u);
  EXPECT_EQ(r.metrics.peak_requested, 0u);
}

TEST(SpecEquivalence, DefaultsAndOrderDoNotMatter) {
  EXPECT_EQ(canonical_spec("pytorch:expandable_segments:False"), "pytorch");
  EXPECT_EQ(canonical_spec("pytorch:expandable_segments:true,max_split_size_mb:128"),
            "pytorch:expandable_segments:true,max_split_size_mb:128");
  EXPECT_TRUE(same_policy("pytorch:max_split_size_mb:128,expandable_segments:True",
                          "pytorch:expandable_segments:true,max_split_size_mb:128"));
  EXPECT_TRUE(same_policy("pytorch", "pytorch:garbage_collection_threshold:0"));
  EXPECT_FALSE(same_policy("pytorch", "pytorch:max_split_size_mb:128"));
  EXPECT_FALSE(same_policy("pytorch", "nocache"));
  // The last of a repeated key is the one the policy uses.
  EXPECT_TRUE(same_policy("pytorch:max_split_size_mb:64,max_split_size_mb:128", "pytorch:max_split_size_mb:128"));
}

}  // namespace
}  // namespace fraglab
