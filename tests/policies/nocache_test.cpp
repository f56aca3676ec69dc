// nocache: one device malloc per request at the simulated device's bump pointer, one free per
// free. Addresses and peaks below follow from SimDevice's placement rules by hand.
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

TEST(NoCache, EveryRequestIsOneMallocAndEveryFreeOneFree) {
  // 1000 B -> a 1024 B footprint at kBase; 3 MiB is page sized, so it is aligned to the next 2 MiB.
  const Trace t = make_trace({alloc(1, 1000), alloc(2, 3 * MiB), free_of(1), alloc(3, 100), free_of(2), free_of(3)});
  const PolicyRun run = run_policy("nocache", t);
  EXPECT_TRUE(run.violations.empty()) << run.violations.front();
  EXPECT_EQ(run.addr(0), kBase);
  EXPECT_EQ(run.addr(1), kBase + 2 * MiB);
  EXPECT_EQ(run.addr(3), kBase + 5 * MiB);  // the bump pointer never goes back
  EXPECT_EQ(run.result.metrics.peak_reserved, 1024 + 3 * MiB);
  EXPECT_EQ(run.result.metrics.num_device_alloc, 3u);
  EXPECT_EQ(run.result.metrics.num_device_free, 3u);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

}  // namespace
}  // namespace fraglab::test
