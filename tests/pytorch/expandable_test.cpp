// Expandable segments (allocator-model §7, trap §14.8). Default device: 80 GiB, so each reserved range
// is page * ceil(90 GiB / page) = 90 GiB for both 2 MiB and 20 MiB pages; the first range starts
// at B. Large-pool pages are 20 MiB.
#include <gtest/gtest.h>

#include "rig.hpp"

namespace fraglab::cca::test {
namespace {

using C = DeviceCall;

TEST(Expandable, GrowsFromTheLowestAddressAndUnmapsOnlyWholeFreePages) {
  Rig r("expandable_segments:True");
  // 5 MiB: no free block -> new range at B, map ceil(5/20) = 1 page [B, B+20M); split with the
  // >= 512 rule: a = [B, B+5M), free [B+5M, 15M).
  const Block a = r.malloc(5 * MiB);
  EXPECT_EQ(a.addr, B);
  EXPECT_EQ(a.size, 5 * MiB);
  // 30 MiB: the 15 MiB free block is too small -> grow: the unmapped block at B+20M is preceded
  // by that free block, so the candidate starts at B+5M; map min(15 MiB, 90 GiB - 20 MiB)
  // -> 1 page at B+20M, merged: [B+5M, 35M) -> b = [B+5M, 30M), free [B+35M, 5M).
  const Block b = r.malloc(30 * MiB);
  EXPECT_EQ(b.addr, B + 5 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, B, 20 * MiB}, {C::Map, B + 20 * MiB, 20 * MiB}}));
  // Trap §14.8: no segment is counted; reserved moves in pages; no inactive_split.
  EXPECT_EQ(r.stat("segment.all.allocated"), 0);
  EXPECT_EQ(r.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(r.stat("num_device_alloc"), 2);
  EXPECT_EQ(r.stat("inactive_split.all.allocated"), 0);
  // Free a: [B, 5M) holds no whole page; [B+35M, 5M) neither (pages are [0,20) [20,40) MiB).
  r.alloc.free(a);
  r.alloc.empty_cache();
  EXPECT_EQ(r.calls().size(), 2u);
  EXPECT_EQ(r.stat("num_device_free"), 0);
  // Free b: everything merges into [B, 40M), two whole pages -> one unmap call; the range is
  // then one unmapped block and its address space is released.
  r.alloc.free(b);
  EXPECT_EQ(r.calls().size(), 2u);  // never unmapped on a plain free
  r.alloc.empty_cache();
  EXPECT_EQ(r.calls().back(), (Call{C::Unmap, B, 40 * MiB}));
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(r.stat("num_device_free"), 1);
  EXPECT_EQ(r.device.counters().release_calls, 1u);
}

TEST(Expandable, SmallPoolUsesTwoMiBPages) {
  Rig r("expandable_segments:True");
  const Block a = r.malloc(1);  // small pool: 1 page of 2 MiB at B
  EXPECT_EQ(a.addr, B);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, B, 2 * MiB}}));
  EXPECT_EQ(r.stat("reserved_bytes.small_pool.current"), static_cast<std::int64_t>(2 * MiB));
}

TEST(Expandable, SearchPrefersAnInteriorBlockOverTheGrowingTail) {
  Rig r("expandable_segments:True");
  r.malloc(20 * MiB);                  // [B, 20M) exactly one page, no split
  const Block x = r.malloc(10 * MiB);  // new page [B+20M, 20M) -> x = [B+20M, 10M), free [B+30M, 10M)
  r.malloc(6 * MiB);                   // best fit [B+30M, 10M) -> [B+30M, 6M), tail T = [B+36M, 4M)
  r.alloc.free(x);                     // interior X = [B+20M, 10M) between two allocated blocks
  // 3 MiB: best fit is T (4 MiB), but T touches the unmapped rest of the range, so its
  // effective size is 4 MiB + (90 GiB - 40 MiB); the next block X has effective size 10 MiB,
  // smaller -> X is taken (§7.4). Plain best fit would give B+36M.
  EXPECT_EQ(r.malloc(3 * MiB).addr, B + 20 * MiB);
  EXPECT_EQ(r.calls().size(), 2u);  // no growth
}

TEST(Expandable, AFailedMultiPageGrowLeavesTheFirstPagesMapped) {
  // 100 MiB device: ranges are 20 MiB * ceil(112.5 / 20) = 120 MiB.
  Rig r("expandable_segments:True", 100 * MiB);
  r.malloc(20 * MiB);                  // page 0: a = [B, 20M)
  const Block b = r.malloc(20 * MiB);  // page 1
  const Block c = r.malloc(20 * MiB);  // page 2
  r.alloc.free(b);
  r.alloc.empty_cache();  // page 1 unmapped: U = [B+20M, 20M)
  r.alloc.free(c);        // F = [B+40M, 20M) free and mapped; V = [B+60M, 60M) unmapped
  r.calls().clear();
  // 90 MiB: no free block fits. Grow: the first unmapped block U (its prev is allocated) starts
  // U + F + V = 100 MiB of room. Map U (1 page, 60 MiB now in use) -> merges with F: 40 MiB.
  // Then map min(50, 60) MiB of V -> 3 pages = 60 MiB > 40 MiB left -> fails: U stays mapped.
  // Rung d: sync, unmap the free [B+20M, 40M) (2 pages) -> merges into one unmapped block
  // [B+20M, 100M); retry: map 5 pages = 100 MiB > 80 MiB left -> OOM.
  EXPECT_FALSE(r.alloc.malloc(90 * MiB, 0).has_value());
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Map, B + 20 * MiB, 20 * MiB}, {C::Unmap, B + 20 * MiB, 40 * MiB}}));
  EXPECT_EQ(r.stat("num_device_alloc"), 4);  // three pages + the one of the failed grow
  EXPECT_EQ(r.stat("num_device_free"), 2);
  EXPECT_EQ(r.stat("num_alloc_retries"), 1);
  EXPECT_EQ(r.stat("num_ooms"), 1);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(20 * MiB));
  EXPECT_NE(r.alloc.last_oom_message().find("Tried to allocate 90.00 MiB."), std::string::npos);
}

TEST(Expandable, SegmentsViewReportsMappedRuns) {
  Rig r("expandable_segments:True", 100 * MiB);
  r.malloc(20 * MiB);
  const Block b = r.malloc(20 * MiB);
  r.malloc(20 * MiB);
  r.alloc.free(b);
  r.alloc.empty_cache();  // [B,20M) mapped, [B+20M,20M) unmapped, [B+40M,20M) mapped
  const auto segs = r.alloc.segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].addr, B);
  EXPECT_EQ(segs[1].addr, B + 40 * MiB);
  EXPECT_TRUE(segs[0].expandable);
  EXPECT_EQ(segs[1].size, 20 * MiB);
}

}  // namespace
}  // namespace fraglab::cca::test
