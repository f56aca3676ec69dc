// buddy: hand-derived addresses, device calls and peaks.
//
// Facts used below (SimDevice, policies/buddy/buddy.cpp):
//  - device mallocs of at least 2 MiB are placed by a bump pointer from kBase, 2 MiB aligned,
//    and never reuse an address; B = kBase;
//  - a block of order k is min_block << k bytes at an offset from its top-level block that is a
//    multiple of its size; its buddy is at offset XOR size;
//  - splitting keeps the lower half; free blocks of one order are taken lowest address first.
// Most tests use min_block 1 MiB and max_order 3: top-level blocks of 8 MiB.
#include <algorithm>

#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

constexpr Addr B = kBase;
const std::string kSmall = "buddy:min_block:1MiB,max_order:3";

DeviceCallRecord malloc_call(Addr addr, Bytes size) { return {DeviceCall::Malloc, addr, size}; }
DeviceCallRecord free_call(Addr addr, Bytes size) { return {DeviceCall::Free, addr, size}; }

std::int64_t stat(const Policy& policy, const std::string& key) {
  const auto stats = policy.detailed_stats();
  auto it = std::find_if(stats.begin(), stats.end(), [&](const auto& kv) { return kv.first == key; });
  return it == stats.end() ? -1 : it->second;
}

TEST(Buddy, SplitsToTheSmallestOrderAndMergesBuddiesOrderByOrder) {
  const Trace t = make_trace({
      alloc(1, 1 * MiB),     // 0: nothing free: Malloc(B, 8M); split 8->4->2->1, keeping the low
                             //    halves: free B+4M (o2), B+2M (o1), B+1M (o0); block B
      alloc(2, 1 * MiB),     // 1: o0 has B+1M
      alloc(3, 2 * MiB),     // 2: o1 has B+2M
      alloc(4, 100),         // 3: min_block: o0 and o1 empty, split B+4M: free B+6M (o1), B+5M (o0)
      alloc(5, 1536 * KiB),  // 4: 2M, o1 has B+6M
      free_of(1),            // 5: buddy of B (o0) is B+1M, live: no merge
      free_of(2),            // 6: buddy B free: merge to B (o1); its buddy B+2M is live
      free_of(3),            // 7: buddy B (o1) free: merge to B (o2); buddy B+4M is split: stop
      alloc(6, 3 * MiB),     // 8: 4M: o2 has exactly B
      free_of(6),            // 9: B (o2) again
      free_of(4),            // 10: B+4M merges with B+5M (o0) -> B+4M (o1); B+6M live
      free_of(5),            // 11: B+6M merges with B+4M (o1) -> B+4M (o2), then with B (o2) -> B (o3)
      alloc(7, 8 * MiB),     // 12: the whole top-level block, cached: no device call
      alloc(8, 9 * MiB),     // 13: larger than 8M: own malloc of 16M at the bump pointer, B+8M
      free_of(8),            // 14: straight back to the device
      free_of(7),            // 15: the top-level block stays cached
  });
  const PolicyRun run = run_policy(kSmall, t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 1 * MiB);
  EXPECT_EQ(run.addr(2), B + 2 * MiB);
  EXPECT_EQ(run.addr(3), B + 4 * MiB);
  EXPECT_EQ(run.blocks[3]->size, 1 * MiB);
  EXPECT_EQ(run.addr(4), B + 6 * MiB);
  EXPECT_EQ(run.blocks[4]->size, 2 * MiB);
  EXPECT_EQ(run.addr(8), B);
  EXPECT_EQ(run.addr(12), B);
  EXPECT_EQ(run.addr(13), B + 8 * MiB);
  EXPECT_EQ(run.blocks[13]->size, 16 * MiB);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_call(B, 8 * MiB), malloc_call(B + 8 * MiB, 16 * MiB),
                                                      free_call(B + 8 * MiB, 16 * MiB)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 24 * MiB);
  EXPECT_EQ(run.reserved_at_end, 8 * MiB);
}

TEST(Buddy, FreeBlocksOfOneOrderAreTakenLowestAddressFirst) {
  const Trace t = make_trace({
      alloc(1, 1 * MiB),  // 0: B
      alloc(2, 1 * MiB),  // 1: B+1M
      alloc(3, 1 * MiB),  // 2: B+2M (o1 B+2M split: B+3M free)
      alloc(4, 1 * MiB),  // 3: B+3M
      free_of(1),         // 4: B free (buddy B+1M live)
      free_of(3),         // 5: B+2M free (buddy B+3M live): o0 = {B, B+2M}, B+2M freed last
      alloc(5, 1 * MiB),  // 6: lowest address: B (a LIFO list would give B+2M)
  });
  const PolicyRun run = run_policy(kSmall, t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(6), B);
}

TEST(Buddy, DefaultTopBlockIsOneGibOfMinBlocks512) {
  const Trace t = make_trace({
      alloc(1, 100),   // 0: 512 B block: Malloc(B, 1 GiB) split down to order 0; block B
      alloc(2, 1000),  // 1: 1024 B (o1): the free o1 half left by the split, B+1K
      alloc(3, 600),   // 2: 1024 B: o1 empty now; split B+2K (o2): block B+2K, B+3K free
      alloc(4, 512),   // 3: 512 B: o0 has B+512
  });
  const PolicyRun run = run_policy("buddy", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.blocks[0]->size, 512u);
  EXPECT_EQ(run.addr(1), B + 1024);
  EXPECT_EQ(run.blocks[1]->size, 1024u);
  EXPECT_EQ(run.addr(2), B + 2048);
  EXPECT_EQ(run.addr(3), B + 512);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_call(B, 1 * GiB)}));

  SimDevice device;
  EXPECT_EQ(stat(*create_policy("buddy", device), "top_block_bytes"), static_cast<std::int64_t>(1 * GiB));
  EXPECT_EQ(stat(*create_policy("buddy", device), "max_order"), 21);
  // Another min_block keeps the top-level block at 1 GiB unless max_order is given.
  EXPECT_EQ(stat(*create_policy("buddy:min_block:4KiB", device), "max_order"), 18);
  EXPECT_EQ(stat(*create_policy("buddy:min_block:4096,max_order:4", device), "top_block_bytes"), 64 * 1024);
}

TEST(Buddy, RefusedMallocFlushesCachedTopBlocksRetriesThenReportsOutOfMemory) {
  // Capacity 24 MiB, top-level blocks of 8 MiB.
  const Trace t = make_trace({
      alloc(1, 1 * MiB),    // 0: Malloc(B, 8M); block B
      alloc(2, 8 * MiB),    // 1: no o3 block free: Malloc(B+8M, 8M); reserved 16M
      free_of(2),           // 2: wholly free again: cached
      alloc(3, 9 * MiB),    // 3: own malloc of 16M: 16 + 16 > 24, refused; flush: Free(B+8M);
                            //    retry: 8 + 16 = 24 fits, at the bump pointer B+16M
      alloc(4, 8 * MiB),    // 4: Malloc(8M) refused (24 + 8); the flush finds nothing cached;
                            //    refused again: out of memory
      free_of(3),           // 5: Free(B+16M, 16M)
      free_of(1),           // 6: the top-level block at B is wholly free: cached
      empty_cache_event(),  // 7: Free(B, 8M)
  });
  const PolicyRun run = run_policy(kSmall, t, 24 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(3), B + 16 * MiB);
  EXPECT_FALSE(run.blocks[4].has_value());
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{malloc_call(B, 8 * MiB), malloc_call(B + 8 * MiB, 8 * MiB),
                                           free_call(B + 8 * MiB, 8 * MiB), malloc_call(B + 16 * MiB, 16 * MiB),
                                           free_call(B + 16 * MiB, 16 * MiB), free_call(B, 8 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_NE(run.result.ooms[0].message.find("8388608 bytes"), std::string::npos) << run.result.ooms[0].message;
  EXPECT_NE(run.result.ooms[0].message.find("25165824 of 25165824 bytes reserved"), std::string::npos)
      << run.result.ooms[0].message;
  EXPECT_EQ(run.result.metrics.peak_reserved, 24 * MiB);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

TEST(Buddy, SegmentsListTopBlocksAndOwnMallocs) {
  SimDevice device(SimDeviceConfig{64 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy(kSmall, device);
  const Block a = *policy->allocate(1 * MiB, 0);  // B; free B+1M (o0), B+2M (o1), B+4M (o2)
  const Block b = *policy->allocate(2 * MiB, 0);  // B+2M
  const Block c = *policy->allocate(9 * MiB, 0);  // own malloc of 16M at B+8M
  EXPECT_EQ(a.addr, B);
  EXPECT_EQ(b.addr, B + 2 * MiB);
  EXPECT_EQ(c.addr, B + 8 * MiB);
  const std::vector<SegmentView> segments = policy->segments();
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].addr, B);
  EXPECT_EQ(segments[0].size, 8 * MiB);
  ASSERT_EQ(segments[0].blocks.size(), 4u);
  const std::vector<std::tuple<Addr, Bytes, bool>> expected{
      {B, 1 * MiB, true}, {B + 1 * MiB, 1 * MiB, false}, {B + 2 * MiB, 2 * MiB, true}, {B + 4 * MiB, 4 * MiB, false}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::make_tuple(segments[0].blocks[i].addr, segments[0].blocks[i].size, segments[0].blocks[i].allocated),
              expected[i])
        << i;
  }
  EXPECT_EQ(segments[1].addr, B + 8 * MiB);
  EXPECT_EQ(segments[1].size, 16 * MiB);
  EXPECT_EQ(segments[1].pool, "own_malloc");
  EXPECT_EQ(stat(*policy, "free_bytes"), static_cast<std::int64_t>(5 * MiB));
  EXPECT_EQ(stat(*policy, "splits"), 3);
  EXPECT_EQ(stat(*policy, "rounding_waste_bytes"), static_cast<std::int64_t>(7 * MiB));  // 16M block for 9M
  policy->free(a);
  policy->free(b);  // merges all the way up: one cached top-level block
  EXPECT_EQ(stat(*policy, "cached_free_top_blocks"), 1);
  EXPECT_EQ(stat(*policy, "merges"), 3);
  policy->empty_cache();
  EXPECT_EQ(device.reserved(), 16 * MiB);  // only the own malloc is left
}

TEST(Buddy, RejectsBadOptions) {
  const auto message_of = spec_error;
  const std::string unknown = message_of("buddy:order:3");
  EXPECT_NE(unknown.find("buddy"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'order'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("min_block, max_order"), std::string::npos) << unknown;
  for (const char* bad : {"buddy:min_block:1000", "buddy:min_block:0", "buddy:min_block:huge"}) {
    EXPECT_NE(message_of(bad).find("min_block"), std::string::npos) << message_of(bad);
  }
  EXPECT_NE(message_of("buddy:min_block:1000").find("power of two"), std::string::npos);
  for (const char* bad : {"buddy:max_order:41", "buddy:max_order:-1", "buddy:max_order:2.5"}) {
    const std::string m = message_of(bad);
    EXPECT_NE(m.find("max_order"), std::string::npos) << m;
    EXPECT_NE(m.find("0 to 40"), std::string::npos) << m;
  }
  EXPECT_NE(message_of("buddy:min_block:1GiB,max_order:20").find("1 TiB"), std::string::npos);
}

// Random traces (small and oversize requests, a small device): the invariant checker must stay
// silent, and once everything is freed empty_cache must give back every top-level block.
TEST(Buddy, RandomTracesKeepTheInvariants) {
  for (const std::string& spec : {kSmall, std::string("buddy:min_block:512,max_order:14")}) {
    const std::vector<Event> events = random_alloc_free_events(11, 900 * KiB, 12 * MiB, 5);
    const PolicyRun run = run_policy(spec, make_trace(events), 128 * MiB);
    expect_clean(run);
    EXPECT_GT(run.result.metrics.num_ooms, 0u) << spec;
    EXPECT_EQ(run.reserved_at_end, 0u) << spec;
  }
}

}  // namespace
}  // namespace fraglab::test
