// Rendering sweeps (src/report/sweep_report.cpp, capacity_note.cpp, progress.cpp): the
// end-of-sweep text and the progress line. The rows, their ranking and the Pareto front are the
// sweep layer's (fraglab/sweep.hpp).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "fraglab/sweep.hpp"

namespace fraglab {

struct SweepReportOptions {
  std::size_t top = 25;  // table rows per trace; 0 = all
  std::map<std::string, SweepTraceContext> traces;
};
// Options that act on a share of the GPU's memory: rows differing only in one of them act the
// same when the capacity is too large for the share to bind, which the report points out when
// the capacity was assumed.
bool needs_capacity(std::string_view option);
// A results file's device column as a section header names it: "sim, capacity 80.00 GiB
// (default)" for a spec without a capacity, "sim:40GiB, capacity 40.00 GiB" otherwise (a column
// that is not a device spec is shown as it is). From the column alone, so a merge of shards
// describes it as the sweep did.
std::string describe_device_column(std::string_view device);
// The end-of-sweep text: per trace the ranked table, the Pareto front and the best setting;
// with several traces also the setting best across all of them.
std::string sweep_report(const ResultsTable& table, const SweepReportOptions& options = {});

// ---- progress ---------------------------------------------------------------------------------

// "[#####.....] 45/200 22% 12.3 runs/s ETA 0:13" (terminal) or a plain line (logs).
std::string format_progress(std::size_t done, std::size_t total, double elapsed_seconds, bool terminal);
std::string format_duration(double seconds);  // "0:13", "1:02:03"

}  // namespace fraglab
