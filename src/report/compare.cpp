// The side-by-side view of `fraglab compare`: every policy on one trace, against the lower bound
// no policy can beat (peak requested bytes: what is live at once, README "Metrics").
#include <fmt/format.h>

#include <algorithm>

#include "fraglab/report.hpp"
#include "measured_column.hpp"

namespace fraglab {

std::vector<ReplayResult> order_for_comparison(std::vector<ReplayResult> runs) {
  // A run with OOMs did not serve the whole trace, so its peak is not comparable: it goes last.
  std::stable_sort(runs.begin(), runs.end(), [](const ReplayResult& a, const ReplayResult& b) {
    const bool a_failed = a.metrics.num_ooms > 0;
    const bool b_failed = b.metrics.num_ooms > 0;
    if (a_failed != b_failed) return !a_failed;
    if (a.metrics.peak_reserved != b.metrics.peak_reserved) return a.metrics.peak_reserved < b.metrics.peak_reserved;
    return a.policy < b.policy;
  });
  return runs;
}

double overhead_over(Bytes peak_reserved, Bytes lower_bound) {
  return lower_bound == 0 ? 0.0 : static_cast<double>(peak_reserved) / static_cast<double>(lower_bound) - 1.0;
}

std::string compare_table(const TraceSummary& summary, const std::vector<ReplayResult>& runs,
                          const ReportOptions& options) {
  const std::string bound_name = "lower_bound (peak requested)";
  size_t width = bound_name.size();
  for (const ReplayResult& r : runs) width = std::max(width, row_name(r).size());
  std::string out = fmt::format("{:<{}}  {:>12}  {:>10}  {:>8}  {:>7}  {:>7}  {:>5}  {:>12}  {:>10}  {:>10}", "policy",
                                width, "peak_resv", "over_bound", "frag@pk", "util", "retries", "ooms", "device_calls",
                                "device_s", "stall_s");
  const bool measured = any_measured(runs);
  if (measured) out += measured_header();
  if (options.include_timing) out += fmt::format("  {:>9}", "time_s");
  out += '\n';
  out += fmt::format("{:<{}}  {:>12}  {:>10}\n", bound_name, width, format_bytes(summary.peak_requested), "-");
  for (const ReplayResult& r : runs) {
    const Metrics& m = r.metrics;
    out += fmt::format("{:<{}}  {:>12}  {:>+9.1f}%  {:>8.4f}  {:>7.4f}  {:>7}  {:>5}  {:>12}  {:>10.6f}  {:>10.6f}",
                       row_name(r), width, format_bytes(m.peak_reserved),
                       100.0 * overhead_over(m.peak_reserved, summary.peak_requested), m.fragmentation_at_peak,
                       m.peak_utilization, m.num_alloc_retries, m.num_ooms, m.num_device_alloc + m.num_device_free,
                       m.device_time_s, m.stall_time_s);
    if (measured) out += measured_cell(m);
    if (options.include_timing) out += fmt::format("  {:>9.3f}", r.seconds);
    out += '\n';
  }
  return out;
}

namespace {
std::string signed_bytes(std::int64_t n) {
  return n < 0 ? "-" + format_bytes(static_cast<Bytes>(-n)) : format_bytes(static_cast<Bytes>(n));
}
}  // namespace

std::string anatomy_table(const std::vector<ReplayResult>& runs) {
  size_t width = std::string_view("policy").size();
  bool any_on_host = false;  // the host_resident column only when some run keeps blocks on the host
  // (stream_bound is 12 wide: its header is)
  for (const ReplayResult& r : runs) {
    width = std::max(width, row_name(r).size());
    any_on_host = any_on_host || (r.anatomy_at_peak && r.anatomy_at_peak->host_resident > 0);
  }
  std::string out = fmt::format(
      "anatomy at the peak (README \"Fragmentation anatomy\"): reserved{} - requested = rounding + free_usable + "
      "stream_bound + oversize + small_pool + other\n",
      any_on_host ? " + host_resident" : "");
  out += fmt::format("{:<{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>12}  {:>11}  {:>11}  {:>11}", "policy", width,
                     "event", "reserved", "requested", "rounding", "free_usable", "stream_bound", "oversize",
                     "small_pool", "other");
  out += any_on_host ? fmt::format("  {:>13}\n", "host_resident") : "\n";
  for (const ReplayResult& r : runs) {
    if (!r.anatomy_at_peak) continue;
    const Anatomy& a = *r.anatomy_at_peak;
    out += fmt::format("{:<{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>12}  {:>11}  {:>11}  {:>11}", row_name(r),
                       width, a.event < 0 ? std::string("start") : std::to_string(a.event), format_bytes(a.reserved),
                       format_bytes(a.requested), format_bytes(a.rounding), format_bytes(a.cached_free_usable),
                       format_bytes(a.stream_bound), format_bytes(a.oversize_locked), format_bytes(a.small_pool),
                       signed_bytes(a.other));
    out += any_on_host ? fmt::format("  {:>13}\n", format_bytes(a.host_resident)) : "\n";
  }
  return out;
}

nlohmann::json compare_json(const Trace& trace, const TraceSummary& summary, const DeviceDescription& device,
                            const std::vector<ReplayResult>& runs, const ReportOptions& options) {
  nlohmann::json j = results_json(trace, summary, device, runs, options);
  j["lower_bound_bytes"] = summary.peak_requested;
  for (size_t i = 0; i < runs.size(); ++i) {
    j["runs"][i]["overhead_over_lower_bound"] = overhead_over(runs[i].metrics.peak_reserved, summary.peak_requested);
  }
  return j;
}

}  // namespace fraglab
