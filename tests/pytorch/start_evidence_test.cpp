// infer_start_blocks: block sizes of a cut-off trace's start state from the trace's evidence
// (start_evidence.hpp). Expected intervals are worked out from allocator-model §1.2, §3.1, §4.1-§4.3.
#include <gtest/gtest.h>

#include "pytorch/config.hpp"
#include "pytorch/start_evidence.hpp"
#include "support/events.hpp"

namespace fraglab::cca {
namespace {

using fraglab::test::alloc;
using fraglab::test::alloc_at;
using fraglab::test::segment;
using fraglab::test::with_op;

constexpr Addr S = 0x7f1000000000ull;

// A 24 MiB segment: L (id 1, 3.5 MiB, block unrecorded) at S, K (id 2, 2 MiB, block recorded)
// at S + 8 MiB. L's gap reaches K: 8 MiB. Split rule alone: 3.5 MiB (split) .. 4.5 MiB (a
// remainder of at most 1 MiB left unsplit, §4.1).
Trace two_blocks(std::vector<Event> events) {
  Trace t;
  t.initial.segments = {{S, 24 * MiB, 0, false, false}};
  t.initial.allocations = {{1, S, 3 * MiB + 512 * 1024, 0, 0, false}, {2, S + 8 * MiB, 2 * MiB, 2 * MiB, 0, false}};
  t.events = std::move(events);
  validate_trace(t, "two-blocks");
  return t;
}

BlockInterval only(const Trace& t, const Config& config = Config{}) {
  const StartEvidence ev = infer_start_blocks(t, config);
  EXPECT_EQ(ev.blocks.size(), 2u);
  EXPECT_FALSE(ev.blocks[1].has_value());  // K's block is recorded
  return ev.blocks[0].value_or(BlockInterval{});
}

TEST(StartEvidence, TheSplitRuleAloneLeavesAnInterval) {
  const BlockInterval b = only(two_blocks({with_op(Op::Free, 1)}));
  EXPECT_EQ(b.min, 3 * MiB + 512 * 1024);
  EXPECT_EQ(b.max, 4 * MiB + 512 * 1024);
  EXPECT_EQ(b.guess, 3 * MiB + 512 * 1024);  // gap 8 MiB: remainder 4.5 MiB > 1 MiB splits
  EXPECT_FALSE(b.determined());
  EXPECT_TRUE(b.error.empty());
}

// K is freed, then an alloc lands at S + 4 MiB: the free block after L (merged with K's) starts
// at L's end (§4.2, §4.3), so L's block is 4 MiB.
TEST(StartEvidence, AnAllocAfterTheBlockGivesItsEnd) {
  const BlockInterval b = only(two_blocks({with_op(Op::Free, 2), alloc_at(3, 6 * MiB, S + 4 * MiB)}));
  EXPECT_TRUE(b.determined());
  EXPECT_EQ(b.min, 4 * MiB);
  EXPECT_EQ(b.chosen(), 4 * MiB);
  EXPECT_NE(b.evidence.find("alloc 3 placed at 0x7f1000400000"), std::string::npos);
}

// K is freed and the first alloc after L lands at K's old address S + 8 MiB: had L's block ended
// earlier, the free block after it (merged with K's) would have served it from L's end. So L's
// block would be 8 MiB, but a 3.5 MiB request gets at most 4.5 MiB (§4.1): inconsistent.
TEST(StartEvidence, LandingAtTheNextAllocationChecksTheLeftover) {
  const BlockInterval b = only(two_blocks({with_op(Op::Free, 2), alloc_at(3, 2 * MiB, S + 8 * MiB)}));
  EXPECT_NE(b.error.find("inconsistent"), std::string::npos);
  EXPECT_NE(b.error.find("8388608 bytes"), std::string::npos);
  EXPECT_EQ(b.min, 3 * MiB + 512 * 1024);  // the interval is kept
}

// Once L is freed, later placements around it say nothing about its block; neither does an alloc
// placed before L's end, nor anything after an alloc whose address was not recorded.
TEST(StartEvidence, OnlySoundEvidenceCounts) {
  EXPECT_FALSE(only(two_blocks({with_op(Op::Free, 1), alloc_at(3, 1 * MiB + 4096, S + 4 * MiB)})).determined());
  EXPECT_FALSE(only(two_blocks({alloc(3, 6 * MiB), alloc_at(4, 1 * MiB + 4096, S + 4 * MiB)})).determined());
}

// Segments and allocations in no particular order: each allocation's interval comes from its own
// segment. L at S + 40 MiB is alone in its 24 MiB segment: 3.5 .. 4.5 MiB as above (a remainder
// of at most 1 MiB left unsplit, §4.1). M (512 KiB) sits in the last MiB of the segment at S: a
// large-pool remainder of 512 KiB is not more than 1 MiB, so M's block is the whole 1 MiB (§4.1).
TEST(StartEvidence, EachAllocationIsReadInItsOwnSegment) {
  Trace t;
  t.initial.segments = {{S + 40 * MiB, 24 * MiB, 0, false, false}, {S, 24 * MiB, 0, false, false}};
  t.initial.allocations = {{1, S + 40 * MiB, 3 * MiB + 512 * 1024, 0, 0, false},
                           {2, S + 23 * MiB, 512 * 1024, 0, 0, false}};
  validate_trace(t, "two-segments");
  const StartEvidence ev = infer_start_blocks(t, Config{});
  ASSERT_EQ(ev.blocks.size(), 2u);
  ASSERT_TRUE(ev.blocks[0] && ev.blocks[1]);
  EXPECT_EQ(ev.blocks[0]->min, 3 * MiB + 512 * 1024);
  EXPECT_EQ(ev.blocks[0]->max, 4 * MiB + 512 * 1024);
  EXPECT_EQ(ev.blocks[1]->min, MiB);
  EXPECT_EQ(ev.blocks[1]->max, MiB);
  EXPECT_EQ(ev.by_address, (std::vector<std::size_t>{1, 0}));  // M lies below L (adopt() reuses it)
}

// The same as above with ids far apart (a hand-written trace may use any u64; snapshots number
// from 0): the free of L is still seen, so the later alloc after L's end says nothing.
TEST(StartEvidence, FreesOfInitialAllocationsWithLargeIdsAreSeen) {
  constexpr AllocId L = AllocId{1} << 40;
  constexpr AllocId K = L + 12345;
  auto trace = [&](std::vector<Event> events) {
    Trace t;
    t.initial.segments = {{S, 24 * MiB, 0, false, false}};
    t.initial.allocations = {{L, S, 3 * MiB + 512 * 1024, 0, 0, false}, {K, S + 8 * MiB, 2 * MiB, 2 * MiB, 0, false}};
    t.events = std::move(events);
    validate_trace(t, "far-ids");
    return t;
  };
  // K freed, then an alloc at L's end: determined, as AnAllocAfterTheBlockGivesItsEnd.
  EXPECT_TRUE(only(trace({with_op(Op::Free, K), alloc_at(3, 6 * MiB, S + 4 * MiB)})).determined());
  // L freed first: nothing.
  EXPECT_FALSE(only(trace({with_op(Op::Free, L), alloc_at(3, 1 * MiB + 4096, S + 4 * MiB)})).determined());
}

// A 6 MiB request served by a new segment (20 MiB, §1.5) while L and K live: the free block
// after L is exactly 8 MiB - block (K bounds it), and it missed: 8 MiB - block < 6 MiB, block >
// 2 MiB: nothing new. A 4.25 MiB request that missed: block > 3.75 MiB -> >= 3.75 MiB + 512.
TEST(StartEvidence, ANewSegmentBoundsTheFreeSpaceAfterTheBlock) {
  constexpr Addr N = 0x7f2000000000ull;
  EXPECT_EQ(only(two_blocks({segment(Op::SegmentAlloc, N, 20 * MiB), alloc_at(3, 6 * MiB, N)})).min,
            3 * MiB + 512 * 1024);
  const BlockInterval b =
      only(two_blocks({segment(Op::SegmentAlloc, N, 20 * MiB), alloc_at(3, 4 * MiB + 256 * 1024, N)}));
  EXPECT_EQ(b.min, 3 * MiB + 768 * 1024 + 512);
  EXPECT_EQ(b.max, 4 * MiB + 512 * 1024);
  EXPECT_NE(b.evidence.find("alloc 3 of 4456448 bytes took a new segment"), std::string::npos);
  // Another stream's request, or one of the small pool, says nothing about L's pool.
  EXPECT_EQ(only(two_blocks({segment(Op::SegmentAlloc, N, 20 * MiB), alloc_at(3, 4 * MiB + 256 * 1024, N, 7)})).min,
            3 * MiB + 512 * 1024);
}

// max_split_size 4 MiB (>= MS blocks refused to normal requests, §3.2 step 4; set directly: the
// option's parser wants >= 20 MiB, the rule is the same at any size). A 3 MiB request
// (< MS) served by a new segment: the free block after L (exactly 8 MiB - block while K lives)
// was < 3 MiB (block > 5 MiB: beyond 4.5 MiB, impossible) or >= 4 MiB (block <= 4 MiB): so
// 3.5 .. 4 MiB. After K is freed that block may be larger: nothing is concluded.
TEST(StartEvidence, MaxSplitSizeMakesTooLargeBlocksMissToo) {
  constexpr Addr N = 0x7f2000000000ull;
  Config config;
  config.max_split_size = 4 * MiB;
  const BlockInterval b = only(two_blocks({segment(Op::SegmentAlloc, N, 20 * MiB), alloc_at(3, 3 * MiB, N)}), config);
  EXPECT_EQ(b.min, 3 * MiB + 512 * 1024);
  EXPECT_EQ(b.max, 4 * MiB);
  const BlockInterval c =
      only(two_blocks({with_op(Op::Free, 2), segment(Op::SegmentAlloc, N, 20 * MiB), alloc_at(3, 3 * MiB, N)}), config);
  EXPECT_EQ(c.max, 4 * MiB + 512 * 1024);
}

// What followed the free block L was carved from was the segment end or a live large-pool block,
// and those are more than 1 MiB (§2). A 39 MiB + 1 request (rounded 39 MiB + 512) alone in a 40
// MiB segment: splitting needed more than 1 MiB left, and a block of 39 MiB + 512 .. 40 MiB - 512
// leaves less than 1 MiB + 512 for a neighbour: only the whole 40 MiB remains.
TEST(StartEvidence, NoRoomForANeighbourMeansTheBlockReachesTheEnd) {
  Trace t;
  t.initial.segments = {{S, 40 * MiB, 0, false, false}};
  t.initial.allocations = {{1, S, 39 * MiB + 1, 0, 0, false}};
  const StartEvidence ev = infer_start_blocks(t, Config{});
  ASSERT_TRUE(ev.blocks[0].has_value());
  EXPECT_EQ(ev.blocks[0]->min, 40 * MiB);
  EXPECT_EQ(ev.blocks[0]->max, 40 * MiB);
}

// A 3.5 MiB request alone in a 5 MiB segment: remainder 1.5 MiB splits (block 3.5 MiB), or the
// source block ended before the segment end with room for a neighbour of 1 MiB + 512 after it:
// at most 5 MiB - 1 MiB - 512 = 4 MiB - 512 (the split rule alone would allow 4.5 MiB).
TEST(StartEvidence, NoRoomForANeighbourCapsTheBlock) {
  Trace t;
  t.initial.segments = {{S, 5 * MiB, 0, false, false}};
  t.initial.allocations = {{1, S, 3 * MiB + 512 * 1024, 0, 0, false}};
  const StartEvidence ev = infer_start_blocks(t, Config{});
  ASSERT_TRUE(ev.blocks[0].has_value());
  EXPECT_EQ(ev.blocks[0]->min, 3 * MiB + 512 * 1024);
  EXPECT_EQ(ev.blocks[0]->max, 4 * MiB - 512);
}

}  // namespace
}  // namespace fraglab::cca
