// Text table of replay results, for a terminal.
#include <fmt/format.h>

#include <algorithm>

#include "fraglab/report.hpp"
#include "measured_column.hpp"

namespace fraglab {

std::string row_name(const ReplayResult& run) {
  return run.recorded_settings ? run.policy + " (recorded settings)" : run.policy;
}

std::string results_table(const TraceSummary& summary, const std::vector<ReplayResult>& runs,
                          const ReportOptions& options) {
  size_t policy_width = 6;
  for (const ReplayResult& r : runs) policy_width = std::max(policy_width, row_name(r).size());
  std::string out =
      fmt::format("{:<{}}  {:>12}  {:>12}  {:>12}  {:>8}  {:>7}  {:>7}  {:>5}  {:>9}  {:>9}  {:>10}  {:>10}", "policy",
                  policy_width, "peak_resv", "peak_alloc", "peak_req", "frag@pk", "util", "retries", "ooms",
                  "dev_alloc", "dev_free", "device_s", "stall_s");
  const bool measured = any_measured(runs);
  if (measured) out += measured_header();
  if (options.include_timing) out += fmt::format("  {:>10}", "Mevents/s");
  out += '\n';
  for (const ReplayResult& r : runs) {
    const Metrics& m = r.metrics;
    out += fmt::format(
        "{:<{}}  {:>12}  {:>12}  {:>12}  {:>8.4f}  {:>7.4f}  {:>7}  {:>5}  {:>9}  {:>9}  {:>10.6f}  {:>10.6f}",
        row_name(r), policy_width, format_bytes(m.peak_reserved), format_bytes(m.peak_allocated),
        format_bytes(m.peak_requested), m.fragmentation_at_peak, m.peak_utilization, m.num_alloc_retries, m.num_ooms,
        m.num_device_alloc, m.num_device_free, m.device_time_s, m.stall_time_s);
    if (measured) out += measured_cell(m);
    if (options.include_timing) {
      out += fmt::format("  {:>10.2f}", r.seconds > 0 ? static_cast<double>(r.events_replayed) / r.seconds / 1e6 : 0.0);
    }
    out += '\n';
  }
  out += fmt::format("lower bound (peak requested): {}\n", format_bytes(summary.peak_requested));
  return out;
}

}  // namespace fraglab
