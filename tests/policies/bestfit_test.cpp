// bestfit: hand-derived addresses, device calls and peaks.
//
// Placement facts used below (SimDevice, policies/bestfit/bestfit.cpp):
//  - the arena is reserved on the first allocation: 2 x capacity, page aligned, at kBase (the
//    device's bump pointer starts there and address reservations are not device calls the log
//    sees); B = kBase below;
//  - sizes round up to 512 B; a block takes the low end of the smallest free range that fits
//    (lowest address on ties); otherwise the arena grows to the next page boundary above
//    (start + size), starting at the free range that touches the top, if any;
//  - pages are 2 MiB; a block maps only the pages of its span not mapped yet (one Map per gap);
//  - after a free, the whole pages of the coalesced run are unmapped when the run is at least
//    release_threshold_mb (default 64 MiB).
#include <algorithm>

#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

constexpr Addr B = kBase;

DeviceCallRecord map_call(Addr addr, Bytes size) { return {DeviceCall::Map, addr, size}; }
DeviceCallRecord unmap_call(Addr addr, Bytes size) { return {DeviceCall::Unmap, addr, size}; }

TEST(BestFit, SplitsGrowsAtTheTopAndPicksTheSmallestRangeLowestFirst) {
  const Trace t = make_trace({
      alloc(1, 1 * MiB),    // 0: empty arena: grows to B+2M, Map(B, 2M); block [B, B+1M)
      alloc(2, 512 * KiB),  // 1: free [B+1M, B+2M) fits: split, block at B+1M, rest [B+1.5M, B+2M)
      alloc(3, 1 * MiB),    // 2: nothing holds 1M: the tail [B+1.5M, B+2M) touches the top, so the
                            //    block starts there; top -> align_up(B+2.5M) = B+4M; Map(B+2M, 2M)
      alloc(4, 256 * KiB),  // 3: only free range [B+2.5M, B+4M): block at B+2.5M
      free_of(2),           // 4: [B+1M, B+1.5M) free, between live blocks 1 and 3
      alloc(5, 100),        // 5: 512 B; ranges 512K at B+1M and 1.25M at B+2.75M: smallest wins
      free_of(1),           // 6: [B, B+1M) free; [B+1M+512, B+1.5M) free (not adjacent: 5 between)
      alloc(6, 300 * KiB),  // 7: ranges 1M at B, 511.5K at B+1M+512, 1.25M at B+2.75M -> B+1M+512
      alloc(7, 1 * MiB),    // 8: exactly 1M at B fits (smaller than 1.25M) -> B
  });
  const PolicyRun run = run_policy("bestfit:release_threshold_mb:never", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 1 * MiB);
  EXPECT_EQ(run.addr(2), B + 1536 * KiB);
  EXPECT_EQ(run.addr(3), B + 2560 * KiB);
  EXPECT_EQ(run.addr(5), B + 1 * MiB);
  EXPECT_EQ(run.blocks[5]->size, 512u);
  EXPECT_EQ(run.addr(7), B + 1 * MiB + 512);
  EXPECT_EQ(run.addr(8), B);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 2 * MiB), map_call(B + 2 * MiB, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 4 * MiB);
}

TEST(BestFit, EqualSizedRangesGoLowestAddressFirst) {
  const Trace t = make_trace({
      alloc(1, 256 * KiB),  // 0: B
      alloc(2, 256 * KiB),  // 1: B+256K
      alloc(3, 256 * KiB),  // 2: B+512K
      alloc(4, 256 * KiB),  // 3: B+768K; the free tail is [B+1M, B+2M) (1M)
      free_of(3),           // 4: [B+512K, B+768K) free
      free_of(1),           // 5: [B, B+256K) free: two 256K ranges now
      alloc(5, 200 * KiB),  // 6: tie between B and B+512K -> B (lowest address)
      alloc(6, 256 * KiB),  // 7: 56K left at B+200K is too small; 256K at B+512K fits -> there
  });
  const PolicyRun run = run_policy("bestfit", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(6), B);
  EXPECT_EQ(run.addr(7), B + 512 * KiB);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 2 * MiB)}));
}

TEST(BestFit, FreeCoalescesWithBothNeighbours) {
  const Trace t = make_trace({
      alloc(1, 512 * KiB),   // 0: B
      alloc(2, 512 * KiB),   // 1: B+512K
      alloc(3, 512 * KiB),   // 2: B+1M
      alloc(4, 512 * KiB),   // 3: B+1.5M; the page is full, no free range left
      free_of(1),            // 4: [B, B+512K)
      free_of(3),            // 5: [B+1M, B+1.5M)
      free_of(2),            // 6: merges with both: [B, B+1.5M)
      alloc(5, 1536 * KiB),  // 7: fits the merged range exactly: B, no growth, no new map
  });
  const PolicyRun run = run_policy("bestfit", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(7), B);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 2 * MiB);
}

TEST(BestFit, ABlockIsReusableOnlyOnceItsFreeCompletes) {
  const Trace t = make_trace({
      alloc(1, 1 * MiB),              // 0: B
      with_op(Op::FreeRequested, 1),  // 1: still in use on another stream
      alloc(2, 1 * MiB),              // 2: the tail [B+1M, B+2M) -> B+1M
      with_op(Op::FreeCompleted, 1),  // 3: [B, B+1M) free now
      alloc(3, 1 * MiB),              // 4: -> B
  });
  const PolicyRun run = run_policy("bestfit", t, 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), B + 1 * MiB);
  EXPECT_EQ(run.addr(4), B);
}

// Trace shared by the release tests: a 3M block over pages 0-1, a 1M block sharing page 1.
Trace release_trace() {
  return make_trace({
      alloc(1, 3 * MiB),  // 0: grows to B+4M: Map(B, 4M) in one call (one gap)
      alloc(2, 1 * MiB),  // 1: [B+3M, B+4M) fits exactly: no call
      free_of(1),         // 2: run [B, B+3M) (3M): whole pages [B, B+2M); page 1 is shared with block 2
      free_of(2),         // 3: run [B, B+4M) (4M): whole pages [B, B+4M)
      alloc(3, 1 * MiB),  // 4: the 4M range at B: maps what page 0 lacks, if anything
  });
}

TEST(BestFit, ThresholdZeroReleasesEveryWholeFreePageAtOnce) {
  const PolicyRun run = run_policy("bestfit:release_threshold_mb:0", release_trace(), 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 3 * MiB);
  EXPECT_EQ(run.addr(4), B);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{
                           map_call(B, 4 * MiB),              // event 0
                           unmap_call(B, 2 * MiB),            // event 2: page 0 only (page 1 shared)
                           unmap_call(B + 2 * MiB, 2 * MiB),  // event 3: page 1, what is still mapped
                           map_call(B, 2 * MiB),              // event 4: page 0 again
                       }));
  EXPECT_EQ(run.result.metrics.peak_reserved, 4 * MiB);
  EXPECT_EQ(run.reserved_at_end, 2 * MiB);
}

TEST(BestFit, ThresholdIsInclusiveAndUnmapsAMergedRunInOneCall) {
  // 4 MiB: the 3M run of event 2 stays cached; the 4M run of event 3 reaches it: one Unmap of
  // the one mapped run [B, B+4M).
  const PolicyRun run = run_policy("bestfit:release_threshold_mb:4", release_trace(), 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{map_call(B, 4 * MiB), unmap_call(B, 4 * MiB), map_call(B, 2 * MiB)}));
  EXPECT_EQ(run.reserved_at_end, 2 * MiB);
}

TEST(BestFit, DefaultThresholdKeepsSmallRunsMapped) {
  // 64 MiB default: no run of this trace gets there; event 4 needs no new page.
  const PolicyRun run = run_policy("bestfit", release_trace(), 64 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 4 * MiB)}));
  EXPECT_EQ(run.reserved_at_end, 4 * MiB);
}

TEST(BestFit, RefusedMapFlushesCachedPagesRetriesThenReportsOutOfMemory) {
  // Capacity 8 MiB; threshold never, so freed pages stay mapped until the flush.
  const Trace t = make_trace({
      alloc(1, 4 * MiB),    // 0: B, Map(B, 4M); reserved 4M
      alloc(2, 2 * MiB),    // 1: grows: B+4M, Map(B+4M, 2M); reserved 6M
      free_of(1),           // 2: [B, B+4M) free, still mapped
      alloc(3, 6 * MiB),    // 3: no free range holds 6M and the top block is live: start B+6M;
                            //    Map(B+6M, 6M) needs 12M > 8M: refused. Flush: Unmap(B, 4M);
                            //    retry: 2M + 6M = 8M fits: Map(B+6M, 6M)
      alloc(4, 1 * MiB),    // 4: best fit [B, B+4M) needs page 0: 8M + 2M > 8M: refused; the flush
                            //    finds no mapped free page; retry refused: out of memory
      free_of(2),           // 5: cached (never)
      free_of(3),           // 6: cached; the run [B, B+12M) has mapped pages [B+4M, B+12M)
      empty_cache_event(),  // 7: one Unmap of the whole mapped run
  });
  const PolicyRun run = run_policy("bestfit:release_threshold_mb:never", t, 8 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(3), B + 6 * MiB);
  EXPECT_FALSE(run.blocks[4].has_value());
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{map_call(B, 4 * MiB), map_call(B + 4 * MiB, 2 * MiB), unmap_call(B, 4 * MiB),
                                           map_call(B + 6 * MiB, 6 * MiB), unmap_call(B + 4 * MiB, 8 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);  // event 3 (then served) and event 4
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_EQ(run.result.ooms[0].event_index, 4u);
  EXPECT_NE(run.result.ooms[0].message.find("1048576 bytes"), std::string::npos) << run.result.ooms[0].message;
  EXPECT_NE(run.result.ooms[0].message.find("8388608 of 8388608 bytes reserved"), std::string::npos)
      << run.result.ooms[0].message;
  EXPECT_EQ(run.result.metrics.peak_reserved, 8 * MiB);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

TEST(BestFit, AFailedMapLeavesNoPagesBehind) {
  // Capacity 4 MiB. A 6 MiB request needs 3 new pages (one gap): refused twice, nothing mapped
  // stays behind, and the arena did not grow (the next 1M block still lands at B+2M).
  const Trace t = make_trace({
      alloc(1, 2 * MiB),  // 0: B, Map(B, 2M)
      alloc(2, 6 * MiB),  // 1: start B+2M, Map(B+2M, 6M) refused; flush finds nothing; refused again
      alloc(3, 1 * MiB),  // 2: top is still B+2M: B+2M, Map(B+2M, 2M)
  });
  const PolicyRun run = run_policy("bestfit", t, 4 * MiB);
  expect_clean(run);
  EXPECT_FALSE(run.blocks[1].has_value());
  EXPECT_EQ(run.addr(2), B + 2 * MiB);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 2 * MiB), map_call(B + 2 * MiB, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
}

TEST(BestFit, ARequestBeyondTheAddressRangeIsOutOfMemoryAndSaysWhy) {
  // Capacity 4 MiB: the arena reserves 8 MiB of addresses; 9 MiB can never fit, mapped or not.
  const PolicyRun run = run_policy("bestfit", make_trace({alloc(1, 9 * MiB), alloc(2, 1 * MiB)}), 4 * MiB);
  expect_clean(run);
  EXPECT_FALSE(run.blocks[0].has_value());
  EXPECT_EQ(run.addr(1), B);  // nothing of the failed request stayed behind
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_NE(run.result.ooms[0].message.find("address range (8388608 bytes) is used up"), std::string::npos)
      << run.result.ooms[0].message;
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map_call(B, 2 * MiB)}));
}

TEST(BestFit, SegmentsAreTheMappedRunsWithTheirPieces) {
  SimDevice device(SimDeviceConfig{64 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy("bestfit:release_threshold_mb:0", device);
  const Block a = *policy->allocate(1 * MiB, 0);  // B, pages [B, B+2M)
  const Block b = *policy->allocate(3 * MiB, 0);  // free tail [B+1M, B+2M) + growth: B+1M, top B+4M
  const Block c = *policy->allocate(5 * MiB, 0);  // no free range; b ends at the top: B+4M, top B+10M
  EXPECT_EQ(b.addr, B + 1 * MiB);
  EXPECT_EQ(c.addr, B + 4 * MiB);
  policy->free(b);  // run [B+1M, B+4M): whole page [B+2M, B+4M) unmapped
  (void)a;
  const std::vector<SegmentView> segments = policy->segments();
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].addr, B);
  EXPECT_EQ(segments[0].size, 2 * MiB);
  ASSERT_EQ(segments[0].blocks.size(), 2u);
  EXPECT_TRUE(segments[0].blocks[0].allocated);
  EXPECT_EQ(segments[0].blocks[1].addr, B + 1 * MiB);  // the free range, clipped at the run's end
  EXPECT_EQ(segments[0].blocks[1].size, 1 * MiB);
  EXPECT_FALSE(segments[0].blocks[1].allocated);
  EXPECT_EQ(segments[1].addr, B + 4 * MiB);
  EXPECT_EQ(segments[1].size, 6 * MiB);
  ASSERT_EQ(segments[1].blocks.size(), 2u);  // block c, then the 1M left over in the last page
  EXPECT_EQ(segments[1].blocks[0].size, 5 * MiB);
  EXPECT_EQ(segments[1].blocks[1].size, 1 * MiB);
  EXPECT_EQ(device.reserved(), 8 * MiB);
  const auto stats = policy->detailed_stats();
  auto stat = [&](const std::string& key) {
    auto it = std::find_if(stats.begin(), stats.end(), [&](const auto& kv) { return kv.first == key; });
    return it == stats.end() ? -1 : it->second;
  };
  EXPECT_EQ(stat("arena_bytes"), static_cast<std::int64_t>(10 * MiB));
  EXPECT_EQ(stat("mapped_bytes"), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(stat("free_bytes"), static_cast<std::int64_t>(4 * MiB));                // 3M + 1M
  EXPECT_EQ(stat("cached_mapped_free_bytes"), static_cast<std::int64_t>(2 * MiB));  // [B+1M,B+2M) + [B+9M,B+10M)
  EXPECT_EQ(stat("arena_growths"), 3);
}

TEST(BestFit, RejectsBadOptions) {
  const auto message_of = spec_error;
  const std::string unknown = message_of("bestfit:alignment:1024");
  EXPECT_NE(unknown.find("bestfit"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("alignment"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("release_threshold_mb"), std::string::npos) << unknown;
  for (const char* bad :
       {"bestfit:release_threshold_mb:-1", "bestfit:release_threshold_mb:1.5", "bestfit:release_threshold_mb:lots"}) {
    const std::string m = message_of(bad);
    EXPECT_NE(m.find("release_threshold_mb"), std::string::npos) << m;
    EXPECT_NE(m.find("never"), std::string::npos) << m;
  }
  EXPECT_NE(message_of("bestfit:release_threshold_mb").find("no value"), std::string::npos);
  EXPECT_EQ(message_of("bestfit:release_threshold_mb:never"), "(no error)");
  EXPECT_EQ(message_of("bestfit:release_threshold_mb:0"), "(no error)");
}

// Random traces under every threshold and a small device: the invariant checker (no overlap,
// every block backed, nothing unmapped under a live block) must stay silent, and after every
// block is freed, empty_cache must give back every page.
TEST(BestFit, RandomTracesKeepTheInvariants) {
  for (const char* spec : {"bestfit", "bestfit:release_threshold_mb:0", "bestfit:release_threshold_mb:never",
                           "bestfit:release_threshold_mb:8"}) {
    const std::vector<Event> events = random_alloc_free_events(7, 700 * KiB, 12 * MiB, 4);
    const PolicyRun run = run_policy(spec, make_trace(events), 96 * MiB);
    expect_clean(run);
    EXPECT_GT(run.result.metrics.num_ooms, 0u) << spec;  // the device is small enough to run out
    EXPECT_EQ(run.reserved_at_end, 0u) << spec;
  }
}

}  // namespace
}  // namespace fraglab::test
