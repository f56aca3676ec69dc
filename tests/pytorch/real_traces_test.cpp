// The pytorch policy on the real PyTorch snapshots of ../shared/traces/real (skipped when the
// folder is absent): fidelity through the replay validator, and replay speed.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"

namespace fraglab {
namespace {

std::string real(const std::string& name) { return std::string(FRAGLAB_REAL_TRACES) + "/" + name; }

class RealTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(RealTrace, ReplaysExactly) {
  const std::string path = real(GetParam());
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const Trace trace = read_trace(path);
  const ValidationReport report = validate_replay(trace);
  EXPECT_TRUE(report.exact) << validation_text(report);
  EXPECT_EQ(report.peak_reserved_simulated, report.peak_reserved_recorded);
  std::printf("[ fidelity ] %s: segment events %llu/%llu matched, alloc addresses %llu/%llu, reserved checks "
              "%llu/%llu, peak %llu, retries %llu, empty_cache inferred %llu\n",
              GetParam(), static_cast<unsigned long long>(report.segment_events_matched),
              static_cast<unsigned long long>(report.segment_events_recorded),
              static_cast<unsigned long long>(report.alloc_addresses_matched),
              static_cast<unsigned long long>(report.allocs_recorded),
              static_cast<unsigned long long>(report.reserved_matched),
              static_cast<unsigned long long>(report.reserved_checks),
              static_cast<unsigned long long>(report.peak_reserved_simulated),
              static_cast<unsigned long long>(report.retries_simulated),
              static_cast<unsigned long long>(report.empty_cache_inferred));
}

INSTANTIATE_TEST_SUITE_P(Snapshots, RealTrace,
                         ::testing::Values("tiny-segments.pickle", "finetune-step-oldformat.pickle",
                                           "gpt2medium-ctx128-train-cutoff.pickle", "lm-forward-bf16-nosegments.pickle",
                                           "lm2.7b-ctx128-fullstep.pickle", "lm2.7b-ctx512-forward-bf16.pickle"));

// Throughput on the 19.3k-event trace, default settings and expandable segments. The target is
// >= 5 M events/s in a release build; the assertion is loose so debug/sanitizer builds pass.
TEST(RealTraceSpeed, LargeTraceReplayThroughput) {
  const std::string path = real("lm2.7b-ctx128-fullstep.pickle");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const Trace trace = read_trace(path);
  for (const char* spec : {"pytorch", "pytorch:expandable_segments:True"}) {
    double best = 1e9;
    std::uint64_t events = 0;
    for (int rep = 0; rep < 20; ++rep) {
      SimDevice device(SimDeviceConfig{80 * GiB, 0});
      std::unique_ptr<Policy> policy = create_policy(spec, device);
      Replayer replayer(trace, *policy, device);
      const auto t0 = std::chrono::steady_clock::now();
      const ReplayResult result = replayer.run(spec);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
      events = result.events_replayed;
    }
    const double rate = static_cast<double>(events) / best;
    std::printf("[ speed ] %s: %llu events in %.3f ms = %.2f M events/s\n", spec,
                static_cast<unsigned long long>(events), best * 1e3, rate / 1e6);
    EXPECT_GT(rate, 5e5) << spec;
  }
}

}  // namespace
}  // namespace fraglab
