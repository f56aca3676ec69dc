// The measured_s column of the replay and compare tables: a real GPU's measured time in driver
// calls (--device cuda) next to the estimate. A simulated device measures nothing, so its tables
// keep their columns.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fraglab/replay.hpp"

namespace fraglab {

inline bool any_measured(const std::vector<ReplayResult>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [](const ReplayResult& r) { return r.metrics.measured_device_time_s.has_value(); });
}
inline std::string measured_header() { return fmt::format("  {:>10}", "measured_s"); }
// "-" for a run that measured nothing (a table may mix devices only in principle; keep it aligned).
inline std::string measured_cell(const Metrics& m) {
  return m.measured_device_time_s ? fmt::format("  {:>10.6f}", *m.measured_device_time_s)
                                  : fmt::format("  {:>10}", "-");
}

}  // namespace fraglab
