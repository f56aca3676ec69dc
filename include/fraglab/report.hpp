// Renderers for replay results: the stable results JSON (README "Metrics") and a text table.
// Output is deterministic: wall-clock figures are included only when asked for.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/replay.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

struct DeviceDescription {
  std::string kind;
  Bytes capacity = 0;
  Bytes external = 0;
  // Where the capacity came from: "--device", "recorded oom" (reserved + device_free at the
  // trace's recorded oom) or "default" (80 GiB assumed). Empty: not known (left out of the JSON).
  std::string capacity_source;
};

struct ReportOptions {
  bool include_timing = false;  // replay seconds and events/s (not deterministic)
  bool include_stats = false;   // the policy's detailed statistics
};

// {"trace": {...}, "device": {...}, "runs": [...]} with the stable keys of README "Metrics".
nlohmann::json results_json(const Trace& trace, const TraceSummary& summary, const DeviceDescription& device,
                            const std::vector<ReplayResult>& runs, const ReportOptions& options = {});
// The same for a trace whose events are not held (streamed, fraglab/trace_stream.hpp): `trace` is
// its header, and `request_hash` what request_hash() gives for the whole trace (RequestHasher).
nlohmann::json results_json(const Trace& trace, const TraceSummary& summary, std::string_view request_hash,
                            const DeviceDescription& device, const std::vector<ReplayResult>& runs,
                            const ReportOptions& options = {});
nlohmann::json run_json(const ReplayResult& run, const ReportOptions& options = {});
// The "device" object of the results JSON: kind, capacity_bytes, external_bytes, capacity_source.
nlohmann::json device_json(const DeviceDescription& device);

// A fixed-width table, one row per run, for a terminal.
std::string results_table(const TraceSummary& summary, const std::vector<ReplayResult>& runs,
                          const ReportOptions& options = {});

// `fraglab compare`: runs ordered for comparison — runs that served every request first, then by
// peak reserved (then by spec, so the order is deterministic).
std::vector<ReplayResult> order_for_comparison(std::vector<ReplayResult> runs);
// peak_reserved / lower_bound - 1 (0 when the bound is 0).
double overhead_over(Bytes peak_reserved, Bytes lower_bound);
// One row per run plus the lower bound (peak requested bytes) as its own row.
std::string compare_table(const TraceSummary& summary, const std::vector<ReplayResult>& runs,
                          const ReportOptions& options = {});
// `compare --anatomy`: a title line saying how the parts add up, then one row per run with its
// anatomy at the peak (README "Fragmentation anatomy"); runs without one are left out. A
// host_resident column (and the title's "+ host_resident") only when some run has any.
std::string anatomy_table(const std::vector<ReplayResult>& runs);
// results_json plus "lower_bound_bytes" and, per run, "overhead_over_lower_bound".
nlohmann::json compare_json(const Trace& trace, const TraceSummary& summary, const DeviceDescription& device,
                            const std::vector<ReplayResult>& runs, const ReportOptions& options = {});

// A run's name in tables: its spec, with " (recorded settings)" on the run of the trace's own
// allocator settings.
std::string row_name(const ReplayResult& run);

}  // namespace fraglab
