// `fraglab compare`'s table: a real GPU's measured time in driver calls (--device cuda) gets its
// own column after the estimate, as in replay's table; a simulated device's table has none.
// Results written by hand.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "fraglab/report.hpp"

namespace fraglab {
namespace {

ReplayResult run_of(const std::string& policy, Bytes peak, std::optional<double> measured) {
  ReplayResult r;
  r.policy = policy;
  r.metrics.peak_reserved = peak;
  r.metrics.device_time_s = 0.25;
  r.metrics.measured_device_time_s = measured;
  return r;
}

std::string line(const std::string& text, std::size_t n) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < n; ++i) start = text.find('\n', start) + 1;
  return text.substr(start, text.find('\n', start) - start);
}

TEST(CompareTable, MeasuredColumnOnlyWhenARunMeasuredItsDriverCalls) {
  TraceSummary summary;
  summary.peak_requested = 1 * MiB;
  const std::string sim = compare_table(summary, {run_of("pytorch", 2 * MiB, std::nullopt)});
  EXPECT_EQ(sim.find("measured_s"), std::string::npos) << sim;

  const std::string cuda =
      compare_table(summary, {run_of("pytorch", 2 * MiB, 0.0125), run_of("nocache", 3 * MiB, std::nullopt)});
  // Lines: header, lower bound, then the runs in the order given.
  EXPECT_EQ(line(cuda, 0).substr(line(cuda, 0).size() - 19), "stall_s  measured_s") << cuda;
  EXPECT_EQ(line(cuda, 2).substr(line(cuda, 2).size() - 12), "    0.012500") << cuda;
  EXPECT_EQ(line(cuda, 3).substr(line(cuda, 3).size() - 12), "           -") << cuda;
  EXPECT_EQ(line(cuda, 0).size(), line(cuda, 2).size()) << "the column as wide as its header";
}

}  // namespace
}  // namespace fraglab
