// Cut-off traces whose start state holds blocks the snapshot does not record (allocator-model §12.2):
// their sizes come from the trace's own evidence, and what it leaves open is reported. Every
// expected value is derived by hand from allocator-model in the comment above the test.
#include <gtest/gtest.h>

#include "fraglab/start_state.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

using test::alloc_at;
using test::segment;
using test::with_op;

constexpr Addr S1 = 0x7f1000000000ull;  // 24 MiB segment (the lower address)
constexpr Addr S2 = 0x7f2000000000ull;
constexpr Addr S3 = 0x7f3000000000ull;
constexpr Bytes kL = 3 * MiB + 512 * 1024;  // L's request: 3.5 MiB, rounds to itself (§1.2)

// The start state of the worked example: before the history, 20 MiB made S2 and was freed; 24 MiB
// made S1 and was freed; Q = 4 MiB at S1; N = 20 MiB at S1 + 4 MiB (a tie with S2: lower address,
// §3.1); Q freed; L = 3.5 MiB took Q's 4 MiB block whole (remainder 0.5 MiB <= 1 MiB: no split,
// §4.1); N freed (merged into S1's 20 MiB tail). Only L is live at the start, block unrecorded.
Trace cut_off(bool with_s2, std::vector<Event> events, Bytes s2_size = 20 * MiB) {
  Trace t;
  t.name = "cut-off";
  t.allocator_conf_known = true;
  t.initial.segments.push_back({S1, 24 * MiB, 0, false, false});
  if (with_s2) t.initial.segments.push_back({S2, s2_size, 0, false, false});
  t.initial.allocations = {{1, S1, kL, 0, 0, false}};
  t.events = std::move(events);
  validate_trace(t, "cut-off");
  return t;
}

// The recorded trace: M = 8 MiB at S1 + 4 MiB, free L, free M. M is the first alloc placed after
// L (at S1 + 3.5 MiB .. S1 + 24 MiB) while L lives, so L's block is 4 MiB (leftover 0.5 MiB: a
// legal no-split remainder). Then the free blocks are S1 + 4 MiB (20 MiB) and S2 (20 MiB): best
// fit ties, the lower address wins (§3.1): M at S1 + 4 MiB, as recorded. The gap rule's guess
// (3.5 MiB, remainder 20.5 MiB > 1 MiB splits) would leave 20.5 MiB after L and pick S2.
TEST(StartState, PositiveEvidenceFixesTheBlockAndTheReplayIsExact) {
  const Trace t = cut_off(true, {alloc_at(2, 8 * MiB, S1 + 4 * MiB), with_op(Op::Free, 1), with_op(Op::Free, 2)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.allocs_recorded, 1u);
  EXPECT_EQ(r.alloc_addresses_matched, 1u);
  EXPECT_TRUE(r.undetermined_blocks.empty()) << validation_text(r);
  EXPECT_EQ(validation_json(r)["undetermined_blocks"].size(), 0u);
}

// The variant without S2: a 20.25 MiB request while L lives was recorded as a new 22 MiB segment
// (§1.5: >= 10 MiB rounds up to 2 MiB). So the free block after L, 24 MiB - block, was below
// 20.25 MiB: block > 3.75 MiB, i.e. >= 3.75 MiB + 512 (block sizes are multiples of 512). The
// split rule caps it at 3.5 + 1 = 4.5 MiB. The guess (3.5 MiB) would have served the request
// from S1; any size in the interval reproduces the record, and the report says how far off the
// block may be.
TEST(StartState, NegativeEvidenceNarrowsTheBlock) {
  const Bytes request = 20 * MiB + 256 * 1024;
  const Trace t = cut_off(false, {segment(Op::SegmentAlloc, S3, 22 * MiB), alloc_at(2, request, S3),
                                  with_op(Op::Free, 1), with_op(Op::Free, 2)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.segment_events_matched, 1u);
  ASSERT_EQ(r.undetermined_blocks.size(), 1u);
  const StartBlock& b = r.undetermined_blocks[0];
  EXPECT_EQ(b.id, 1u);
  EXPECT_EQ(b.addr, S1);
  EXPECT_EQ(b.min_size, 3 * MiB + 768 * 1024 + 512);
  EXPECT_EQ(b.max_size, 4 * MiB + 512 * 1024);
  const auto j = validation_json(r);
  ASSERT_EQ(j["undetermined_blocks"].size(), 1u);
  EXPECT_EQ(j["undetermined_blocks"][0]["min_size"], 3 * MiB + 768 * 1024 + 512);
  bool listed = false;
  for (const std::string& note : r.notes) {
    listed = listed || note.find(
                           "1 blocks undetermined by the trace; block of allocation 1 at 0x7f1000000000: "
                           "3932672..4718592 bytes") != std::string::npos;
  }
  EXPECT_TRUE(listed) << validation_text(r);
}

// M placed at S1 + 6 MiB would make L's block 6 MiB: a 3.5 MiB request leaves a block of 3.5 MiB
// (split) or at most 4.5 MiB (remainder <= 1 MiB, §4.1). No allocator state explains it.
TEST(StartState, ContradictoryPlacementIsReportedAsAnInconsistentStartState) {
  const Trace t = cut_off(false, {alloc_at(2, 8 * MiB, S1 + 6 * MiB), with_op(Op::Free, 1)});
  const ValidationReport r = validate_replay(t);
  bool said = false;
  for (const std::string& note : r.notes) {
    said = said || (note.find("inconsistent") != std::string::npos &&
                    note.find("allocation 1 at 0x7f1000000000") != std::string::npos &&
                    note.find("6291456 bytes") != std::string::npos);
  }
  EXPECT_TRUE(said) << validation_text(r);
}

// S2 is a free 30 MiB segment. A 20.25 MiB request recorded at S2 says S1's free tail (24 MiB -
// L's block, exactly: it reaches the segment end) was not the better fit (§3.1): below 20.25 MiB,
// or above 30 MiB (impossible), or equal to 30 MiB at a higher address (impossible). So L's block
// is > 3.75 MiB: 3.75 MiB + 512 .. 4.5 MiB, and the replay sends the request to S2 as recorded.
TEST(StartState, PlacementInAWholeFreeSegmentNarrowsTheBlock) {
  const Bytes request = 20 * MiB + 256 * 1024;
  const Trace t = cut_off(true, {alloc_at(2, request, S2), with_op(Op::Free, 1)}, 30 * MiB);
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  ASSERT_EQ(r.undetermined_blocks.size(), 1u);
  EXPECT_EQ(r.undetermined_blocks[0].min_size, 3 * MiB + 768 * 1024 + 512);
  EXPECT_EQ(r.undetermined_blocks[0].max_size, 4 * MiB + 512 * 1024);
  EXPECT_NE(r.undetermined_blocks[0].evidence.find("went to the free segment at 0x7f2000000000"), std::string::npos);
}

// The same, but S2 (32 MiB) holds a recorded 2 MiB block at its end: the request went to a free
// block whose size the rule does not read, so L stays 3.5..4.5 MiB, and the guess 3.5 MiB leaves
// a 20.5 MiB tail, a better fit than S2's 30 MiB (§3.1): the replay puts the request at S1 + 3.5
// MiB. The request decided between S1 (holding the undetermined block) and S2: the divergence is
// the start state's, not the model's.
TEST(StartState, DivergenceNextToAnUndeterminedBlockIsAttributedToTheStartState) {
  const Bytes request = 20 * MiB + 256 * 1024;
  Trace t = cut_off(true, {alloc_at(2, request, S2), with_op(Op::Free, 1)}, 32 * MiB);
  t.initial.allocations.push_back({9, S2 + 30 * MiB, 2 * MiB, 2 * MiB, 0, false});
  const ValidationReport r = validate_replay(t);
  ASSERT_FALSE(r.exact);
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.first_divergence->event_index, 0u);
  EXPECT_EQ(r.first_divergence->category, "alloc_address");
  EXPECT_EQ(r.first_divergence->simulated, "0x7f1000380000");
  EXPECT_NE(r.first_divergence->cause.find("start state undetermined"), std::string::npos);
  EXPECT_NE(r.first_divergence->cause.find("allocation 1 at 0x7f1000000000 may be 3670016..4718592"),
            std::string::npos);
  EXPECT_EQ(validation_json(r)["first_divergence"]["cause"], "start state undetermined");
  EXPECT_EQ(validation_json(r)["first_divergence"]["cause_detail"], r.first_divergence->cause);
}

// A divergence where no undetermined block is involved stays a model error ("cause": "model").
TEST(StartState, OtherDivergencesStayModelErrors) {
  Trace t;
  t.allocator_conf_known = true;
  t.events = {segment(Op::SegmentAlloc, S1, 20 * MiB), alloc_at(1, 5 * MiB, S1), alloc_at(2, 5 * MiB, S1 + 6 * MiB)};
  const ValidationReport r = validate_replay(t);
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_TRUE(r.first_divergence->cause.empty());
  EXPECT_EQ(validation_json(r)["first_divergence"]["cause"], "model");
}

// expandable_segments:True. At the start one 20 MiB page is mapped at E + 40 MiB, holding a live
// 20 MiB block. The trace maps 20 MiB at E and places a 20 MiB request there. Growth maps the
// lowest unmapped block with room, from its start (§7.2), so E is the start of the range and
// [E, E + 40 MiB) was unmapped: the range starts 40 MiB below its first run. Assuming it starts
// at the run, growth would map above the run, at E + 60 MiB.
TEST(StartState, ExpandableRangeStartsAtTheFirstMapBelowItsRuns) {
  constexpr Addr E = 0x7f1000000000ull;
  Trace t;
  t.allocator_conf = "expandable_segments:True";
  t.allocator_conf_known = true;
  t.initial.segments = {{E + 40 * MiB, 20 * MiB, 0, false, true}};
  t.initial.allocations = {{1, E + 40 * MiB, 20 * MiB, 20 * MiB, 0, false}};
  t.events = {segment(Op::SegmentMap, E, 20 * MiB), alloc_at(2, 20 * MiB, E), with_op(Op::Free, 2)};
  validate_trace(t, "expandable");
  const std::vector<ExpandableRangeStart> ranges = infer_expandable_ranges(t, 60 * MiB, 60 * MiB);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].first_run, E + 40 * MiB);
  EXPECT_EQ(ranges[0].base, E);
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.segment_events_matched, 1u);
  EXPECT_EQ(r.alloc_addresses_matched, 1u);
}

// A map below the run that served a small-pool request (<= 1 MiB, §2) belongs to the small
// pool's range, and one more than a range below the run's end cannot share its range.
TEST(StartState, ExpandableMapsOfAnotherPoolOrRangeDoNotMoveTheBase) {
  constexpr Addr E = 0x7f1000000000ull;
  Trace t;
  t.initial.segments = {{E + 40 * MiB, 20 * MiB, 0, false, true}};
  t.events = {segment(Op::SegmentMap, E + 20 * MiB, 2 * MiB), alloc_at(2, 4096, E + 20 * MiB),
              segment(Op::SegmentMap, E - 100 * MiB, 20 * MiB), alloc_at(3, 20 * MiB, E - 100 * MiB)};
  validate_trace(t, "expandable");
  const std::vector<ExpandableRangeStart> ranges = infer_expandable_ranges(t, 60 * MiB, 60 * MiB);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].base, E + 40 * MiB);
}

}  // namespace
}  // namespace fraglab
