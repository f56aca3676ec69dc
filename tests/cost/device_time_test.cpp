// device_time_s / stall_time_s worked out by hand (README "Device time"): tiny traces whose
// device calls follow from each policy's documented behaviour, priced by a cost model of round
// numbers, so every total below is a sum done in the comment next to it.
#include <gtest/gtest.h>

#include <memory>

#include "fraglab/cost_model.hpp"
#include "fraglab/device_spec.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

// One figure per call, all different, none per byte (except where a test says so).
const CostModel& round_costs() {
  static const CostModel model = parse_cost_model(R"({"fraglab_cost_model": 1, "calls": {
      "cudaMalloc": {"fixed_us": 10}, "cudaFree": {"fixed_us": 20}, "cudaDeviceSynchronize": {"fixed_us": 100},
      "cuMemAddressReserve": {"fixed_us": 1}, "cuMemAddressFree": {"fixed_us": 2}, "cuMemCreate": {"fixed_us": 3},
      "cuMemRelease": {"fixed_us": 4}, "cuMemMap": {"fixed_us": 5}, "cuMemUnmap": {"fixed_us": 6},
      "cuMemSetAccess": {"fixed_us": 7}, "cudaMallocAsync_hit": {"fixed_us": 0.5},
      "cudaMallocAsync_miss": {"fixed_us": 50}, "cudaMemPoolTrimTo": {"fixed_us": 8}}})",
                                                  "round.json");
  return model;
}

ReplayResult run(const std::string& spec, const Trace& trace, const std::string& device = "sim") {
  DeviceSpec d = parse_device_spec(device);
  d.costs = std::make_shared<const CostModel>(round_costs());
  return run_replay(trace, spec, d);
}

void expect_us(const ReplayResult& r, double device_us, double stall_us) {
  EXPECT_DOUBLE_EQ(r.metrics.device_time_s, device_us / 1e6) << r.policy;
  EXPECT_DOUBLE_EQ(r.metrics.stall_time_s, stall_us / 1e6) << r.policy;
}

TEST(DeviceTime, NoCacheIsOneMallocPerRequestAndOneFreePerFree) {
  // 3 cudaMalloc (10) + 3 cudaFree (20, each a stall) = 90 us, 60 us of it stalled.
  const Trace t = make_trace({alloc(1, 1000), alloc(2, 3 * MiB), free_of(1), alloc(3, 100), free_of(2), free_of(3)});
  expect_us(run("nocache", t), 90, 60);
}

TEST(DeviceTime, PyTorchEmptyCacheSynchronisesThenFreesTheCachedSegment) {
  // 1000 B: a 2 MiB small-pool segment, cudaMalloc (10); the free keeps it cached; empty_cache:
  // cudaDeviceSynchronize (100) + cudaFree of the segment (20). 130 us, 120 of it stalled.
  const Trace t = make_trace({alloc(1, 1000), free_of(1), empty_cache_event()});
  expect_us(run("pytorch", t), 130, 120);
}

TEST(DeviceTime, PyTorchFlushAfterAFailedCudaMallocIsASynchronisationAndTheFrees) {
  // On 21 MiB: 3 MiB gets a 20 MiB large segment (cudaMalloc 10), cached after its free. 1000 B
  // needs a 2 MiB small segment: cudaMalloc fails (10; 1 MiB left), release_cached_blocks
  // synchronises (100) and frees the 20 MiB segment (cudaFree 20), the retry succeeds (10).
  // 10 + 10 + 100 + 20 + 10 = 150 us; stalled: 100 + 20 = 120 us.
  const Trace t = make_trace({alloc(1, 3 * MiB), free_of(1), alloc(2, 1000)});
  const ReplayResult r = run("pytorch", t, "sim:21MiB");
  EXPECT_EQ(r.metrics.num_alloc_retries, 1u);
  expect_us(r, 150, 120);
}

TEST(DeviceTime, ExpandableSegmentsMapOneHandlePerSegmentSizedPage) {
  // Large pool, 20 MiB pages (docs/allocator-model.md §7): cuMemAddressReserve (1), the 3 MiB
  // request maps one 20 MiB page: cuMemCreate (3) + cuMemMap (5) + cuMemSetAccess (7). empty_cache:
  // cudaDeviceSynchronize (100), the unmap synchronises (100) then cuMemUnmap (6) + cuMemRelease
  // (4), and the range, wholly unmapped, is freed: cuMemAddressFree (2) (§7.5).
  // 1 + 15 + 100 + 110 + 2 = 228 us; stalled 200 us.
  const Trace t = make_trace({alloc(1, 3 * MiB), free_of(1), empty_cache_event()});
  expect_us(run("pytorch:expandable_segments:True", t), 228, 200);
}

TEST(DeviceTime, BestfitMapsPagesOnDemandAndUnmapsThemOnTheFree) {
  // release_threshold_mb:0: the arena range on first use (cuMemAddressReserve 1); 3 MiB needs two
  // 2 MiB pages: 2 x (cuMemCreate 3 + cuMemMap 5) + cuMemSetAccess 7 = 23; the free leaves both
  // pages free: a synchronisation (100) + 2 x (cuMemUnmap 6 + cuMemRelease 4) = 120.
  // 1 + 23 + 120 = 144 us; stalled 100 us.
  const Trace t = make_trace({alloc(1, 3 * MiB), free_of(1)});
  expect_us(run("bestfit:release_threshold_mb:0", t), 144, 100);
}

TEST(DeviceTime, CudaAsyncChargesPoolHitsMissesAndTheTrim) {
  // The pool maps inside cudaMallocAsync (no VMM calls charged): the first 3 MiB grows the pool
  // (miss 50); after its free on the same stream the second is served from the pool (hit 0.5);
  // empty_cache = cudaDeviceSynchronize (100) + cudaMemPoolTrimTo (8). 158.5 us; stalled 100 us.
  const Trace t = make_trace({alloc(1, 3 * MiB), free_of(1), alloc(2, 3 * MiB), empty_cache_event()});
  expect_us(run("cuda_async", t), 158.5, 100);
}

TEST(DeviceTime, PerGibFiguresScaleWithTheBytesOfEachCall) {
  // cudaMalloc 10 us + 1000 us/GiB: a 512 MiB segment costs 10 + 500 = 510 us; its cudaFree 20.
  CostModel m = round_costs();
  m[ApiCall::CudaMalloc] = {10, 1000};
  DeviceSpec d = parse_device_spec("sim");
  d.costs = std::make_shared<const CostModel>(m);
  const ReplayResult r = run_replay(make_trace({alloc(1, 512 * MiB), free_of(1)}), "nocache", d);
  EXPECT_DOUBLE_EQ(r.metrics.device_time_s, 530 / 1e6);
  EXPECT_DOUBLE_EQ(r.metrics.stall_time_s, 20 / 1e6);
}

TEST(DeviceTime, StallIsPartOfDeviceTimeForEveryPolicy) {
  const Trace t = make_trace(random_alloc_free_events(7, 64 * KiB, 24 * MiB, 10, 400));
  for (const std::string spec :
       {"pytorch", "pytorch:expandable_segments:True", "nocache", "bestfit", "buddy", "tlsf", "cuda_async", "gmlake"}) {
    const ReplayResult r = run(spec, t, "sim:256MiB");
    EXPECT_GT(r.metrics.device_time_s, 0) << spec;
    EXPECT_LE(r.metrics.stall_time_s, r.metrics.device_time_s) << spec;
  }
}

}  // namespace
}  // namespace fraglab::test
