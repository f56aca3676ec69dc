// Rebuilding a cut-off trace's start state (allocator-model §12.2): segments at their recorded
// addresses, allocations with recorded or derived block sizes, gaps as free blocks.
#include <gtest/gtest.h>

#include "rig.hpp"

namespace fraglab::cca::test {
namespace {

using C = DeviceCall;
constexpr Addr X = 0x7f1000000000ull;  // a recorded address the SimDevice can honour

TEST(Adopt, DerivesBlockSizesFromTheGaps) {
  Rig r;
  InitialState s;
  s.segments = {{X, 20 * MiB, 0, false, false}};
  s.allocations = {{1, X, 5 * MiB, 0, 0, false}, {2, X + 5 * MiB, 3 * MiB, 0, 0, false}};
  const auto blocks = r.alloc.adopt(s);
  // #1: rounded 5 MiB >= its 5 MiB gap (to #2) -> the whole gap, 5 MiB.
  // #2: rounded 3 MiB in a 15 MiB gap (to the end): remainder 12 MiB > 1 MiB -> split -> 3 MiB;
  // the free tail [X+8M, 12M) is an inactive split block.
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0]->addr, X);
  EXPECT_EQ(blocks[0]->size, 5 * MiB);
  EXPECT_EQ(blocks[1]->addr, X + 5 * MiB);
  EXPECT_EQ(blocks[1]->size, 3 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Malloc, X, 20 * MiB}}));
  EXPECT_EQ(r.stat("segment.large_pool.current"), 1);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(r.stat("allocated_bytes.all.current"), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(r.stat("allocation.all.current"), 2);
  EXPECT_EQ(r.stat("inactive_split_bytes.all.current"), static_cast<std::int64_t>(12 * MiB));
  EXPECT_EQ(r.stat("num_device_alloc"), 0);  // the start state is not a replay event
  // The tail serves a 12 MiB request exactly (no split; the split block becomes active).
  EXPECT_EQ(r.malloc(12 * MiB).addr, X + 8 * MiB);
  EXPECT_EQ(r.stat("inactive_split.all.current"), 0);
  // Freeing #1 makes an inactive split block of 5 MiB.
  r.alloc.free(*blocks[0]);
  EXPECT_EQ(r.stat("inactive_split_bytes.all.current"), static_cast<std::int64_t>(5 * MiB));
}

TEST(Adopt, TakesTheWholeGapWhenTheRemainderIsTooSmall) {
  Rig r;
  InitialState s;
  // 11 MiB in a 12 MiB segment: remainder exactly 1 MiB, not > 1 MiB -> block = 12 MiB.
  s.segments = {{X, 12 * MiB, 0, false, false}};
  s.allocations = {{1, X, 11 * MiB, 0, 0, false}};
  EXPECT_EQ(r.alloc.adopt(s)[0]->size, 12 * MiB);
}

TEST(Adopt, RecordedBlockSizesAndPendingFrees) {
  Rig r;
  InitialState s;
  s.segments = {{X, 2 * MiB, 5, true, false}};
  s.allocations = {{1, X, 100, 512, 5, false}, {2, X + 512, 700, 1024, 5, true}};
  const auto blocks = r.alloc.adopt(s);
  EXPECT_EQ(blocks[1]->size, 1024u);
  EXPECT_EQ(blocks[1]->stream, 5u);
  // #2 is pending: active, not allocated.
  EXPECT_EQ(r.stat("allocation.small_pool.current"), 1);
  EXPECT_EQ(r.stat("allocated_bytes.all.current"), 512);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 1536);
  EXPECT_EQ(r.stat("requested_bytes.all.current"), 800);
  r.alloc.free_completed(*blocks[1]);  // merges with the free tail
  r.alloc.free(*blocks[0]);            // the whole segment is free
  r.alloc.empty_cache();
  EXPECT_EQ(r.calls().back(), (Call{C::Free, X, 2 * MiB}));
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), 0);
}

TEST(Adopt, ShiftsBlocksWhenTheDeviceMovesTheSegment) {
  Rig r;
  ASSERT_EQ(r.device.malloc(2 * MiB, X), X);  // X is taken: the segment goes to the bump pointer B
  InitialState s;
  s.segments = {{X, 20 * MiB, 0, false, false}};
  s.allocations = {{1, X + 5 * MiB, 3 * MiB, 0, 0, false}};
  const auto blocks = r.alloc.adopt(s);
  EXPECT_EQ(blocks[0]->addr, B + 5 * MiB);
  EXPECT_EQ(r.malloc(5 * MiB).addr, B);  // the 5 MiB gap before it is a free block
}

TEST(Adopt, ExpandableRunsShareOneRange) {
  constexpr Addr E = 0x7f2000000000ull;
  Rig r("expandable_segments:True");
  InitialState s;
  s.segments = {{E, 40 * MiB, 0, false, true}, {E + 60 * MiB, 20 * MiB, 0, false, true}};
  s.allocations = {{1, E, 30 * MiB, 0, 0, false}};
  const auto blocks = r.alloc.adopt(s);
  // 30 MiB in a 40 MiB gap, expandable -> remainder 10 MiB >= 512 -> split: 30 MiB.
  EXPECT_EQ(blocks[0]->size, 30 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, E, 40 * MiB}, {C::Map, E + 60 * MiB, 20 * MiB}}));
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(60 * MiB));
  EXPECT_EQ(r.stat("segment.all.current"), 0);
  EXPECT_EQ(r.alloc.segments().size(), 2u);
  // Free all, empty_cache: set order by size: [E+60M, 20M) first, then [E, 40M).
  r.alloc.free(*blocks[0]);
  r.alloc.empty_cache();
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, E, 40 * MiB},
                                          {C::Map, E + 60 * MiB, 20 * MiB},
                                          {C::Unmap, E + 60 * MiB, 20 * MiB},
                                          {C::Unmap, E, 40 * MiB}}));
  EXPECT_EQ(r.stat("num_device_free"), 2);
  EXPECT_EQ(r.device.counters().release_calls, 1u);
}

// prepare() reads the range's start from the trace (fraglab/start_state.hpp): the trace maps 20
// MiB at E below the run at E + 40 MiB, so the range starts at E and [E, E + 40 MiB) is unmapped
// at the start. Default device (80 GiB): ranges of 90 GiB. A 20 MiB request then finds no free
// block and grows from the lowest unmapped block with room, E (§7.2): one map at E, no new range.
TEST(Adopt, ExpandableRangeStartsWherePrepareInferredIt) {
  constexpr Addr E = 0x7f2000000000ull;
  Rig r("expandable_segments:True");
  Trace t;
  t.initial.segments = {{E + 40 * MiB, 20 * MiB, 0, false, true}};
  t.initial.allocations = {{1, E + 40 * MiB, 20 * MiB, 20 * MiB, 0, false}};
  Event map;
  map.op = Op::SegmentMap;
  map.addr = E;
  map.size = 20 * MiB;
  map.has_addr = true;
  Event request;
  request.op = Op::Alloc;
  request.id = 2;
  request.size = 20 * MiB;
  t.events = {map, request};
  r.alloc.prepare(t);
  r.alloc.adopt(t.initial);
  EXPECT_EQ(r.malloc(20 * MiB).addr, E);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, E + 40 * MiB, 20 * MiB}, {C::Map, E, 20 * MiB}}));
  EXPECT_EQ(r.device.counters().reserve_calls, 1u);
}

TEST(Adopt, RejectsAllocationsOutsideSegments) {
  Rig r;
  InitialState s;
  s.segments = {{X, 2 * MiB, 0, true, false}};
  s.allocations = {{9, X + 4 * MiB, 100, 0, 0, false}};
  EXPECT_THROW(r.alloc.adopt(s), InputError);
}

// Segments and allocations given in no particular order: each allocation belongs to the segment
// it lies in (small pool: a rounded request splits off whenever 512 bytes or more remain, §4.1, so
// a block ends at its rounded size unless the next allocation or the segment's end comes first).
TEST(Adopt, EachAllocationGoesToTheSegmentItLiesIn) {
  Rig r;
  InitialState s;
  s.segments = {
      {X + 40 * MiB, 2 * MiB, 0, true, false}, {X, 2 * MiB, 0, true, false}, {X + 20 * MiB, 2 * MiB, 0, true, false}};
  s.allocations = {{1, X + 22 * MiB - 512, 100, 0, 0, false},  // the last 512 bytes of the third
                   {2, X, 100, 0, 0, false},                   // the start of the first
                   {3, X + 40 * MiB, 1000, 0, 0, false},
                   {4, X + 20 * MiB, 100, 0, 0, false}};
  const auto blocks = r.alloc.adopt(s);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0]->size, 512u);   // 512 bytes to the segment's end
  EXPECT_EQ(blocks[1]->size, 512u);   // split off 2 MiB
  EXPECT_EQ(blocks[2]->size, 1024u);  // split off 2 MiB
  EXPECT_EQ(blocks[3]->size, 512u);   // split off the 2 MiB - 512 before #1
  EXPECT_EQ(r.stat("segment.small_pool.current"), 3);
  EXPECT_EQ(r.stat("allocated_bytes.all.current"), 2560);
}

TEST(Adopt, AnAllocationBeforeBetweenOrAfterTheSegmentsIsNamed) {
  for (const Addr addr : {X - 512, X + 2 * MiB, X + 20 * MiB - 512, X + 22 * MiB}) {
    SCOPED_TRACE(addr);
    Rig r;
    InitialState s;
    s.segments = {{X + 20 * MiB, 2 * MiB, 0, true, false}, {X, 2 * MiB, 0, true, false}};
    s.allocations = {{1, X + 512, 100, 512, 0, false}, {9, addr, 100, 512, 0, false}};
    try {
      r.alloc.adopt(s);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("initial allocation 9 at"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("lies outside every initial segment"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace fraglab::cca::test
