// run_sweep: every job's result equals a plain single-threaded replay of it, whatever the thread
// count; errors stop the sweep and reach the caller.
#include <gtest/gtest.h>

#include <map>

#include "fraglab/policy.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab {
namespace {

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

TEST(Runner, ResultsDoNotDependOnThreads) {
  const Trace a = read_trace(kSamples + "two-phase.jsonl");
  const Trace b = read_trace(kSamples + "streams.jsonl");
  SweepGrid grid;
  grid.axes = {parse_grid_axis("max_split_size_mb=none,20,64"), parse_grid_axis("expandable_segments=False,True"),
               parse_grid_axis("roundup_power2_divisions=none,4")};
  std::vector<SweepJob> jobs;
  for (const Trace* t : {&a, &b}) {
    for (const Setting& s : expand_grid(grid)) jobs.push_back({t, s.spec});
  }
  ASSERT_EQ(jobs.size(), 24u);

  // The reference: each job replayed on its own, here, one after the other.
  std::vector<Metrics> expected;
  for (const SweepJob& job : jobs) {
    SimDevice device;
    auto policy = create_policy(job.spec, device);
    expected.push_back(Replayer(*job.trace, *policy, device).run(job.spec).metrics);
  }
  for (unsigned threads : {1u, 2u, 4u}) {
    SweepRunOptions options;
    options.threads = threads;
    std::map<size_t, Metrics> got;
    run_sweep(jobs, options, [&](size_t i, const ReplayResult& r) {
      EXPECT_TRUE(got.emplace(i, r.metrics).second) << "job " << i << " reported twice";
      EXPECT_EQ(r.policy, jobs[i].spec);
    });
    ASSERT_EQ(got.size(), jobs.size()) << threads;
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(got[i].peak_reserved, expected[i].peak_reserved) << threads << " threads, job " << i;
      EXPECT_EQ(got[i].peak_allocated, expected[i].peak_allocated);
      EXPECT_EQ(got[i].num_alloc_retries, expected[i].num_alloc_retries);
      EXPECT_EQ(got[i].num_device_alloc, expected[i].num_device_alloc);
      EXPECT_EQ(got[i].fragmentation_at_peak, expected[i].fragmentation_at_peak);
    }
  }
}

TEST(Runner, FirstErrorStopsTheSweepAndIsRethrown) {
  const Trace t = read_trace(kSamples + "two-phase.jsonl");
  std::vector<SweepJob> jobs(50, SweepJob{&t, "pytorch"});
  jobs[3].spec = "no-such-policy";
  SweepRunOptions options;
  options.threads = 2;
  size_t reported = 0;
  EXPECT_THROW(run_sweep(jobs, options, [&](size_t, const ReplayResult&) { ++reported; }), InputError);
  EXPECT_LT(reported, jobs.size());
  // An exception from the callback (e.g. a full disk) stops it too.
  EXPECT_THROW(run_sweep(jobs, options, [](size_t, const ReplayResult&) { throw std::runtime_error("disk full"); }),
               std::runtime_error);
}

TEST(Runner, NoJobsIsFine) {
  SweepRunOptions options;
  run_sweep({}, options, [](size_t, const ReplayResult&) { FAIL(); });
}

}  // namespace
}  // namespace fraglab
