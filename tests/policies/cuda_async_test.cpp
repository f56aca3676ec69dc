// cuda_async: the stream-ordered pool of backend:cudaMallocAsync. Every expectation below is
// derived by hand from the model in policies/cuda_async/cuda_async.cpp and SimDevice's rules:
//  - the pool reserves 2 × capacity of address space at the first request; on a fresh SimDevice
//    that range starts at kBase, so pool offsets are offsets from kBase;
//  - requests round up to 512 B; best fit over the free bytes a stream may reuse; when nothing
//    fits, growth at the top (from the free run touching the top) by whole 2 MiB pages;
//  - a plain free is reusable at once by its own stream, by others after a synchronisation point
//    (a "step" mark, empty_cache, the OOM flush); a deferred free by all at free_completed;
//  - trimming unmaps whole free pages from the highest address down to the release threshold.
#include <algorithm>

#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

constexpr StreamId kSide = 7;  // a second stream

Event free_requested(AllocId id) { return with_op(Op::FreeRequested, id); }
Event free_completed(AllocId id) { return with_op(Op::FreeCompleted, id); }
Event empty_cache() {
  Event e;
  e.op = Op::EmptyCache;
  return e;
}

// Strings of every trace below: mark(0, 1) is a step mark, mark(2, 3) a phase mark.
Trace with_marks(std::vector<Event> events) {
  return make_trace(std::move(events), {"step", "1", "phase", "\"forward\""});
}

DeviceCallRecord map(Addr offset, Bytes size) { return {DeviceCall::Map, kBase + offset, size}; }
DeviceCallRecord unmap(Addr offset, Bytes size) { return {DeviceCall::Unmap, kBase + offset, size}; }

std::int64_t stat(const PolicyRun& run, const std::string& key) {
  for (const auto& [name, value] : run.result.detailed_stats) {
    if (name == key) return value;
  }
  ADD_FAILURE() << "no stat " << key;
  return -2;
}

TEST(CudaAsync, SameStreamReusesAFreeAtOnceOtherStreamsDoNot) {
  const Trace t = with_marks({alloc(1, 1 * MiB), free_of(1), alloc(2, 1 * MiB, kSide), alloc(3, 1 * MiB)});
  const PolicyRun run = run_policy("cuda_async", t);
  expect_clean(run);
  // e0: empty pool, grows by one page: Map [0, 2 MiB), block at 0, [1, 2) MiB free and shared.
  EXPECT_EQ(run.addr(0), kBase);
  // e2: stream 7 may not reuse [0, 1) MiB (freed on stream 0, no sync since); the shared tail fits.
  EXPECT_EQ(run.addr(2), kBase + 1 * MiB);
  // e3: stream 0 reuses its own free at once.
  EXPECT_EQ(run.addr(3), kBase);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.peak_reserved, 2 * MiB);
  // Two 1 MiB blocks in use at the end, never more.
  EXPECT_EQ(stat(run, "UsedMemCurrent"), static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(stat(run, "UsedMemHigh"), static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(stat(run, "ReservedMemHigh"), static_cast<std::int64_t>(2 * MiB));
}

// e0 stream 0 takes page [0, 2); e1 frees it on stream 0; e2 stream 7 may not reuse it, so the
// pool grows past it (the free run at the top is stream 0's): Map [2, 4), block at 2 MiB; e3
// frees that on stream 7; e4 is a mark; e5 stream 7 asks for 2 MiB again.
std::vector<Event> cross_stream_events(Event boundary) {
  return {alloc(1, 2 * MiB), free_of(1), alloc(2, 2 * MiB, kSide), free_of(2), boundary, alloc(3, 2 * MiB, kSide)};
}

TEST(CudaAsync, OtherStreamsReuseAPlainFreeAfterAStepMark) {
  const PolicyRun run = run_policy("cuda_async", with_marks(cross_stream_events(mark(0, 1))));
  expect_clean(run);
  EXPECT_EQ(run.addr(2), kBase + 2 * MiB);
  // After the step mark everything is shared and coalesced: best fit is [0, 4) MiB, block at 0.
  EXPECT_EQ(run.addr(5), kBase);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 2 * MiB), map(2 * MiB, 2 * MiB)}));
  EXPECT_EQ(stat(run, "sync_points"), 1);
}

TEST(CudaAsync, PhaseMarksAndSyncOnMarkNoneAreNoSynchronisation) {
  // Without a sync stream 7 still may not touch [0, 2); its own free [2, 4) MiB fits.
  for (const Event& boundary : {mark(2, 3), mark(0, 1)}) {
    const std::string spec = boundary.id == 2 ? "cuda_async" : "cuda_async:sync_on_mark:none";
    const PolicyRun run = run_policy(spec, with_marks(cross_stream_events(boundary)));
    expect_clean(run);
    EXPECT_EQ(run.addr(5), kBase + 2 * MiB) << spec;
    EXPECT_EQ(stat(run, "sync_points"), 0) << spec;
  }
  // sync_on_mark:all makes the phase mark a synchronisation too.
  const PolicyRun all = run_policy("cuda_async:sync_on_mark:all", with_marks(cross_stream_events(mark(2, 3))));
  EXPECT_EQ(all.addr(5), kBase);
}

TEST(CudaAsync, DeferredFreeIsReusableByEveryStreamAtFreeCompleted) {
  const std::vector<Event> events = {alloc(1, 2 * MiB),       free_requested(1),        alloc(2, 2 * MiB),
                                     free_completed(1),       alloc(3, 2 * MiB, kSide), mark(0, 1),
                                     alloc(4, 2 * MiB, kSide)};
  const PolicyRun run = run_policy("cuda_async", with_marks(events));
  expect_clean(run);
  // e2: block 1 still awaits its usage streams, so the pool grows: [2, 4) MiB.
  EXPECT_EQ(run.addr(2), kBase + 2 * MiB);
  // e4: the completed deferred free is shared at once: stream 7 takes [0, 2).
  EXPECT_EQ(run.addr(4), kBase);
  // e6: nothing free; growth at the top [4, 6).
  EXPECT_EQ(run.addr(6), kBase + 4 * MiB);

  const PolicyRun strict = run_policy("cuda_async:opportunistic:False", with_marks(events));
  expect_clean(strict);
  // e4: [0, 2) awaits a synchronisation; the top page is taken by block 2, so the pool grows.
  EXPECT_EQ(strict.addr(4), kBase + 4 * MiB);
  // e6: after the step mark [0, 2) is shared.
  EXPECT_EQ(strict.addr(6), kBase);
  EXPECT_EQ(stat(strict, "awaiting_sync_bytes"), 0);
}

// e0 maps [0, 6); e1 grows by one page [6, 8) and leaves [7, 8) free; e2 frees [0, 6); e3 is a
// step mark: a synchronisation, after which the pool trims to its release threshold.
std::vector<Event> trim_events() { return {alloc(1, 6 * MiB), alloc(2, 1 * MiB), free_of(1), mark(0, 1)}; }

TEST(CudaAsync, ReleaseThresholdMaxNeverTrimsAtASync) {
  const PolicyRun run = run_policy("cuda_async", with_marks(trim_events()));
  expect_clean(run);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 6 * MiB), map(6 * MiB, 2 * MiB)}));
  EXPECT_EQ(run.reserved_at_end, 8 * MiB);
}

TEST(CudaAsync, ReleaseThresholdZeroTrimsEveryWholeFreePage) {
  std::vector<Event> events = trim_events();
  events.push_back(alloc(3, 6 * MiB));
  const PolicyRun run = run_policy("cuda_async:release_threshold:0", with_marks(events));
  expect_clean(run);
  // Free: [0, 6) and [7, 8). Only [0, 6) holds whole pages; page [6, 8) holds block 2.
  // e4: best fit is [0, 6) again, whose pages are mapped back.
  EXPECT_EQ(run.addr(4), kBase);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 6 * MiB), map(6 * MiB, 2 * MiB), unmap(0, 6 * MiB),
                                                      map(0, 6 * MiB)}));
  EXPECT_EQ(stat(run, "trimmed_bytes"), static_cast<std::int64_t>(6 * MiB));
  EXPECT_EQ(run.result.metrics.peak_reserved, 8 * MiB);
}

TEST(CudaAsync, APartialReleaseThresholdTrimsTheHighestFreePagesFirst) {
  // 8 MiB mapped, threshold 4 MiB: 4 MiB = two pages go, the highest free ones: [2, 6).
  const PolicyRun run = run_policy("cuda_async:release_threshold:4MiB", with_marks(trim_events()));
  expect_clean(run);
  EXPECT_EQ(run.calls.back(), unmap(2 * MiB, 4 * MiB));
  EXPECT_EQ(run.reserved_at_end, 4 * MiB);
}

TEST(CudaAsync, EmptyCacheSynchronisesAndTrimsToZero) {
  // e0 maps [0, 4) for 3 MiB; e1 takes the free tail [3, 4); e2 frees [0, 3) on stream 0; e3
  // releases page [0, 2) (page [2, 4) still holds block 2); e4: stream 7 may reuse [0, 3) now.
  const Trace t =
      with_marks({alloc(1, 3 * MiB), alloc(2, 1 * MiB), free_of(1), empty_cache(), alloc(3, 3 * MiB, kSide)});
  const PolicyRun run = run_policy("cuda_async", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(1), kBase + 3 * MiB);
  EXPECT_EQ(run.addr(4), kBase);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 4 * MiB), unmap(0, 2 * MiB), map(0, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_device_free, 1u);
}

TEST(CudaAsync, SegmentsAreTheMappedRunsWithTheirBlocks) {
  const Trace t = with_marks({alloc(1, 3 * MiB), alloc(2, 1 * MiB), free_of(1), empty_cache()});
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("cuda_async", device);
  Replayer(t, *policy, device).run("cuda_async");
  // After the trim only page [2, 4) is mapped: [2, 3) free, [3, 4) block 2.
  const std::vector<SegmentView> segments = policy->segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].addr, kBase + 2 * MiB);
  EXPECT_EQ(segments[0].size, 2 * MiB);
  ASSERT_EQ(segments[0].blocks.size(), 2u);
  EXPECT_EQ(segments[0].blocks[0].addr, kBase + 2 * MiB);
  EXPECT_EQ(segments[0].blocks[0].size, 1 * MiB);
  EXPECT_FALSE(segments[0].blocks[0].allocated);
  EXPECT_EQ(segments[0].blocks[1].addr, kBase + 3 * MiB);
  EXPECT_TRUE(segments[0].blocks[1].allocated);
}

TEST(CudaAsync, RequestsRoundUpTo512Bytes) {
  const PolicyRun run = run_policy("cuda_async", with_marks({alloc(1, 1000), alloc(2, 0), alloc(3, 512)}));
  expect_clean(run);
  EXPECT_EQ(run.blocks[0]->size, 1024u);
  EXPECT_EQ(run.addr(1), kBase + 1024);  // 0 bytes still takes 512
  EXPECT_EQ(run.blocks[1]->size, 512u);
  EXPECT_EQ(run.addr(2), kBase + 1536);
}

TEST(CudaAsync, OutOfMemoryFlushesTrimsAndRetriesOnce) {
  // Capacity 8 MiB.
  // e0: 3 MiB, Map [0, 4), free tail [3, 4).
  // e1: 3 MiB: grows from the free run at the top: block [3, 6), Map [4, 6). 6 MiB mapped.
  // e2: frees [0, 3).
  // e3: 4 MiB: [0, 3) too small; growth at the top [6, 10) needs 4 MiB, 2 MiB are left: refused.
  //     No other stream's memory to wait for. Flush: TrimTo(0) unmaps page [0, 2) (page [2, 4)
  //     holds block 2): 4 MiB mapped, 4 MiB left; the retry maps [6, 10).
  // e4: 8 MiB: nothing fits, nothing to trim ([0, 2) is unmapped already): out of memory.
  const Trace t = with_marks({alloc(1, 3 * MiB), alloc(2, 3 * MiB), free_of(1), alloc(3, 4 * MiB), alloc(4, 8 * MiB)});
  const PolicyRun run = run_policy("cuda_async", t, 8 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(1), kBase + 3 * MiB);
  EXPECT_EQ(run.addr(3), kBase + 6 * MiB);
  EXPECT_FALSE(run.blocks[4].has_value());
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 4 * MiB), map(4 * MiB, 2 * MiB), unmap(0, 2 * MiB),
                                                      map(6 * MiB, 4 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 2u);  // e3 and e4 each flushed once
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  EXPECT_EQ(run.result.metrics.peak_reserved, 8 * MiB);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_EQ(run.result.ooms[0].event_index, 4u);
  EXPECT_NE(run.result.ooms[0].message.find("allocation of 8388608 bytes"), std::string::npos)
      << run.result.ooms[0].message;
  EXPECT_NE(run.result.ooms[0].message.find("pool reserved 8388608 bytes"), std::string::npos)
      << run.result.ooms[0].message;
}

TEST(CudaAsync, TheFlushCompletesDeferredFrees) {
  // Capacity 4 MiB: two 2 MiB blocks fill it. Block 1's free is requested, not completed, at e3.
  // The flush synchronises the device, so block 1 returns to the pool; TrimTo(0) unmaps [0, 2)
  // and the retry maps it again for block 3. Block 1's later free_completed changes nothing.
  const Trace t = with_marks(
      {alloc(1, 2 * MiB), alloc(2, 2 * MiB), free_requested(1), alloc(3, 2 * MiB), free_completed(1), free_of(3)});
  const PolicyRun run = run_policy("cuda_async", t, 4 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(3), kBase);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{map(0, 2 * MiB), map(2 * MiB, 2 * MiB), unmap(0, 2 * MiB),
                                                      map(0, 2 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.result.metrics.num_ooms, 0u);
  EXPECT_EQ(stat(run, "UsedMemCurrent"), static_cast<std::int64_t>(2 * MiB));  // block 2
}

TEST(CudaAsync, InternalDependenciesReuseAnotherStreamsFreeBeforeFlushing) {
  // Capacity 4 MiB, filled by two blocks of stream 0; block 1 is freed on stream 0. Stream 7
  // cannot grow the pool; with internal dependencies it waits on stream 0 and takes [0, 2).
  const Trace t = with_marks({alloc(1, 2 * MiB), alloc(2, 2 * MiB), free_of(1), alloc(3, 2 * MiB, kSide)});
  const PolicyRun run = run_policy("cuda_async", t, 4 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(3), kBase);
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 0u);
  EXPECT_EQ(stat(run, "internal_dependency_reuses"), 1);
  EXPECT_EQ(run.calls.size(), 2u);  // the two maps of e0 and e1

  // Without them the flush synchronises, trims [0, 2) and maps it again.
  const PolicyRun off = run_policy("cuda_async:internal_dependencies:False", t, 4 * MiB);
  expect_clean(off);
  EXPECT_EQ(off.addr(3), kBase);
  EXPECT_EQ(off.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(off.calls, (std::vector<DeviceCallRecord>{map(0, 2 * MiB), map(2 * MiB, 2 * MiB), unmap(0, 2 * MiB),
                                                      map(0, 2 * MiB)}));
}

TEST(CudaAsync, AFullDeviceIsReportedNotCrashed) {
  const PolicyRun run = run_policy("cuda_async", with_marks({alloc(1, 3 * MiB), free_of(1)}), 2 * MiB);
  expect_clean(run);
  EXPECT_FALSE(run.blocks[0].has_value());
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

TEST(CudaAsync, AnAbsurdRequestIsOutOfMemoryNotAWrappedAddress) {
  const Bytes absurd = ~Bytes{0} - 100;  // rounding it up to 512 would wrap around
  const PolicyRun run = run_policy("cuda_async", with_marks({alloc(1, absurd), alloc(2, 1000)}));
  expect_clean(run);
  EXPECT_FALSE(run.blocks[0].has_value());
  EXPECT_EQ(run.addr(1), kBase);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
}

TEST(CudaAsync, BadOptionsNameTheKeyAndTheAcceptedValues) {
  const auto message = spec_error;
  EXPECT_EQ(message("cuda_async:colour:red"),
            "cuda_async: unknown option 'colour' (accepted: release_threshold, opportunistic, internal_dependencies, "
            "sync_on_mark)");
  EXPECT_EQ(message("cuda_async:opportunistic:yes"),
            "cuda_async: opportunistic: expected True or False (also true, false, 1, 0), got 'yes'");
  EXPECT_EQ(message("cuda_async:release_threshold:lots"),
            "cuda_async: release_threshold: expected a byte size (e.g. 0, 512MiB, 4GiB) or 'max', got 'lots'");
  EXPECT_EQ(message("cuda_async:sync_on_mark:sometimes"),
            "cuda_async: sync_on_mark: expected step, all or none, got 'sometimes'");
  EXPECT_EQ(message("cuda_async:release_threshold:max,opportunistic:False,internal_dependencies:True,sync_on_mark:all"),
            "(no error)");
}

}  // namespace
}  // namespace fraglab::test
