// The pytorch policy on the real PyTorch snapshots of ../shared/traces/real (skipped when the
// folder is absent): fidelity through the replay validator, and replay speed.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

std::string real(const std::string& name) { return std::string(FRAGLAB_REAL_TRACES) + "/" + name; }

class RealTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(RealTrace, ReplaysExactly) {
  const std::string path = real(GetParam());
  FRAGLAB_NEEDS_REAL_TRACE(path);
  const Trace trace = read_trace(path);
  const ValidationReport report = validate_replay(trace);
  EXPECT_TRUE(report.exact) << validation_text(report);
  EXPECT_EQ(report.peak_reserved_simulated, report.peak_reserved_recorded);
  std::printf(
      "[ fidelity ] %s: segment events %llu/%llu matched, alloc addresses %llu/%llu, reserved checks "
      "%llu/%llu, peak %llu, retries %llu, empty_cache inferred %llu\n",
      GetParam(), static_cast<unsigned long long>(report.segment_events_matched),
      static_cast<unsigned long long>(report.segment_events_recorded),
      static_cast<unsigned long long>(report.alloc_addresses_matched),
      static_cast<unsigned long long>(report.allocs_recorded), static_cast<unsigned long long>(report.reserved_matched),
      static_cast<unsigned long long>(report.reserved_checks),
      static_cast<unsigned long long>(report.peak_reserved_simulated),
      static_cast<unsigned long long>(report.retries_simulated),
      static_cast<unsigned long long>(report.empty_cache_inferred));
}

INSTANTIATE_TEST_SUITE_P(Snapshots, RealTrace,
                         ::testing::Values("tiny-segments.pickle", "finetune-step-oldformat.pickle",
                                           "gpt2medium-ctx128-train-cutoff.pickle", "lm-forward-bf16-nosegments.pickle",
                                           "lm2.7b-ctx128-fullstep.pickle", "lm2.7b-ctx512-forward-bf16.pickle"),
                         // "lm2.7b-ctx128-fullstep.pickle" -> lm2_7b_ctx128_fullstep
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name(info.param);
                           name.erase(name.rfind(".pickle"));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace fraglab
