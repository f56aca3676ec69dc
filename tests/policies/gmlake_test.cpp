// gmlake: GMLake's virtual memory stitching (policies/gmlake/allocator.hpp). Every expected
// address, device call and peak below is derived by hand from the algorithm's definition and
// SimDevice's placement: one bump pointer from kBase shared by malloc and reserve_range, 2 MiB
// aligned for ranges of at least a page, never moving back; reserve/release are not device calls
// the rig logs; aliases cost no reserved bytes.
//
// Recurring setup "A" (three segments, the 1st and 3rd freed):
//   alloc 20M -> segment [kBase, +20M)        Map(kBase, 20M)
//   alloc 30M -> segment [kBase+20M, +30M)    Map(kBase+20M, 30M)
//   alloc 40M -> segment [kBase+50M, +40M)    Map(kBase+50M, 40M)      reserved 90M
//   free 1st, free 3rd -> free pBlocks 20M@kBase and 40M@kBase+50M (whole segments).
// Most specs add self_check:true, which audits the policy's own invariants after every call.
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "policies/rig.hpp"
#include "support/real_traces.hpp"

namespace fraglab::test {
namespace {

constexpr Bytes M = MiB;
Addr at(Bytes offset) { return kBase + offset; }

DeviceCallRecord map(Addr a, Bytes s) { return {DeviceCall::Map, a, s}; }
DeviceCallRecord unmap(Addr a, Bytes s) { return {DeviceCall::Unmap, a, s}; }
DeviceCallRecord alias(Addr a, Bytes s) { return {DeviceCall::MapAlias, a, s}; }
DeviceCallRecord unalias(Addr a, Bytes s) { return {DeviceCall::UnmapAlias, a, s}; }
DeviceCallRecord cuda_malloc(Addr a, Bytes s) { return {DeviceCall::Malloc, a, s}; }
DeviceCallRecord cuda_free(Addr a, Bytes s) { return {DeviceCall::Free, a, s}; }

std::int64_t stat(const PolicyRun& run, std::string_view key) {
  for (const auto& [name, value] : run.result.detailed_stats) {
    if (name == key) return value;
  }
  ADD_FAILURE() << "no detailed stat " << key;
  return -1;
}

std::vector<Event> setup_a() { return {alloc(1, 20 * M), alloc(2, 30 * M), alloc(3, 40 * M), free_of(1), free_of(3)}; }

Trace setup_a_then(std::vector<Event> more) {
  std::vector<Event> events = setup_a();
  events.insert(events.end(), more.begin(), more.end());
  return make_trace(std::move(events));
}

const std::vector<DeviceCallRecord> kSetupCalls = {map(at(0), 20 * M), map(at(20 * M), 30 * M),
                                                   map(at(50 * M), 40 * M)};

std::vector<DeviceCallRecord> setup_calls_then(std::vector<DeviceCallRecord> more) {
  std::vector<DeviceCallRecord> calls = kSetupCalls;
  calls.insert(calls.end(), more.begin(), more.end());
  return calls;
}

// ---- options ----------------------------------------------------------------------------------

void expect_rejected(const std::string& spec, std::vector<std::string> words) {
  SimDevice device;
  try {
    create_policy(spec, device);
    ADD_FAILURE() << spec << " was accepted";
  } catch (const InputError& e) {
    const std::string text = e.what();
    words.emplace_back("gmlake");
    for (const std::string& w : words) EXPECT_NE(text.find(w), std::string::npos) << spec << ": " << text;
  }
}

TEST(GmlakeOptions, RejectsUnknownKeysAndBadValuesNamingKeyAndAcceptedValues) {
  expect_rejected("gmlake:fragLimit:512", {"fragLimit", "frag_limit", "reuse_limit", "defrag_level"});
  expect_rejected("gmlake:frag_limit:abc", {"frag_limit", "abc", "MiB"});
  expect_rejected("gmlake:frag_limit:-1", {"frag_limit", "MiB"});
  expect_rejected("gmlake:reuse_limit:0", {"reuse_limit", "> 0"});
  expect_rejected("gmlake:reuse_limit:x", {"reuse_limit", "> 0"});
  expect_rejected("gmlake:defrag_level:3", {"defrag_level", "0, 1 or 2"});
  expect_rejected("gmlake:vmm_defragment:yes", {"vmm_defragment", "true, false"});
  expect_rejected("gmlake:re_alloc:2", {"re_alloc", "true, false"});
  expect_rejected("gmlake:auto_gc:1.5", {"auto_gc", "GiB"});
  expect_rejected("gmlake:frag_limit", {"frag_limit"});  // no value
  SimDevice device;
  EXPECT_NO_THROW(create_policy(
      "gmlake:vmm_defragment:1,frag_limit:256,reuse_limit:2.5,defrag_level:1,auto_gc:80,re_alloc:false", device));
}

// ---- rounding and the two pools ---------------------------------------------------------------

TEST(GmlakeLarge, RoundsToTwoMiBAndCarvesRequestsUnderTenMiBFromTwentyMiBSegments) {
  // 3M+5 -> 4M, under 10M: a 20M segment at kBase, split 4M | 16M free.
  // 10M -> best fit 16M@kBase+4M, split 10M | 6M free.
  // 10M+1 -> 12M: 6M does not fit; 12M >= 10M so the segment is 12M, at the bump pointer kBase+20M.
  // free 10M@kBase+4M merges with the 6M after it: 16M, which the 16M request then fits exactly.
  const Trace t =
      make_trace({alloc(1, 3 * M + 5), alloc(2, 10 * M), alloc(3, 10 * M + 1), free_of(2), alloc(4, 16 * M)});
  const PolicyRun run = run_policy("gmlake:self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), at(0));
  EXPECT_EQ(run.blocks[0]->size, 4 * M);
  EXPECT_EQ(run.addr(1), at(4 * M));
  EXPECT_EQ(run.addr(2), at(20 * M));
  EXPECT_EQ(run.blocks[2]->size, 12 * M);
  EXPECT_EQ(run.addr(4), at(4 * M));
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(at(0), 20 * M), map(at(20 * M), 12 * M)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 32 * M);
  EXPECT_EQ(run.result.metrics.peak_allocated, 4 * M + 12 * M + 16 * M);  // after the last alloc
}

TEST(GmlakeSmall, RequestsUpToOneMiBGoToPytorchsSmallPool) {
  // 1000 B -> PyTorch rounds to 1024, small pool: a 2 MiB cudaMalloc at kBase, split.
  // 1 MiB is still small (<= 1 MiB): carved after the first block in the same segment.
  // 1 MiB + 1 is large: 2M block of a 20M VMM segment at the bump pointer kBase+2M.
  const Trace t = make_trace({alloc(1, 1000), alloc(2, 1 * M), alloc(3, 1 * M + 1)});
  const PolicyRun run = run_policy("gmlake:self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), at(0));
  EXPECT_EQ(run.addr(1), at(1024));
  EXPECT_EQ(run.addr(2), at(2 * M));
  EXPECT_EQ(run.blocks[2]->size, 2 * M);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{cuda_malloc(at(0), 2 * M), map(at(2 * M), 20 * M)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 22 * M);
  EXPECT_EQ(stat(run, "small_pool_reserved_bytes"), static_cast<std::int64_t>(2 * M));
}

TEST(GmlakeSmall, SegmentsListBothPoolsInAddressOrder) {
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("gmlake", device);
  ASSERT_TRUE(policy->allocate(1000, 0));
  ASSERT_TRUE(policy->allocate(1 * M, 0));
  ASSERT_TRUE(policy->allocate(1 * M + 1, 0));
  const std::vector<SegmentView> views = policy->segments();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].addr, at(0));
  EXPECT_EQ(views[0].size, 2 * M);
  EXPECT_EQ(views[0].pool, "small");
  ASSERT_EQ(views[0].blocks.size(), 3u);  // 1024 | 1 MiB | the rest, free
  EXPECT_EQ(views[0].blocks[2].size, 2 * M - 1 * M - 1024);
  EXPECT_FALSE(views[0].blocks[2].allocated);
  EXPECT_EQ(views[1].addr, at(2 * M));
  EXPECT_EQ(views[1].size, 20 * M);
  EXPECT_EQ(views[1].pool, "large");
  ASSERT_EQ(views[1].blocks.size(), 2u);
  EXPECT_EQ(views[1].blocks[0].size, 2 * M);
  EXPECT_TRUE(views[1].blocks[0].allocated);
  EXPECT_EQ(views[1].blocks[1].size, 18 * M);
  EXPECT_FALSE(views[1].blocks[1].allocated);
}

// ---- stitching --------------------------------------------------------------------------------

TEST(GmlakeStitch, StitchesTheFirstAndThirdFreeBlocksIntoANewVirtualRange) {
  // Setup A, then 60M: no free pBlock fits; the free ones, largest first: 40M@+50M, 20M@+0 = 60M.
  // A new 60M range at the bump pointer kBase+90M aliases 40M then 20M. No memory is added.
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", setup_a_then({alloc(4, 60 * M)}));
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_EQ(run.blocks[5]->size, 60 * M);
  EXPECT_EQ(run.calls, setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 90 * M);
  EXPECT_EQ(run.reserved_at_end, 90 * M);
  EXPECT_EQ(run.result.metrics.num_device_alloc, 3u);  // aliases are not allocations
  EXPECT_EQ(stat(run, "stitches"), 1);
  EXPECT_EQ(stat(run, "sblocks_live"), 1);
}

TEST(GmlakeStitch, OnlyRequestsOfAtLeastFragLimitAreStitched) {
  // 60M < 64M (and < the default 512M): a new 60M segment at kBase+90M instead; 60M >= 60M stitches.
  for (const std::string spec : {"gmlake:frag_limit:64", "gmlake"}) {
    const PolicyRun run = run_policy(spec, setup_a_then({alloc(4, 60 * M)}));
    expect_clean(run);
    EXPECT_EQ(run.addr(5), at(90 * M)) << spec;
    EXPECT_EQ(run.calls, setup_calls_then({map(at(90 * M), 60 * M)})) << spec;
    EXPECT_EQ(run.result.metrics.peak_reserved, 150 * M) << spec;
  }
  const PolicyRun at_limit = run_policy("gmlake:frag_limit:60", setup_a_then({alloc(4, 60 * M)}));
  EXPECT_EQ(at_limit.calls, setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M)}));
}

TEST(GmlakeStitch, NeedsTwoFreeBlocksOfTheRequestsStream) {
  // The 40M block is allocated (and freed) on stream 1: stream 0 has one free block, no stitch.
  const Trace t =
      make_trace({alloc(1, 20 * M), alloc(2, 30 * M), alloc(3, 40 * M, 1), free_of(1), free_of(3), alloc(4, 60 * M)});
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_EQ(run.calls, setup_calls_then({map(at(90 * M), 60 * M)}));
}

// All three setup segments freed, then one 90M sBlock (40M@+50M, 30M@+20M, 20M@+0) at kBase+90M,
// then freed: a clean cached sBlock over three whole free segments.
std::vector<Event> three_piece_sblock() {
  return {alloc(1, 20 * M), alloc(2, 30 * M), alloc(3, 40 * M), free_of(1),
          free_of(2),       free_of(3),       alloc(4, 90 * M), free_of(4)};
}
const std::vector<DeviceCallRecord> kThreePieceCalls = {map(at(0), 20 * M),         map(at(20 * M), 30 * M),
                                                        map(at(50 * M), 40 * M),    alias(at(90 * M), 40 * M),
                                                        alias(at(130 * M), 30 * M), alias(at(160 * M), 20 * M)};

TEST(GmlakeStitch, SplitsTheSmallestBlockTakenAndReuseLimitRefusesATooLargeSBlock) {
  // 46M: no free pBlock fits (20, 30, 40). The cached 90M sBlock is more than 46M x 1.5 = 69M, so
  // it is refused and a new sBlock is stitched: 40M@+50M, then 30M@+20M overshoots by 24M, so that
  // block is split, 6M taken. The new range goes at the bump pointer kBase+180M.
  std::vector<Event> events = three_piece_sblock();
  events.push_back(alloc(5, 46 * M));
  const Trace t = make_trace(events);
  const PolicyRun refused = run_policy("gmlake:frag_limit:0,reuse_limit:1.5,self_check:true", t);
  expect_clean(refused);
  EXPECT_EQ(refused.addr(8), at(180 * M));
  std::vector<DeviceCallRecord> calls = kThreePieceCalls;
  calls.push_back(alias(at(180 * M), 40 * M));
  calls.push_back(alias(at(220 * M), 6 * M));
  EXPECT_EQ(refused.calls, calls);
  EXPECT_EQ(stat(refused, "stitches"), 2);
  EXPECT_EQ(stat(refused, "sblock_reuses"), 0);
  // The old sBlock's pages are now partly in use by the new one: fragmented, not reusable.
  EXPECT_EQ(stat(refused, "sblocks_cached_fragmented"), 1);
  EXPECT_EQ(stat(refused, "pblock_free_bytes"), static_cast<std::int64_t>(20 * M + 24 * M));

  // reuse_limit 10 (default): 90M <= 460M, the cached sBlock serves its first 46M: no device call.
  const PolicyRun reused = run_policy("gmlake:frag_limit:0,self_check:true", t);
  expect_clean(reused);
  EXPECT_EQ(reused.addr(8), at(90 * M));
  EXPECT_EQ(reused.blocks[8]->size, 46 * M);
  EXPECT_EQ(reused.calls, kThreePieceCalls);
  EXPECT_EQ(stat(reused, "sblock_reuses"), 1);
}

// ---- defrag_level -----------------------------------------------------------------------------

TEST(GmlakeDefragLevel, LevelOneStitchesOnlyWhenTheDeviceRefusesNewMemory) {
  // Plenty of memory: the new 60M segment is allocated (kBase+90M), no stitch.
  const Trace t = setup_a_then({alloc(4, 60 * M)});
  const PolicyRun roomy = run_policy("gmlake:frag_limit:0,defrag_level:1,self_check:true", t);
  expect_clean(roomy);
  EXPECT_EQ(roomy.calls, setup_calls_then({map(at(90 * M), 60 * M)}));
  EXPECT_EQ(roomy.result.metrics.peak_reserved, 150 * M);
  // 100 MiB: 10M left, the new segment is refused before any range is reserved, so the stitch (at
  // the rung after it) gets the bump pointer's kBase+90M. No flush was needed.
  const PolicyRun tight = run_policy("gmlake:frag_limit:0,defrag_level:1,self_check:true", t, 100 * M);
  expect_clean(tight);
  EXPECT_EQ(tight.addr(5), at(90 * M));
  EXPECT_EQ(tight.calls, setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M)}));
  EXPECT_EQ(tight.result.metrics.num_alloc_retries, 0u);
  EXPECT_EQ(tight.result.metrics.peak_reserved, 90 * M);
}

// Two 40M segments, both split: free 20M@+20M and 10M@+70M remain, 80M reserved.
//   40M, 40M -> Map(kBase, 40M), Map(kBase+40M, 40M); both freed;
//   20M -> best fit 40M@kBase (lowest address of the equal sizes): 20M | 20M free;
//   30M -> best fit 40M@+40M: 30M | 10M free.
std::vector<Event> two_split_segments() {
  return {alloc(1, 40 * M), alloc(2, 40 * M), free_of(1), free_of(2), alloc(3, 20 * M), alloc(4, 30 * M)};
}

TEST(GmlakeDefragLevel, LevelTwoStitchesOnlyAfterTheFlushAndItsRetryFail) {
  // 90 MiB device, 30M request: no pBlock fits, 10M left for a new segment. The flush releases
  // nothing (both free blocks are parts of split segments), the retry is refused, then the stitch
  // of 20M@+20M and 10M@+70M at the bump pointer kBase+80M.
  std::vector<Event> events = two_split_segments();
  events.push_back(alloc(5, 30 * M));
  const Trace t = make_trace(events);
  const std::vector<DeviceCallRecord> calls = {map(at(0), 40 * M), map(at(40 * M), 40 * M), alias(at(80 * M), 20 * M),
                                               alias(at(100 * M), 10 * M)};
  const PolicyRun level2 = run_policy("gmlake:frag_limit:0,defrag_level:2,self_check:true", t, 90 * M);
  expect_clean(level2);
  EXPECT_EQ(level2.addr(4), at(0));
  EXPECT_EQ(level2.addr(5), at(40 * M));
  EXPECT_EQ(level2.addr(6), at(80 * M));
  EXPECT_EQ(level2.calls, calls);
  EXPECT_EQ(level2.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(level2.result.metrics.num_ooms, 0u);
  // Level 0 stitches before asking for memory: same calls, no flush.
  const PolicyRun level0 = run_policy("gmlake:frag_limit:0,self_check:true", t, 90 * M);
  EXPECT_EQ(level0.calls, calls);
  EXPECT_EQ(level0.result.metrics.num_alloc_retries, 0u);
  // Without stitching the request cannot be served.
  const PolicyRun off = run_policy("gmlake:vmm_defragment:false", t, 90 * M);
  expect_clean(off);
  EXPECT_EQ(off.result.metrics.num_ooms, 1u);
  EXPECT_EQ(off.result.metrics.num_alloc_retries, 1u);
}

TEST(GmlakeDefragLevel, LevelTwoFlushesBeforeStitching) {
  // Setup A on 100 MiB, 60M: the flush releases the two whole free segments in the pool's order
  // (20M first), then the retry maps 60M at the bump pointer kBase+90M.
  const PolicyRun run =
      run_policy("gmlake:frag_limit:0,defrag_level:2,self_check:true", setup_a_then({alloc(4, 60 * M)}), 100 * M);
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_EQ(run.calls, setup_calls_then({unmap(at(0), 20 * M), unmap(at(50 * M), 40 * M), map(at(90 * M), 60 * M)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.reserved_at_end, 90 * M);
}

// ---- the sBlock cache -------------------------------------------------------------------------

TEST(GmlakeReuse, ACachedSBlockIsReusedSkippedWhileFragmentedAndReusedAgainOnceClean) {
  const Trace t = setup_a_then({
      alloc(4, 60 * M),  // 5: stitched at kBase+90M: 40M@+50M, then 20M@+0
      free_of(4),        // 6: its pages return to the pBlocks; the sBlock is cached, clean
      alloc(5, 50 * M),  // 7: no pBlock fits (20, 40); the 60M sBlock (<= 500M) serves its first
                         //    50M: all of 40M@+50M and 10M of 20M@+0 (split: 10M free@+10M)
      alloc(6, 10 * M),  // 8: best fit 10M@kBase+10M, a page range of the sBlock's unused tail
      free_of(5),        // 9: held pages free again, but block 6 uses its tail: fragmented
      alloc(7, 60 * M),  // 10: free 10M@+0 and 40M@+50M: 50M < 60M, no stitch, no reuse: a new
                         //     segment at the bump pointer, after the sBlock's range: kBase+150M
      free_of(6),        // 11: 10M@+0 and 10M@+10M merge; the sBlock is clean again
      alloc(8, 50 * M),  // 12: no pBlock fits (20, 40): the sBlock again
  });
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_EQ(run.addr(7), at(90 * M));
  EXPECT_EQ(run.blocks[7]->size, 50 * M);
  EXPECT_EQ(run.addr(8), at(10 * M));
  EXPECT_EQ(run.addr(10), at(150 * M));
  EXPECT_EQ(run.addr(12), at(90 * M));
  EXPECT_EQ(run.calls,
            setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M), map(at(150 * M), 60 * M)}));
  EXPECT_EQ(stat(run, "stitches"), 1);
  EXPECT_EQ(stat(run, "sblock_reuses"), 2);
  EXPECT_EQ(run.result.metrics.peak_reserved, 150 * M);
}

// ---- teardown and GC --------------------------------------------------------------------------

TEST(GmlakeTeardown, TheFlushTearsDownCachedSBlocksBeforeUnmappingTheirPBlocks) {
  // 100 MiB. After the stitch and its free, block 2 is freed too: three whole free segments
  // (20, 30, 40) and the cached sBlock over 20M@+0 and 40M@+50M. 100M: nothing fits, the free
  // blocks sum to 90M (no stitch), 10M left: refused; the flush releases in the pool's order:
  // 20M@+0 first, whose alias belongs to the cached sBlock: it is torn down (both aliases) before
  // the pages go; then 30M@+20M and 40M@+50M. The retry maps 100M at the bump pointer kBase+150M.
  const Trace t = setup_a_then({alloc(4, 60 * M), free_of(4), free_of(2), alloc(5, 100 * M)});
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", t, 100 * M);
  expect_clean(run);
  EXPECT_EQ(run.addr(8), at(150 * M));
  EXPECT_EQ(run.calls,
            setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M), unalias(at(90 * M), 40 * M),
                              unalias(at(130 * M), 20 * M), unmap(at(0), 20 * M), unmap(at(20 * M), 30 * M),
                              unmap(at(50 * M), 40 * M), map(at(150 * M), 100 * M)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.result.metrics.num_ooms, 0u);
  EXPECT_EQ(run.result.metrics.peak_reserved, 100 * M);
  EXPECT_EQ(stat(run, "sblock_teardowns"), 1);
}

TEST(GmlakeTeardown, ALiveSBlockLosesItsUnusedTailAliasAndIsTornDownWhenFreed) {
  // 100 MiB. The cached 90M sBlock (40M@+50M, 30M@+20M, 20M@+0 at kBase+90M) serves 70M: its
  // first two pieces; 20M@+0 stays a whole free segment. 30M: only one free block (no stitch), 10M
  // left: refused; the flush releases 20M@+0, so the live sBlock's unused alias of it at
  // kBase+160M goes first. The retry maps 30M at the bump pointer kBase+180M. Freeing the sBlock
  // then tears it down (its two remaining aliases); its pages stay as free pBlocks.
  std::vector<Event> events = three_piece_sblock();
  events.push_back(alloc(5, 70 * M));  // 8
  events.push_back(alloc(6, 30 * M));  // 9
  events.push_back(free_of(5));        // 10
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", make_trace(events), 100 * M);
  expect_clean(run);
  EXPECT_EQ(run.addr(8), at(90 * M));
  EXPECT_EQ(run.addr(9), at(180 * M));
  std::vector<DeviceCallRecord> calls = kThreePieceCalls;
  for (const DeviceCallRecord& c : {unalias(at(160 * M), 20 * M), unmap(at(0), 20 * M), map(at(180 * M), 30 * M),
                                    unalias(at(90 * M), 40 * M), unalias(at(130 * M), 30 * M)}) {
    calls.push_back(c);
  }
  EXPECT_EQ(run.calls, calls);
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.reserved_at_end, 30 * M + 40 * M + 30 * M);
  EXPECT_EQ(stat(run, "sblock_teardowns"), 1);
  EXPECT_EQ(stat(run, "sblocks_live") + stat(run, "sblocks_cached_clean") + stat(run, "sblocks_cached_fragmented"), 0);
}

TEST(GmlakeGc, AutoGcTearsDownCachedSBlocksOnceStitchedBytesExceedTheLimit) {
  // auto_gc:0 -> GC after every stitch. The first stitch (60M) finds nothing cached. Its sBlock is
  // freed, then 20M takes 20M@+0 (the sBlock turns fragmented), block 2 is freed, and 70M stitches
  // 40M@+50M and 30M@+20M at kBase+150M; total 130M > 0: the fragmented sBlock is torn down.
  const Trace t = setup_a_then({alloc(4, 60 * M), free_of(4), alloc(5, 20 * M), free_of(2), alloc(6, 70 * M)});
  const std::vector<DeviceCallRecord> stitches = {alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M),
                                                  alias(at(150 * M), 40 * M), alias(at(190 * M), 30 * M)};
  const PolicyRun run = run_policy("gmlake:frag_limit:0,auto_gc:0,self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(7), at(0));
  EXPECT_EQ(run.addr(9), at(150 * M));
  std::vector<DeviceCallRecord> calls = setup_calls_then(stitches);
  calls.push_back(unalias(at(90 * M), 40 * M));
  calls.push_back(unalias(at(130 * M), 20 * M));
  EXPECT_EQ(run.calls, calls);
  EXPECT_EQ(stat(run, "sblock_gc_runs"), 2);
  EXPECT_EQ(stat(run, "sblock_teardowns"), 1);
  EXPECT_EQ(stat(run, "total_fuse_size"), static_cast<std::int64_t>(70 * M));
  EXPECT_EQ(run.reserved_at_end, 90 * M);
  // The default limit (1000 GiB) keeps it, fragmented.
  const PolicyRun kept = run_policy("gmlake:frag_limit:0,self_check:true", t);
  EXPECT_EQ(kept.calls, setup_calls_then(stitches));
  EXPECT_EQ(stat(kept, "sblocks_cached_fragmented"), 1);
  EXPECT_EQ(stat(kept, "total_fuse_size"), static_cast<std::int64_t>(130 * M));
}

// ---- empty_cache ------------------------------------------------------------------------------

TEST(GmlakeEmptyCache, ReleasesFreePBlocksAfterTheirSBlocksAndTheSmallPool) {
  // Everything freed: three whole free segments, the cached sBlock over 20M@+0 and 40M@+50M, and
  // a small-pool segment (2 MiB cudaMalloc at the bump pointer kBase+150M). empty_cache releases
  // in the pool's order, tearing the sBlock down first, then the small pool.
  const Trace t =
      setup_a_then({alloc(4, 60 * M), free_of(4), free_of(2), alloc(5, 1000), free_of(5), empty_cache_event()});
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(8), at(150 * M));
  EXPECT_EQ(run.calls,
            setup_calls_then({alias(at(90 * M), 40 * M), alias(at(130 * M), 20 * M), cuda_malloc(at(150 * M), 2 * M),
                              unalias(at(90 * M), 40 * M), unalias(at(130 * M), 20 * M), unmap(at(0), 20 * M),
                              unmap(at(20 * M), 30 * M), unmap(at(50 * M), 40 * M), cuda_free(at(150 * M), 2 * M)}));
  EXPECT_EQ(run.reserved_at_end, 0u);
}

TEST(GmlakeEmptyCache, CollectsCachedSBlocksWhosePBlocksStay) {
  // The two split segments keep their free parts (20M@+20M, 10M@+70M); a 30M sBlock of both at
  // kBase+80M is freed. empty_cache releases no pBlock (both are split) and GC tears the sBlock
  // down: reserved stays 80M.
  std::vector<Event> events = two_split_segments();
  events.push_back(alloc(5, 30 * M));
  events.push_back(free_of(5));
  events.push_back(empty_cache_event());
  const PolicyRun run = run_policy("gmlake:frag_limit:0,self_check:true", make_trace(events));
  expect_clean(run);
  EXPECT_EQ(run.addr(6), at(80 * M));
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(at(0), 40 * M), map(at(40 * M), 40 * M),
                                                      alias(at(80 * M), 20 * M), alias(at(100 * M), 10 * M),
                                                      unalias(at(80 * M), 20 * M), unalias(at(100 * M), 10 * M)}));
  EXPECT_EQ(run.reserved_at_end, 80 * M);
  EXPECT_EQ(stat(run, "sblock_gc_runs"), 1);
}

// ---- out of memory ----------------------------------------------------------------------------

TEST(GmlakeOom, FlushesAndRetriesOnceThenReportsOutOfMemory) {
  // 100 MiB, default frag_limit (no stitching of these sizes). 60M: 10M left, refused; the flush
  // releases 20M@+0 and 40M@+50M; the retry maps 60M at kBase+90M. 80M: 10M left, refused, the
  // flush finds nothing, the retry is refused: out of memory (90M of 100M reserved).
  const Trace t = setup_a_then({alloc(4, 60 * M), alloc(5, 80 * M)});
  const PolicyRun run = run_policy("gmlake:self_check:true", t, 100 * M);
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_FALSE(run.blocks[6].has_value());
  EXPECT_EQ(run.calls, setup_calls_then({unmap(at(0), 20 * M), unmap(at(50 * M), 40 * M), map(at(90 * M), 60 * M)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  const std::string& message = run.result.ooms[0].message;
  EXPECT_NE(message.find("83886080"), std::string::npos) << message;               // 80M
  EXPECT_NE(message.find("94371840 of 104857600"), std::string::npos) << message;  // 90M of 100M
  EXPECT_EQ(run.reserved_at_end, 90 * M);
}

TEST(GmlakeOom, ASmallRequestReleasesTheLargePoolsCacheBeforeGivingUp) {
  // 21 MiB. 20M is freed; 1000 B needs a 2 MiB small segment but 1M is left: PyTorch's small-pool
  // ladder flushes its own (empty) cache and retries (1 retry), then GMLake's flush releases the
  // free 20M segment and the segment fits at the bump pointer kBase+20M: no OOM. Then 20M: 19M
  // left, the flush frees nothing (the small segment is in use): retry 2, OOM 1.
  const Trace t = make_trace({alloc(1, 20 * M), free_of(1), alloc(2, 1000), alloc(3, 20 * M)});
  const PolicyRun run = run_policy("gmlake:self_check:true", t, 21 * M);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), at(20 * M));
  EXPECT_FALSE(run.blocks[3].has_value());
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{map(at(0), 20 * M), unmap(at(0), 20 * M), cuda_malloc(at(20 * M), 2 * M)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  // With the 20M block still live nothing can be released: the small request is out of memory.
  const PolicyRun oom = run_policy("gmlake:self_check:true", make_trace({alloc(1, 20 * M), alloc(2, 1000)}), 21 * M);
  expect_clean(oom);
  EXPECT_FALSE(oom.blocks[1].has_value());
  EXPECT_EQ(oom.result.metrics.num_ooms, 1u);
  EXPECT_EQ(oom.result.metrics.num_alloc_retries, 1u);
  ASSERT_EQ(oom.result.ooms.size(), 1u);
  EXPECT_NE(oom.result.ooms[0].message.find("1000 bytes (small pool"), std::string::npos) << oom.result.ooms[0].message;
}

// ---- re_alloc, deferred frees, vmm off --------------------------------------------------------

TEST(GmlakeReAlloc, AllocatesOnlyTheShortfallAndStitchesItIn) {
  // Setup A (free 20M@+0, 40M@+50M = 60M), then 80M: short by 20M: a 20M segment at kBase+90M,
  // then a stitch of all three, largest first, equal sizes from the higher address: 40M@+50M,
  // 20M@+90M, 20M@+0, at the bump pointer kBase+110M.
  const PolicyRun run =
      run_policy("gmlake:frag_limit:0,re_alloc:true,self_check:true", setup_a_then({alloc(4, 80 * M)}));
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(110 * M));
  EXPECT_EQ(run.calls, setup_calls_then({map(at(90 * M), 20 * M), alias(at(110 * M), 40 * M),
                                         alias(at(150 * M), 20 * M), alias(at(170 * M), 20 * M)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 110 * M);
  // 66M: short by 6M, under 10M, so the new segment is 20M; the stitch overshoots by 14M and takes
  // 6M of the last (smallest, lowest) block, 20M@+0.
  const PolicyRun rounded =
      run_policy("gmlake:frag_limit:0,re_alloc:true,self_check:true", setup_a_then({alloc(4, 66 * M)}));
  expect_clean(rounded);
  EXPECT_EQ(rounded.calls, setup_calls_then({map(at(90 * M), 20 * M), alias(at(110 * M), 40 * M),
                                             alias(at(150 * M), 20 * M), alias(at(170 * M), 6 * M)}));
  // Off (the code's default): the whole 80M is a new segment.
  const PolicyRun off = run_policy("gmlake:frag_limit:0", setup_a_then({alloc(4, 80 * M)}));
  EXPECT_EQ(off.calls, setup_calls_then({map(at(90 * M), 80 * M)}));
}

TEST(GmlakeDeferredFree, APendingBlockIsReusedOnlyAfterItsFreeCompletesOrAFlush) {
  // The 20M block's free is only requested: the next 20M gets a new segment at kBase+20M; once the
  // free completes, kBase is reused.
  const Trace t = make_trace({alloc(1, 20 * M), with_op(Op::FreeRequested, 1), alloc(2, 20 * M),
                              with_op(Op::FreeCompleted, 1), alloc(3, 20 * M)});
  const PolicyRun run = run_policy("gmlake:self_check:true", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), at(20 * M));
  EXPECT_EQ(run.addr(4), at(0));
  // 40 MiB: 30M is refused (20M left); the flush completes the pending free and releases the
  // segment; the retry maps 30M at the bump pointer kBase+20M. The late free_completed is ignored.
  const Trace flushed = make_trace({alloc(1, 20 * M), with_op(Op::FreeRequested, 1), alloc(2, 30 * M),
                                    with_op(Op::FreeCompleted, 1), alloc(3, 1 * M + 1)});
  const PolicyRun f = run_policy("gmlake:self_check:true", flushed, 40 * M);
  expect_clean(f);
  EXPECT_EQ(f.addr(2), at(20 * M));
  // 1 MiB + 1 -> 2M, which needs a new 20M segment: 10M left, refused, a second flush (nothing to
  // release), refused again: out of memory.
  EXPECT_FALSE(f.blocks[4].has_value());
  EXPECT_EQ(f.result.metrics.num_alloc_retries, 2u);
  EXPECT_EQ(f.result.metrics.num_ooms, 1u);
  EXPECT_EQ(f.calls,
            (std::vector<DeviceCallRecord>{map(at(0), 20 * M), unmap(at(0), 20 * M), map(at(20 * M), 30 * M)}));
}

TEST(GmlakeVmmOff, IsPytorchsAllocatorOnCudaMallocWithTwoMiBRounding) {
  // No VMM: segments are cudaMallocs and nothing is stitched; 60M is a new segment at kBase+90M.
  // 1 MiB + 1 is rounded to 2M and carved from the best fit, the free 20M@kBase.
  const PolicyRun run = run_policy("gmlake:vmm_defragment:false,frag_limit:0,self_check:true",
                                   setup_a_then({alloc(4, 60 * M), alloc(5, 1 * M + 1)}));
  expect_clean(run);
  EXPECT_EQ(run.addr(5), at(90 * M));
  EXPECT_EQ(run.addr(6), at(0));
  EXPECT_EQ(run.blocks[6]->size, 2 * M);  // PyTorch itself would round 1 MiB + 1 to 1 MiB + 512
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{cuda_malloc(at(0), 20 * M), cuda_malloc(at(20 * M), 30 * M),
                                           cuda_malloc(at(50 * M), 40 * M), cuda_malloc(at(90 * M), 60 * M)}));
  EXPECT_EQ(stat(run, "stitches"), 0);
  EXPECT_FALSE(run.result.notes.empty());
}

// ---- random traces and the real snapshots ------------------------------------------------------

// Random traces with deferred frees, two streams and tight devices, through stitching-heavy
// settings: no invariant violation, and the policy's own audit (self_check) never throws.
TEST(GmlakeSelfCheck, RandomTracesKeepEveryInvariant) {
  const std::vector<std::string> specs = {
      "gmlake:self_check:true,frag_limit:0",
      "gmlake:self_check:true,frag_limit:0,re_alloc:true,defrag_level:1",
      "gmlake:self_check:true,frag_limit:4,defrag_level:2,reuse_limit:1.5,auto_gc:0",
  };
  std::uint64_t stitches = 0, reuses = 0, teardowns = 0, ooms = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Event> events;
    std::vector<std::pair<AllocId, bool>> live;  // id, free requested
    AllocId next = 1;
    for (int i = 0; i < 250; ++i) {
      const std::uint64_t r = rng() % 100;
      if (r < 50 || live.empty()) {
        const std::uint64_t kind = rng() % 10;
        const Bytes size = kind < 3   ? 1 + rng() % M
                           : kind < 6 ? M + 1 + rng() % (9 * M)
                                      : (1 + rng() % 40) * M + rng() % M;
        events.push_back(alloc(next, size, rng() % 4 == 0 ? 1 : 0));
        live.emplace_back(next++, false);
      } else if (r < 95) {
        const std::size_t k = rng() % live.size();
        if (live[k].second) {
          events.push_back(with_op(Op::FreeCompleted, live[k].first));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        } else if (rng() % 4 == 0) {
          events.push_back(with_op(Op::FreeRequested, live[k].first));
          live[k].second = true;
        } else {
          events.push_back(free_of(live[k].first));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      } else {
        events.push_back(empty_cache_event());  // synchronises: pending frees complete (allocator-model §5.3)
      }
    }
    const Trace t = make_trace(events);
    for (const std::string& spec : specs) {
      const Bytes capacity = (60 + rng() % 200) * M;
      const PolicyRun run = run_policy(spec, t, capacity);
      SCOPED_TRACE(spec + " seed " + std::to_string(seed));
      expect_clean(run);
      stitches += static_cast<std::uint64_t>(stat(run, "stitches"));
      reuses += static_cast<std::uint64_t>(stat(run, "sblock_reuses"));
      teardowns += static_cast<std::uint64_t>(stat(run, "sblock_teardowns"));
      ooms += run.result.metrics.num_ooms;
    }
  }
  // The traces do exercise what they are meant to.
  EXPECT_GT(stitches, 50u);
  EXPECT_GT(reuses, 5u);
  EXPECT_GT(teardowns, 5u);
  EXPECT_GT(ooms, 5u);
}

TEST(GmlakeRealTraces, Lm27bReplaysCleanlyAndStitchingLowersPeakReserved) {
  const std::string path = std::string(FRAGLAB_REAL_TRACES) + "/lm2.7b-ctx128-fullstep.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(path);
  const Trace t = read_trace(path);
  const PolicyRun plain = run_policy("gmlake", t);
  const PolicyRun stitched = run_policy("gmlake:frag_limit:0", t);
  const PolicyRun realloc = run_policy("gmlake:frag_limit:0,re_alloc:true,defrag_level:1", t);
  for (const PolicyRun* run : {&plain, &stitched, &realloc}) {
    expect_clean(*run);
    EXPECT_EQ(run->result.metrics.num_ooms, 0u);
    EXPECT_GE(run->result.metrics.peak_reserved, run->result.metrics.peak_allocated);
  }
  // No request of this trace reaches 512 MiB: the default never stitches.
  EXPECT_EQ(stat(plain, "stitches"), 0);
  EXPECT_GT(stat(stitched, "stitches"), 0);
  EXPECT_LT(stitched.result.metrics.peak_reserved, plain.result.metrics.peak_reserved);
  // A device smaller than the peak: OOMs are reported, nothing breaks.
  const PolicyRun tight = run_policy("gmlake:frag_limit:0", t, stitched.result.metrics.peak_allocated - 2 * GiB);
  expect_clean(tight);
  EXPECT_GT(tight.result.metrics.num_ooms, 0u);
  EXPECT_EQ(tight.result.metrics.num_ooms, tight.result.ooms.size());
}

}  // namespace
}  // namespace fraglab::test
