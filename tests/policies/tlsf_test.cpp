// tlsf: the size-class mapping on hand-computed values, then hand-derived addresses, device
// calls and peaks of the policy.
//
// Facts used below (SimDevice, policies/tlsf/):
//  - device mallocs of at least 2 MiB are placed by a bump pointer from kBase, 2 MiB aligned,
//    and never reuse an address; B = kBase;
//  - class_of(size) = (fl, sl): fl = floor(log2 size), sl = which of the 2^sl_bits slices of
//    [2^fl, 2^(fl+1)) holds size, each slice 2^(fl - sl_bits) bytes wide; a request is looked up
//    from class_of(size + slice - 1) on: the first non-empty list at or above it, by (fl, sl);
//  - a found block is split at the request's (512-rounded) size, the rest is a new free block;
//  - pools are device mallocs of max(pool_mb, rounded request rounded up to 2 MiB).
#include <algorithm>

#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"
#include "policies/rig.hpp"
#include "tlsf/size_classes.hpp"

namespace fraglab::test {
namespace {

using tlsf::class_floor;
using tlsf::class_for_request;
using tlsf::class_of;
using tlsf::SizeClass;

constexpr Addr B = kBase;

DeviceCallRecord malloc_call(Addr addr, Bytes size) { return {DeviceCall::Malloc, addr, size}; }
DeviceCallRecord free_call(Addr addr, Bytes size) { return {DeviceCall::Free, addr, size}; }

std::int64_t stat(const Policy& policy, const std::string& key) {
  const auto stats = policy.detailed_stats();
  auto it = std::find_if(stats.begin(), stats.end(), [&](const auto& kv) { return kv.first == key; });
  return it == stats.end() ? -1 : it->second;
}

TEST(TlsfClasses, MappingInsertOnHandComputedValues) {
  // sl_bits 5: 32 slices per power of two.
  EXPECT_EQ(class_of(512, 5), (SizeClass{9, 0}));              // 2^9 exactly
  EXPECT_EQ(class_of(1000, 5), (SizeClass{9, 30}));            // slices of 16 B: 1000 / 16 = 62 -> 62 - 32
  EXPECT_EQ(class_of(1 * MiB + 1, 5), (SizeClass{20, 0}));     // slices of 32K: the first one
  EXPECT_EQ(class_of(3 * MiB, 5), (SizeClass{21, 16}));        // slices of 64K: 3M / 64K = 48 -> 16
  EXPECT_EQ(class_of(2 * MiB - 512, 5), (SizeClass{20, 31}));  // last slice below 2 MiB
  EXPECT_EQ(class_of(64 * MiB, 5), (SizeClass{26, 0}));
  EXPECT_EQ(class_of(7 * MiB, 5), (SizeClass{22, 24}));  // slices of 128K: 56 -> 24
  // sl_bits 4: 16 slices; 3M / 128K = 24 -> 8. sl_bits 0: one class per power of two.
  EXPECT_EQ(class_of(3 * MiB, 4), (SizeClass{21, 8}));
  EXPECT_EQ(class_of(3 * MiB, 0), (SizeClass{21, 0}));
  // sl_bits 6: 64 slices of 32K in [2M, 4M): 3M + 32K -> 33
  EXPECT_EQ(class_of(3 * MiB + 32 * KiB, 6), (SizeClass{21, 33}));
}

TEST(TlsfClasses, MappingSearchRoundsUpToTheNextClassUnlessOnAFloor) {
  EXPECT_EQ(class_for_request(512, 5), (SizeClass{9, 0}));    // a floor stays
  EXPECT_EQ(class_for_request(1000, 5), (SizeClass{9, 31}));  // (1000 + 15) / 16 = 63 -> 31
  EXPECT_EQ(class_for_request(1 * MiB + 1, 5), (SizeClass{20, 1}));
  EXPECT_EQ(class_for_request(3 * MiB, 5), (SizeClass{21, 16}));       // a floor stays
  EXPECT_EQ(class_for_request(2 * MiB - 512, 5), (SizeClass{21, 0}));  // rounds into the next fl
  // 100M + 512: slices of 2M in [64M, 128M): (100M + 512 + 2M - 1) / 2M = 51 -> 19
  EXPECT_EQ(class_for_request(100 * MiB + 512, 5), (SizeClass{26, 19}));
  EXPECT_EQ(class_for_request(3 * MiB, 0), (SizeClass{22, 0}));  // sl_bits 0: next power of two
  EXPECT_EQ(class_floor(SizeClass{21, 16}, 5), 3 * MiB);
  EXPECT_EQ(class_floor(SizeClass{20, 1}, 5), 1 * MiB + 32 * KiB);
  EXPECT_EQ(class_floor(SizeClass{26, 19}, 5), 102 * MiB);
}

TEST(Tlsf, SplitsCoalescesAndReusesClassesExactly) {
  const Trace t = make_trace({
      alloc(1, 1 * MiB),     // 0: no free block: Malloc(B, 8M); block B, rest B+1M (7M, class 22/24)
      alloc(2, 1 * MiB),     // 1: class 20/0: nothing in fl 20, first fl above is 22: B+1M; rest B+2M (6M)
      alloc(3, 3000),        // 2: 3072 B: found in fl 22: B+2M; rest B+2M+3K
      free_of(2),            // 3: B+1M: both neighbours used: a free 1M block (class 20/0)
      alloc(4, 1 * MiB),     // 4: class 20/0 has it: B+1M
      free_of(4),            // 5: B+1M free again
      free_of(1),            // 6: B merges with B+1M: 2M (class 21/0)
      alloc(5, 1536 * KiB),  // 7: 1.5M is a floor (20/16); nothing in fl 20 from 16 on; fl 21 has B:
                             //    block B, rest B+1.5M (512K)
      free_of(3),            // 8: B+2M merges with B+1.5M (512K) and B+2M+3K: B+1.5M, 6.5M
      alloc(6, 6656 * KiB),  // 9: 6.5M is a floor (22/20) and the merged block is exactly that
  });
  const PolicyRun run = run_policy("tlsf:pool_mb:8", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 1 * MiB);
  EXPECT_EQ(run.addr(2), B + 2 * MiB);
  EXPECT_EQ(run.blocks[2]->size, 3072u);
  EXPECT_EQ(run.addr(4), B + 1 * MiB);
  EXPECT_EQ(run.addr(7), B);
  EXPECT_EQ(run.addr(9), B + 1536 * KiB);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_call(B, 8 * MiB)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 8 * MiB);
}

TEST(Tlsf, GoodFitSkipsAFittingBlockInTheRequestsOwnClass) {
  constexpr Bytes kX = 1 * MiB + 96 * KiB - 512;  // class 20/2 (slices of 32K), just below 20/3
  const Trace t = make_trace({
      alloc(1, kX),                        // 0: Malloc(B, 8M): block B
      alloc(2, 1 * MiB),                   // 1: B+X, a separator; rest B+X+1M (class 22)
      free_of(1),                          // 2: B free, kX bytes, class 20/2
      alloc(3, 1 * MiB + 64 * KiB + 512),  // 3: class 20/2 too, so looked up from 20/3: the kX
                                           //    block is not seen (best fit would take it); fl 22 is
      alloc(4, 1 * MiB + 64 * KiB),        // 4: the floor of 20/2: looked up from 20/2: B
  });
  const PolicyRun run = run_policy("tlsf:pool_mb:8", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(1), B + kX);
  EXPECT_EQ(run.addr(3), B + kX + 1 * MiB);
  EXPECT_EQ(run.addr(4), B);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_call(B, 8 * MiB)}));
}

TEST(Tlsf, PoolsAreAtLeastPoolMbAndServeTheRequestThatTookThem) {
  {
    const Trace t = make_trace({
        alloc(1, 100 * MiB + 1),  // 0: 100M+512: pool max(64M, 102M) = Malloc(B, 102M); rest 2M-512
        alloc(2, 1 * MiB),        // 1: class 20/0; the rest (2M-512) is in 20/31: B+100M+512
        alloc(3, 2 * MiB),        // 2: class 21/0: nothing: a 64M pool at the bump pointer B+102M
    });
    const PolicyRun run = run_policy("tlsf", t);
    expect_clean(run);
    EXPECT_EQ(run.addr(0), B);
    EXPECT_EQ(run.addr(1), B + 100 * MiB + 512);
    EXPECT_EQ(run.addr(2), B + 102 * MiB);
    EXPECT_EQ(run.calls,
              (std::vector<DeviceCallRecord>{malloc_call(B, 102 * MiB), malloc_call(B + 102 * MiB, 64 * MiB)}));
  }
  {
    // pool_mb 0: a 133M request gets a 134M pool; the lookup would start at class 27/2 (floor
    // 136M) and miss it, so the new pool's block is taken directly; the next 1M fits its rest.
    const Trace t = make_trace({alloc(1, 133 * MiB), alloc(2, 1 * MiB)});
    const PolicyRun run = run_policy("tlsf:pool_mb:0", t);
    expect_clean(run);
    EXPECT_EQ(run.addr(0), B);
    EXPECT_EQ(run.addr(1), B + 133 * MiB);
    EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_call(B, 134 * MiB)}));
  }
}

TEST(Tlsf, RefusedMallocFlushesFreePoolsRetriesThenReportsOutOfMemory) {
  // Capacity 24 MiB, 8 MiB pools.
  const Trace t = make_trace({
      alloc(1, 1 * MiB),    // 0: Malloc(B, 8M); block B, rest 7M
      alloc(2, 8 * MiB),    // 1: class 23/0: the 7M rest is in fl 22: Malloc(B+8M, 8M), all of it
      free_of(2),           // 2: that pool is wholly free: cached
      alloc(3, 12 * MiB),   // 3: class 23/16: the free 8M is 23/0: a 12M pool: 16 + 12 > 24, refused;
                            //    flush: Free(B+8M); retry: 8 + 12 = 20 fits, at the bump pointer B+16M
      alloc(4, 8 * MiB),    // 4: class 23/0: only the 7M rest is free: an 8M pool: 20 + 8 > 24;
                            //    nothing wholly free to flush; refused again: out of memory
      free_of(3),           // 5: pool B+16M wholly free: cached
      free_of(1),           // 6: pool B wholly free: cached
      empty_cache_event(),  // 7: both back, lowest address first
  });
  const PolicyRun run = run_policy("tlsf:pool_mb:8", t, 24 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(1), B + 8 * MiB);
  EXPECT_EQ(run.addr(3), B + 16 * MiB);
  EXPECT_FALSE(run.blocks[4].has_value());
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{malloc_call(B, 8 * MiB), malloc_call(B + 8 * MiB, 8 * MiB),
                                           free_call(B + 8 * MiB, 8 * MiB), malloc_call(B + 16 * MiB, 12 * MiB),
                                           free_call(B, 8 * MiB), free_call(B + 16 * MiB, 12 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_NE(run.result.ooms[0].message.find("8388608 bytes"), std::string::npos) << run.result.ooms[0].message;
  EXPECT_NE(run.result.ooms[0].message.find("20971520 of 25165824 bytes reserved"), std::string::npos)
      << run.result.ooms[0].message;
  EXPECT_EQ(run.result.metrics.peak_reserved, 20 * MiB);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

TEST(Tlsf, SegmentsAndStatsFollowThePhysicalBlocks) {
  SimDevice device(SimDeviceConfig{64 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy("tlsf:pool_mb:8", device);
  const Block a = *policy->allocate(1 * MiB, 0);  // B; rest B+1M (7M)
  const Block b = *policy->allocate(2 * MiB, 0);  // B+1M; rest B+3M (5M)
  policy->free(a);                                // B: next is b, used: no merge
  const std::vector<SegmentView> segments = policy->segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].addr, B);
  EXPECT_EQ(segments[0].size, 8 * MiB);
  const std::vector<std::tuple<Addr, Bytes, bool>> expected{
      {B, 1 * MiB, false}, {B + 1 * MiB, 2 * MiB, true}, {B + 3 * MiB, 5 * MiB, false}};
  ASSERT_EQ(segments[0].blocks.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::make_tuple(segments[0].blocks[i].addr, segments[0].blocks[i].size, segments[0].blocks[i].allocated),
              expected[i])
        << i;
  }
  EXPECT_EQ(stat(*policy, "free_bytes"), static_cast<std::int64_t>(6 * MiB));
  EXPECT_EQ(stat(*policy, "free_blocks"), 2);
  EXPECT_EQ(stat(*policy, "largest_free_block"), static_cast<std::int64_t>(5 * MiB));
  EXPECT_EQ(stat(*policy, "splits"), 2);
  EXPECT_EQ(stat(*policy, "cached_free_pools"), 0);
  policy->free(b);  // merges with both neighbours: the pool is one free block
  EXPECT_EQ(stat(*policy, "merges"), 2);
  EXPECT_EQ(stat(*policy, "cached_free_pools"), 1);
  EXPECT_EQ(device.reserved(), 8 * MiB);
  policy->empty_cache();
  EXPECT_EQ(device.reserved(), 0u);
  EXPECT_TRUE(policy->segments().empty());
}

TEST(Tlsf, RejectsBadOptions) {
  const auto message_of = spec_error;
  const std::string unknown = message_of("tlsf:fl_bits:3");
  EXPECT_NE(unknown.find("tlsf"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("fl_bits"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("sl_bits, pool_mb"), std::string::npos) << unknown;
  for (const char* bad : {"tlsf:sl_bits:7", "tlsf:sl_bits:-1", "tlsf:sl_bits:four"}) {
    const std::string m = message_of(bad);
    EXPECT_NE(m.find("sl_bits"), std::string::npos) << m;
    EXPECT_NE(m.find("0 to 6"), std::string::npos) << m;
  }
  for (const char* bad : {"tlsf:pool_mb:-8", "tlsf:pool_mb:1.5", "tlsf:pool_mb:2000000"}) {
    const std::string m = message_of(bad);
    EXPECT_NE(m.find("pool_mb"), std::string::npos) << m;
  }
  EXPECT_EQ(message_of("tlsf:sl_bits:0,pool_mb:0"), "(no error)");
  EXPECT_EQ(message_of("tlsf:sl_bits:6"), "(no error)");
}

// Random traces under several class counts and pool sizes on a small device: the invariant
// checker must stay silent, and once everything is freed empty_cache must return every pool.
TEST(Tlsf, RandomTracesKeepTheInvariants) {
  for (const char* spec : {"tlsf", "tlsf:sl_bits:0,pool_mb:0", "tlsf:sl_bits:6,pool_mb:8", "tlsf:sl_bits:4"}) {
    const std::vector<Event> events = random_alloc_free_events(5, 700 * KiB, 12 * MiB, 4);
    const PolicyRun run = run_policy(spec, make_trace(events), 160 * MiB);
    expect_clean(run);
    EXPECT_GT(run.result.metrics.num_ooms, 0u) << spec;
    EXPECT_EQ(run.reserved_at_end, 0u) << spec;
  }
}

}  // namespace
}  // namespace fraglab::test
