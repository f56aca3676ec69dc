// The malloc ladder, splitting, pools, the free path and statistics on a SimDevice
// (allocator-model §3-§6, §8, traps §14). B = the SimDevice's first address; every expected address,
// size and device call is derived by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "rig.hpp"

namespace fraglab::cca::test {
namespace {

using C = DeviceCall;

TEST(Allocator, SmallRequestsShareATwoMiBSegment) {
  Rig r;
  // 1 -> 512, small pool, miss -> cudaMalloc(2 MiB) at B; remainder 2,096,640 >= 512 -> split:
  // the block takes the low end [B, B+512).
  const Block a = r.malloc(1);
  EXPECT_EQ(a.addr, B);
  EXPECT_EQ(a.size, 512u);
  // 1,048,576 -> small (inclusive); best fit = the remainder at B+512 (2,096,640 bytes);
  // 2,096,640 - 1,048,576 = 1,048,064 >= 512 -> split again.
  const Block b = r.malloc(1048576);
  EXPECT_EQ(b.addr, B + 512);
  EXPECT_EQ(b.size, 1048576u);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Malloc, B, 2097152}}));
  EXPECT_EQ(r.stat("segment.small_pool.current"), 1);
  EXPECT_EQ(r.stat("segment.large_pool.current"), 0);
  // inactive_split: first split of a whole segment +1 (bytes +2,096,640), second split of an
  // already split block: bytes -1,048,576 -> 1,048,064, count stays 1.
  EXPECT_EQ(r.stat("inactive_split.all.current"), 1);
  EXPECT_EQ(r.stat("inactive_split_bytes.all.current"), 1048064);
}

TEST(Allocator, LargeRequestsOfSection1_6) {
  {
    Rig r;  // 1,048,577 -> 1,049,088, 20 MiB segment, remainder 19,922,432 > 1 MiB -> split.
    const Block a = r.malloc(1048577);
    EXPECT_EQ(a.addr, B);
    EXPECT_EQ(a.size, 1049088u);
    EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Malloc, B, 20971520}}));
    EXPECT_EQ(r.stat("inactive_split_bytes.large_pool.current"), 19922432);
  }
  {
    Rig r;  // 10,485,760 -> 10 MiB segment, remainder 0 -> whole segment.
    const Block a = r.malloc(10485760);
    EXPECT_EQ(a.size, 10485760u);
    EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Malloc, B, 10485760}}));
    EXPECT_EQ(r.stat("inactive_split.all.current"), 0);
  }
  {
    Rig r;  // 10,485,761 -> 10,486,272 in 12 MiB; remainder 2,096,640 > 1 MiB -> split.
    const Block a = r.malloc(10485761);
    EXPECT_EQ(a.size, 10486272u);
    EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Malloc, B, 12582912}}));
    EXPECT_EQ(r.stat("inactive_split_bytes.all.current"), 2096640);
    // The remainder is at B + 10,486,272 and serves a 2,096,640-byte-or-less large request:
    // 1,048,577 -> 1,049,088 fits; 2,096,640 - 1,049,088 = 1,047,552 <= 1 MiB -> no split.
    const Block b = r.malloc(1048577);
    EXPECT_EQ(b.addr, B + 10486272);
    EXPECT_EQ(b.size, 2096640u);
  }
  {
    Rig r;  // 26,214,401 -> 26,214,912 in 26 MiB; remainder 1,048,064 <= 1 MiB -> block = 26 MiB.
    const Block a = r.malloc(26214401);
    EXPECT_EQ(a.size, 27262976u);
    EXPECT_EQ(a.requested, 26214401u);
    EXPECT_EQ(r.stat("allocated_bytes.all.current"), 27262976);
    EXPECT_EQ(r.stat("requested_bytes.all.current"), 26214401);
  }
}

TEST(Allocator, LargeSplitNeedsStrictlyMoreThanOneMiB) {
  // Trap §14.2: 11 MiB -> 12 MiB segment, remainder exactly 1,048,576 -> not > 1 MiB -> no split.
  Rig r;
  EXPECT_EQ(r.malloc(11534336).size, 12582912u);
}

TEST(Allocator, BestFitBySizeThenAddressOnTheSameStream) {
  Rig r;
  // Whole segments: 12 MiB at B, 14 MiB at B+12 MiB, 12 MiB at B+26 MiB.
  const Block a = r.malloc(12 * MiB);
  const Block b = r.malloc(14 * MiB);
  const Block c = r.malloc(12 * MiB);
  ASSERT_EQ(c.addr, B + 26 * MiB);
  r.alloc.free(c);
  r.alloc.free(b);
  r.alloc.free(a);
  // 11 MiB: smallest block >= 11 MiB is 12 MiB; two of them -> lowest address B; remainder
  // 1 MiB is not > 1 MiB -> the whole 12 MiB block.
  const Block d = r.malloc(11 * MiB);
  EXPECT_EQ(d.addr, B);
  EXPECT_EQ(d.size, 12 * MiB);
  // 13 MiB: 12 < 13 -> the 14 MiB block.
  EXPECT_EQ(r.malloc(13 * MiB).addr, B + 12 * MiB);
  // Another stream never sees these blocks: a new segment at the bump pointer B+38 MiB.
  const Block e = r.malloc(12 * MiB, /*stream=*/7);
  EXPECT_EQ(e.addr, B + 38 * MiB);
  EXPECT_EQ(r.stat("segment.all.current"), 4);
}

TEST(Allocator, MergeOnFreeAndStatsAfterAHandWorkedSequence) {
  Rig r;
  // a: 1000 -> 1024 at B (split, remainder 2,096,128); b: 3000 -> 3072 at B+1024 (split of the
  // remainder, which becomes 2,093,056 at B+4096).
  const Block a = r.malloc(1000);
  const Block b = r.malloc(3000);
  EXPECT_EQ(b.addr, B + 1024);
  r.alloc.free(a);  // no free neighbour: [B,1024) free, split -> inactive_split +1, +1024
  r.alloc.free(b);  // merges both neighbours -> the whole 2 MiB segment, unsplit
  // allocation: +1 +1 -1 -1; bytes: +1024 +3072 -1024 -3072; requested: +1000 +3000 -1000 -3000.
  EXPECT_EQ(r.stat("allocation.all.current"), 0);
  EXPECT_EQ(r.stat("allocation.all.peak"), 2);
  EXPECT_EQ(r.stat("allocation.all.allocated"), 2);
  EXPECT_EQ(r.stat("allocation.all.freed"), 2);
  EXPECT_EQ(r.stat("allocated_bytes.all.peak"), 4096);
  EXPECT_EQ(r.stat("allocated_bytes.small_pool.freed"), 4096);
  EXPECT_EQ(r.stat("allocated_bytes.large_pool.allocated"), 0);
  EXPECT_EQ(r.stat("active_bytes.all.peak"), 4096);
  EXPECT_EQ(r.stat("requested_bytes.all.peak"), 4000);
  EXPECT_EQ(r.stat("requested_bytes.all.freed"), 4000);
  EXPECT_EQ(r.stat("segment.all.current"), 1);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), 2097152);
  // inactive_split count: +1 (a's split), +1 (free a), then net -2 (two merges, result whole).
  EXPECT_EQ(r.stat("inactive_split.all.current"), 0);
  EXPECT_EQ(r.stat("inactive_split.all.peak"), 2);
  EXPECT_EQ(r.stat("inactive_split.all.allocated"), 2);
  EXPECT_EQ(r.stat("inactive_split.all.freed"), 2);
  // bytes: +2,096,128; -3,072 (b shrinks it); +1,024 (free a); -2,094,080 (net of the merge).
  EXPECT_EQ(r.stat("inactive_split_bytes.all.allocated"), 2097152);
  EXPECT_EQ(r.stat("inactive_split_bytes.all.freed"), 2097152);
  EXPECT_EQ(r.stat("inactive_split_bytes.all.peak"), 2096128);
  EXPECT_EQ(r.stat("num_device_alloc"), 1);
  EXPECT_EQ(r.stat("max_split_size"), -1);
  // empty_cache: sync +1, the whole segment is returned.
  r.alloc.empty_cache();
  EXPECT_EQ(r.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(r.stat("segment.all.freed"), 1);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(r.stat("num_device_free"), 1);
  EXPECT_EQ(r.calls().back(), (Call{C::Free, B, 2097152}));
}

TEST(Allocator, StatsListingIsSortedLikeMemoryStats) {
  Rig r;
  const auto list = r.alloc.stats().listing(true);
  // 9 per-pool stats * 3 pools * 4 fields + 2 oversize * 4 + 6 counters = 122 keys.
  ASSERT_EQ(list.size(), 122u);
  EXPECT_EQ(list.front().first, "active.all.allocated");
  EXPECT_EQ(list.back().first, "segment.small_pool.peak");
  EXPECT_TRUE(std::is_sorted(list.begin(), list.end(), [](auto& x, auto& y) { return x.first < y.first; }));
  EXPECT_EQ(r.alloc.stats().listing(false).size(), 110u);  // 1.13: no requested_bytes (12 keys)
}

// Every key carries its own value: each statistic of a DeviceStats moved by its own amounts
// (so every field differs), listed, against the fields worked out here by hand and keyed by name
// (the order of torch.cuda.memory_stats(), sorted by key).
TEST(Allocator, StatsListingPairsEachKeyWithItsField) {
  DeviceStats s;
  std::vector<std::pair<std::string, std::int64_t>> expected;
  auto expect = [&](const std::string& prefix, std::int64_t allocated, std::int64_t current, std::int64_t freed,
                    std::int64_t peak) {
    expected.emplace_back(prefix + ".allocated", allocated);
    expected.emplace_back(prefix + ".current", current);
    expected.emplace_back(prefix + ".freed", freed);
    expected.emplace_back(prefix + ".peak", peak);
  };
  const std::pair<const char*, StatArray*> arrays[] = {{"allocation", &s.allocation},
                                                       {"segment", &s.segment},
                                                       {"active", &s.active},
                                                       {"inactive_split", &s.inactive_split},
                                                       {"allocated_bytes", &s.allocated_bytes},
                                                       {"reserved_bytes", &s.reserved_bytes},
                                                       {"active_bytes", &s.active_bytes},
                                                       {"inactive_split_bytes", &s.inactive_split_bytes},
                                                       {"requested_bytes", &s.requested_bytes}};
  std::int64_t k = 0;
  for (const auto& [name, array] : arrays) {
    ++k;
    // small: +a -c +f (f < c); large: +b -d +e (e < d); all in that order.
    const std::int64_t a = 1000 * k + 1, c = 10 * k + 3, f = 2 * k;
    const std::int64_t b = 1000 * k + 500, d = 10 * k + 7, e = 3 * k;
    array->increase(PoolKind::Small, static_cast<std::uint64_t>(a));
    array->decrease(PoolKind::Small, static_cast<std::uint64_t>(c));
    array->increase(PoolKind::Small, static_cast<std::uint64_t>(f));
    array->increase(PoolKind::Large, static_cast<std::uint64_t>(b));
    array->decrease(PoolKind::Large, static_cast<std::uint64_t>(d));
    array->increase(PoolKind::Large, static_cast<std::uint64_t>(e));
    // all peaks after +b: a - c + f + b (the later +e is smaller than the -d before it).
    expect(std::string(name) + ".all", a + f + b + e, a - c + f + b - d + e, c + d, a - c + f + b);
    expect(std::string(name) + ".small_pool", a + f, a - c + f, c, a);
    expect(std::string(name) + ".large_pool", b + e, b - d + e, d, b);
  }
  std::int64_t next = 100000;
  auto fill = [&](const std::string& prefix, Stat& st) {
    st = Stat{next + 1, next + 2, next + 3, next + 4};  // current, peak, allocated, freed
    expect(prefix, next + 3, next + 1, next + 4, next + 2);
    next += 10;
  };
  fill("oversize_allocations", s.oversize_allocations);
  fill("oversize_segments", s.oversize_segments);
  for (auto [name, value] : {std::pair<const char*, std::int64_t*>{"num_alloc_retries", &s.num_alloc_retries},
                             {"num_ooms", &s.num_ooms},
                             {"num_sync_all_streams", &s.num_sync_all_streams},
                             {"num_device_alloc", &s.num_device_alloc},
                             {"num_device_free", &s.num_device_free},
                             {"max_split_size", &s.max_split_size}}) {
    *value = next++;
    expected.emplace_back(name, *value);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(s.listing(true), expected);
  std::erase_if(expected, [](const auto& kv) { return kv.first.rfind("requested_bytes.", 0) == 0; });
  EXPECT_EQ(s.listing(false), expected);
}

TEST(Allocator, PendingFreeIsNotReusableUntilCompleted) {
  Rig r;
  const Block x = r.malloc(1);  // [B, B+512)
  r.alloc.free_requested(x);
  // Trap §14.5: allocated bytes drop at the request; active and requested bytes do not.
  EXPECT_EQ(r.stat("allocated_bytes.all.current"), 0);
  EXPECT_EQ(r.stat("allocation.all.current"), 0);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 512);
  EXPECT_EQ(r.stat("requested_bytes.all.current"), 1);
  // Trap §14.6: x is pending -> the next 512 comes from the remainder at B+512, not from x.
  const Block y = r.malloc(1);
  EXPECT_EQ(y.addr, B + 512);
  r.alloc.free_completed(x);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 512);  // y only
  EXPECT_EQ(r.stat("requested_bytes.all.current"), 1);
  // Now x's 512 bytes at B are the best fit.
  EXPECT_EQ(r.malloc(1).addr, B);
}

// §8: active = allocated + pending-free blocks. Until the first pending block the active stats
// equal the allocation stats; their peaks and totals must carry over once they part.
TEST(Allocator, ActiveStatsKeepTheirHistoryWhenTheFirstFreeGoesPending) {
  Rig r;
  const Block a = r.malloc(1);        // [B, B+512)
  const Block b = r.malloc(1048576);  // [B+512, B+512+1 MiB), small pool
  r.alloc.free(a);                    // plain free: both counts drop together
  // 2 blocks (512 + 1,048,576 bytes) handed out, one (512) returned.
  EXPECT_EQ(r.stat("active.all.current"), 1);
  EXPECT_EQ(r.stat("active.all.peak"), 2);
  EXPECT_EQ(r.stat("active_bytes.all.allocated"), 1049088);
  EXPECT_EQ(r.stat("active_bytes.all.freed"), 512);
  r.alloc.free_requested(b);  // b pending: allocation drops, active does not
  EXPECT_EQ(r.stat("allocation.all.current"), 0);
  EXPECT_EQ(r.stat("allocation.all.freed"), 2);
  EXPECT_EQ(r.stat("active.all.current"), 1);
  EXPECT_EQ(r.stat("active.all.freed"), 1);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 1048576);
  const Block c = r.malloc(1);  // a's 512 bytes at B are the best fit
  EXPECT_EQ(c.addr, B);
  // allocation: 1 now, peak still 2 (a and b), 3 handed out; active: a pending b and c = 2.
  EXPECT_EQ(r.stat("allocation.all.current"), 1);
  EXPECT_EQ(r.stat("allocation.all.allocated"), 3);
  EXPECT_EQ(r.stat("active.all.current"), 2);
  EXPECT_EQ(r.stat("active.small_pool.peak"), 2);
  EXPECT_EQ(r.stat("active.all.allocated"), 3);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 1049088);
  EXPECT_EQ(r.stat("active_bytes.all.peak"), 1049088);
  EXPECT_EQ(r.stat("allocated_bytes.all.current"), 512);
  r.alloc.free_completed(b);  // b leaves active: 512 + 1,048,576 returned in all
  EXPECT_EQ(r.stat("active.all.current"), 1);
  EXPECT_EQ(r.stat("active.all.freed"), 2);
  EXPECT_EQ(r.stat("active_bytes.all.current"), 512);
  EXPECT_EQ(r.stat("active_bytes.all.freed"), 1049088);
  EXPECT_EQ(r.stat("allocation.all.freed"), 2);  // the completion is not a second user free
}

TEST(Allocator, EmptyCacheCompletesPendingFreesAndIgnoresTheLateCompletion) {
  Rig r;
  const Block x = r.malloc(1);
  r.alloc.free_requested(x);
  r.alloc.empty_cache();  // §5.3 step 1: x completes, merges with the remainder -> whole -> freed
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(r.stat("active.all.current"), 0);
  EXPECT_EQ(r.stat("num_sync_all_streams"), 1);
  r.alloc.free_completed(x);  // already completed: ignored
  EXPECT_EQ(r.stat("active.all.current"), 0);
  EXPECT_EQ(r.stat("active.all.freed"), 1);
}

TEST(Allocator, ZeroAndHugeRequests) {
  Rig r;
  const auto z = r.alloc.malloc(0, 0);
  ASSERT_TRUE(z.has_value());
  EXPECT_EQ(z->addr, 0u);
  EXPECT_EQ(z->size, 0u);
  r.alloc.free(*z);  // freeing the null block is a no-op
  EXPECT_TRUE(r.calls().empty());
  EXPECT_FALSE(r.alloc.malloc(Bytes{1} << 60, 0).has_value());
  EXPECT_EQ(r.alloc.last_oom_message(), "CUDA out of memory. Tried to allocate more than 1EB memory.");
  EXPECT_EQ(r.stat("num_ooms"), 0);  // not counted (§5)
  EXPECT_TRUE(r.calls().empty());
}

TEST(Allocator, OomMessageShowsTheSegmentSize) {
  // 16 MiB device; 5 MiB -> rounded 5,242,880 -> alloc_size 20 MiB > 16 MiB: cudaMalloc fails,
  // release_available is a no-op (no max_split_size), release_cached syncs, retry fails -> OOM.
  const std::string tail =
      "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
      "Management  ";
  {
    Rig r("", 16 * MiB);
    EXPECT_FALSE(r.alloc.malloc(5 * MiB, 0).has_value());
    EXPECT_EQ(r.alloc.last_oom_message(),
              "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 16.00 MiB of which "
              "16.00 MiB is free. Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes " +
                  tail +
                  "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-"
                  "pytorch-cuda-alloc-conf)");
    EXPECT_EQ(r.stat("num_ooms"), 1);
    EXPECT_EQ(r.stat("num_alloc_retries"), 1);
    EXPECT_EQ(r.stat("num_sync_all_streams"), 1);
  }
  {
    // 2.8 wording; fraction 0.5 -> "8.00 MiB allowed; " (and the limit check fails first).
    Rig r("version:2.8,per_process_memory_fraction:0.5", 16 * MiB);
    EXPECT_FALSE(r.alloc.malloc(5 * MiB, 0).has_value());
    EXPECT_EQ(r.alloc.last_oom_message(),
              "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 16.00 MiB of which "
              "16.00 MiB is free. 8.00 MiB allowed; Of the allocated memory 0 bytes is allocated by PyTorch, and "
              "0 bytes " +
                  tail + "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
  }
  {
    Rig r("version:2.1", 16 * MiB);
    EXPECT_FALSE(r.alloc.malloc(5 * MiB, 0).has_value());
    EXPECT_EQ(r.alloc.last_oom_message(),
              "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty of 16.00 MiB of which "
              "16.00 MiB is free. Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved "
              "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
              "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
              "PYTORCH_CUDA_ALLOC_CONF");
  }
  {
    Rig r("version:1.13", 16 * MiB);
    EXPECT_FALSE(r.alloc.malloc(5 * MiB, 0).has_value());
    EXPECT_EQ(r.alloc.last_oom_message(),
              "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 16.00 MiB total capacity; 0 bytes already "
              "allocated; 16.00 MiB free; 0 bytes reserved in total by PyTorch) If reserved memory is >> allocated "
              "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
              "Management and PYTORCH_CUDA_ALLOC_CONF");
  }
}

TEST(Allocator, FormatSize) {
  EXPECT_EQ(format_size(0), "0 bytes");
  EXPECT_EQ(format_size(1024), "1024 bytes");
  EXPECT_EQ(format_size(1025), "1.00 KiB");
  EXPECT_EQ(format_size(1048576), "1024.00 KiB");
  EXPECT_EQ(format_size(1048577), "1.00 MiB");
  EXPECT_EQ(format_size(GiB), "1024.00 MiB");
  EXPECT_EQ(format_size(GiB + GiB / 2), "1.50 GiB");
}

TEST(Allocator, ReleaseAvailableIsANoOpWithoutMaxSplitSize) {
  // Trap §14.3/§14.4. 100 MiB device: A = 50 MiB segment at B, C = 45 MiB -> 46 MiB segment at
  // B+50 MiB; both freed (cached, 96 MiB reserved). D = 60 MiB misses; cudaMalloc(60) fails
  // (4 MiB left). Without max_split_size rung c does nothing, rung d syncs (+1), frees both
  // whole segments (set order: 46 MiB then 50 MiB) and the retry (+1) succeeds.
  Rig r("", 100 * MiB);
  const Block a = r.malloc(50 * MiB);
  const Block c = r.malloc(45 * MiB);
  r.alloc.free(a);
  r.alloc.free(c);
  r.calls().clear();
  const Block d = r.malloc(60 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{
                           {C::Free, B + 50 * MiB, 46 * MiB}, {C::Free, B, 50 * MiB}, {C::Malloc, d.addr, 60 * MiB}}));
  EXPECT_EQ(r.stat("num_alloc_retries"), 1);
  EXPECT_EQ(r.stat("num_sync_all_streams"), 1);
}

TEST(Allocator, ReleaseAvailableFreesOversizeBlocksLargestFirst) {
  // Same, with max_split_size_mb:40 (both cached blocks are oversize). Rung c: key =
  // max(60 MiB, 40 MiB) = 60 MiB, no block >= key -> walk down from the largest: 50 MiB
  // (released 50 < 60), then 46 MiB (96 >= 60) -> true; the plain retry succeeds: no sync, no
  // retry counted.
  Rig r("max_split_size_mb:40", 100 * MiB);
  const Block a = r.malloc(50 * MiB);
  const Block c = r.malloc(45 * MiB);
  EXPECT_EQ(r.stat("oversize_segments.current"), 2);
  r.alloc.free(a);
  r.alloc.free(c);
  r.calls().clear();
  const Block d = r.malloc(60 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{
                           {C::Free, B, 50 * MiB}, {C::Free, B + 50 * MiB, 46 * MiB}, {C::Malloc, d.addr, 60 * MiB}}));
  EXPECT_EQ(r.stat("num_alloc_retries"), 0);
  EXPECT_EQ(r.stat("num_sync_all_streams"), 0);
  EXPECT_EQ(r.stat("max_split_size"), 40 * static_cast<std::int64_t>(MiB));
}

TEST(Allocator, ReleaseAvailableMayFreeAndStillFail) {
  // A = 50 MiB cached (oversize), E = 45 MiB -> 46 MiB held. F = 60 MiB: rung c frees A
  // (50 < 60, no other oversize block) and fails; A stays freed. Rung d: sync, nothing to free,
  // retry: 100 - 46 = 54 MiB free < 60 -> OOM.
  Rig r("max_split_size_mb:40", 100 * MiB);
  const Block a = r.malloc(50 * MiB);
  r.malloc(45 * MiB);
  r.alloc.free(a);
  EXPECT_FALSE(r.alloc.malloc(60 * MiB, 0).has_value());
  EXPECT_EQ(r.stat("num_device_free"), 1);
  EXPECT_EQ(r.stat("num_alloc_retries"), 1);
  EXPECT_EQ(r.stat("num_ooms"), 1);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(46 * MiB));
  // "Tried to allocate" = 60 MiB segment; free 54 MiB; allocated 46 MiB; unallocated 0.
  EXPECT_NE(r.alloc.last_oom_message().find("Tried to allocate 60.00 MiB. GPU 0 has a total capacity of 100.00 MiB "
                                            "of which 54.00 MiB is free. Of the allocated memory 46.00 MiB is "
                                            "allocated by PyTorch, and 0 bytes is reserved"),
            std::string::npos)
      << r.alloc.last_oom_message();
}

TEST(Allocator, OversizeRules) {
  // MS = 40 MiB. A 60 MiB oversize block is cached.
  {
    Rig r("max_split_size_mb:40");
    const Block big = r.malloc(60 * MiB);
    r.alloc.free(big);
    // 39 MiB < MS and the candidate >= MS -> miss (new 40 MiB segment at B+60 MiB).
    EXPECT_EQ(r.malloc(39 * MiB).addr, B + 60 * MiB);
    // 41 MiB >= MS: 60 < 41 + 20 -> hit; requests >= MS never split -> the whole 60 MiB.
    const Block d = r.malloc(41 * MiB);
    EXPECT_EQ(d.addr, B);
    EXPECT_EQ(d.size, 60 * MiB);
    EXPECT_EQ(r.stat("oversize_allocations.current"), 2);
  }
  {
    // 40 MiB (= MS): 60 >= 40 + 20 -> miss (slack R = 20 MiB, §3.2 step 4).
    Rig r("max_split_size_mb:40");
    r.alloc.free(r.malloc(60 * MiB));
    EXPECT_EQ(r.malloc(40 * MiB).addr, B + 60 * MiB);
  }
  {
    // 2.6 with max_non_split_rounding_mb:30: 60 < 40 + 30 -> hit.
    Rig r("version:2.6,max_split_size_mb:41,max_non_split_rounding_mb:30");
    r.alloc.free(r.malloc(60 * MiB));
    EXPECT_EQ(r.malloc(41 * MiB).addr, B);
  }
}

TEST(Allocator, MaxSplitSizeTwentyMakesFreeTwentyMiBSegmentsUnusable) {
  // Trap §14.12 (2.9, MS = 20 MiB): 5 MiB -> a 20 MiB segment (oversize) that is split; once
  // freed it merges back to 20 MiB >= MS, which a 5 MiB (< MS) request may not take -> a second
  // 20 MiB segment.
  Rig r("version:2.9,max_split_size_mb:20");
  const Block a = r.malloc(5 * MiB);
  EXPECT_EQ(a.size, 5 * MiB);
  r.alloc.free(a);
  EXPECT_EQ(r.malloc(5 * MiB).addr, B + 20 * MiB);
  EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(r.stat("oversize_segments.current"), 2);
}

TEST(Allocator, GarbageCollectionFreesBlocksOlderThanAverage) {
  // 256 MiB device, fraction 0.5 -> allowed 128 MiB; threshold 0.5 -> GC above 64 MiB.
  // The large pool's clock ticks at each search (GC enabled).
  Rig r("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 256 * MiB);
  const Block s1 = r.malloc(12 * MiB);  // clock 1, miss -> S1 at B (total 12)
  const Block s2 = r.malloc(14 * MiB);  // clock 2 -> S2 at B+12 (total 26)
  const Block s3 = r.malloc(16 * MiB);  // clock 3 -> S3 at B+26 (total 42)
  r.alloc.free(s1);                     // S1 enters the pool at clock 3
  r.alloc.free(s2);                     // S2 at clock 3
  r.malloc(22 * MiB);                   // clock 4, miss; GC: 42 <= 64 -> no; S4 at B+42 (total 64)
  r.alloc.free(s3);                     // S3 enters at clock 4
  r.malloc(40 * MiB);                   // clock 5, miss; GC: 64 is not > 64 -> no; S5 at B+64 (104)
  EXPECT_EQ(r.stat("num_device_free"), 0);
  r.calls().clear();
  // clock 6, miss (12, 14, 16 < 20). GC: 104 > 64 -> target 40 MiB. Ages S1 3, S2 3, S3 2:
  // average 8/3 = 2.67 -> pass 1 frees S1 and S2 (26 MiB < 40); pass 2: average of the rest
  // = 2/1 = 2 -> S3 (age 2) freed -> 42 >= 40. Then cudaMalloc(20 MiB) at the bump pointer B+104.
  r.malloc(20 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Free, B, 12 * MiB},
                                          {C::Free, B + 12 * MiB, 14 * MiB},
                                          {C::Free, B + 26 * MiB, 16 * MiB},
                                          {C::Malloc, B + 104 * MiB, 20 * MiB}}));
  EXPECT_EQ(r.stat("num_sync_all_streams"), 0);  // GC does not synchronise
}

TEST(Allocator, GarbageCollectionPicksOnlyTheOldBlocks) {
  // A reused block's age restarts: S2 is taken and returned again just before the GC, so only
  // S1 is older than the average and one pass suffices.
  Rig r("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 256 * MiB);
  const Block s1 = r.malloc(12 * MiB);     // clock 1: S1 at B
  const Block s2 = r.malloc(14 * MiB);     // clock 2: S2 at B+12
  const Block s3 = r.malloc(16 * MiB);     // clock 3: S3 at B+26 (total 42)
  r.malloc(30 * MiB);                      // clock 4: S4 at B+42 (total 72; GC saw 42)
  r.alloc.free(s1);                        // S1 at clock 4
  r.alloc.free(s2);                        // S2 at clock 4
  const Block again = r.malloc(13 * MiB);  // clock 5: best fit S2 (14 MiB), remainder 1 MiB -> whole
  EXPECT_EQ(again.addr, B + 12 * MiB);
  r.alloc.free(s3);     // S3 at clock 5
  r.alloc.free(again);  // S2 back at clock 5
  r.calls().clear();
  // clock 6, 40 MiB misses. GC: 72 > 64 -> target 8 MiB. Ages: S1 2, S2 1, S3 1 -> average 4/3;
  // only S1 (12 MiB >= 8) is freed; the pass ends, target reached.
  r.malloc(40 * MiB);
  EXPECT_EQ(r.calls(), (std::vector<Call>{{C::Free, B, 12 * MiB}, {C::Malloc, B + 72 * MiB, 40 * MiB}}));
}

TEST(Allocator, GarbageCollectionNeedsAFractionAndSkipsSplitAndSmallBlocks) {
  {
    // No memory fraction: GC never runs (trap §14.11), the cached 12 MiB block stays.
    Rig r("garbage_collection_threshold:0.5", 256 * MiB);
    r.alloc.free(r.malloc(12 * MiB));
    r.malloc(200 * MiB);
    EXPECT_EQ(r.stat("num_device_free"), 0);
  }
  {
    // 9 MiB -> 20 MiB segment split (free 11 MiB remainder, split); a free whole small segment.
    // 50 MiB: GC sees 20 + 2 = 22 <= 64. 30 MiB: GC sees 72 > 64 but has no candidate (the
    // large remainder is split, small blocks are never collected) -> nothing freed.
    Rig r("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 256 * MiB);
    r.malloc(9 * MiB);
    r.alloc.free(r.malloc(1));
    r.malloc(50 * MiB);
    r.malloc(30 * MiB);
    EXPECT_EQ(r.stat("num_device_free"), 0);
    EXPECT_EQ(r.stat("reserved_bytes.all.current"), static_cast<std::int64_t>(102 * MiB));
  }
}

TEST(Allocator, MemoryFractionLimitsSegments) {
  // newest: fraction 0.25 of 80 MiB = 20 MiB allowed. 12 MiB fits; 10 MiB more (12 + 10 > 20)
  // fails at the limit check without a device call, even after the retry -> OOM.
  Rig r("per_process_memory_fraction:0.25", 80 * MiB);
  r.malloc(12 * MiB);
  EXPECT_FALSE(r.alloc.malloc(10 * MiB, 0).has_value());
  EXPECT_EQ(r.device.counters().malloc_failures, 0u);
  // newest: fraction 1.0 sets no limit (GC stays off); older versions set one (§5.6).
  Rig one("per_process_memory_fraction:1.0,garbage_collection_threshold:0.5");
  EXPECT_FALSE(one.alloc.allowed_memory_maximum().has_value());
  Rig old("version:2.4,per_process_memory_fraction:1.0,garbage_collection_threshold:0.5");
  EXPECT_EQ(old.alloc.allowed_memory_maximum(), 80 * GiB);
}

TEST(Allocator, SegmentsView) {
  Rig r;
  const Block a = r.malloc(1);
  const auto segs = r.alloc.segments();
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].addr, B);
  EXPECT_EQ(segs[0].size, 2 * MiB);
  EXPECT_EQ(segs[0].pool, "small");
  ASSERT_EQ(segs[0].blocks.size(), 2u);
  EXPECT_TRUE(segs[0].blocks[0].allocated);
  EXPECT_FALSE(segs[0].blocks[1].allocated);
  EXPECT_EQ(segs[0].blocks[1].addr, a.addr + 512);
}

}  // namespace
}  // namespace fraglab::cca::test
