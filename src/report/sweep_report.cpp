// The end-of-sweep summary: ranked table, Pareto front, best setting and its
// PYTORCH_CUDA_ALLOC_CONF line (ranked by src/sweep/ranking.cpp). Pure functions of the rows, so
// the text is the same whatever order the runs finished in.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "capacity_note.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/report.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab {
namespace {

// "max_split_size_mb=128 expandable_segments=True", or "defaults" when every knob is none.
std::string describe_knobs(const SweepRow& row, const std::vector<std::string>& keys) {
  std::string out;
  for (size_t k = 0; k < keys.size() && k < row.knobs.size(); ++k) {
    if (!row.knobs[k]) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", keys[k], *row.knobs[k]);
  }
  return out.empty() ? "defaults" : out;
}

// The row runs the policy's defaults on every swept option: left out, or set to the default
// value the policy registers (expandable_segments=False is the default as much as none is).
bool all_default(const SweepRow& row, const std::vector<std::string>& keys) {
  const PolicyInfo* info = PolicyRegistry::instance().find(policy_name(row.spec));
  for (size_t k = 0; k < keys.size() && k < row.knobs.size(); ++k) {
    if (!row.knobs[k]) continue;
    if (info == nullptr) return false;
    const auto option = std::find_if(info->options.begin(), info->options.end(),
                                     [&](const PolicyOption& o) { return o.name == keys[k]; });
    if (option == info->options.end() || option->default_value != *row.knobs[k]) return false;
  }
  return true;
}

// The capacity a device column's runs had without one being given (nullopt: it was given).
std::optional<Bytes> assumed_capacity(std::string_view device) {
  try {
    if (!names_capacity(device)) return parse_sim_device(device).capacity;
  } catch (const InputError&) {}
  return std::nullopt;
}

std::string signed_bytes(Bytes to, Bytes from) {
  return to >= from ? fmt::format("+{}", format_bytes(to - from)) : fmt::format("-{}", format_bytes(from - to));
}

std::string percent_change(Bytes to, Bytes from) {
  if (from == 0) return to == 0 ? "+0.0%" : "n/a";
  return fmt::format("{:+.1f}%",
                     (static_cast<double>(to) - static_cast<double>(from)) / static_cast<double>(from) * 100);
}

// `baseline` is the recorded settings' run when the trace is a recorded one, else the defaults'.
std::string best_lines(const SweepRow& best, const SweepRow* baseline, std::string_view baseline_name) {
  std::string out = fmt::format("best: {}\n  peak reserved {}", best.spec, format_bytes(best.metrics.peak_reserved));
  if (baseline != nullptr && baseline != &best && row_key(*baseline) != row_key(best)) {
    out += fmt::format(" ({} bytes, {} / {} vs {} {}; {} retries there)", best.metrics.peak_reserved,
                       signed_bytes(best.metrics.peak_reserved, baseline->metrics.peak_reserved),
                       percent_change(best.metrics.peak_reserved, baseline->metrics.peak_reserved), baseline_name,
                       format_bytes(baseline->metrics.peak_reserved), baseline->metrics.num_alloc_retries);
  } else {
    out += fmt::format(" ({} bytes)", best.metrics.peak_reserved);
  }
  out += fmt::format(", {} retries, {} device calls, fragmentation at peak {:.4f}\n", best.metrics.num_alloc_retries,
                     best.device_calls(), best.metrics.fragmentation_at_peak);
  out += fmt::format("  device time {:.6f} s, of which stall {:.6f} s (estimated, README \"Device time\")\n",
                     best.metrics.device_time_s, best.metrics.stall_time_s);
  if (const auto line = alloc_conf_line(best.spec)) {
    out += *line + (line->back() == '=' ? "   (PyTorch's defaults: leave it unset)\n" : "\n");
  }
  return out;
}

std::string trace_section(const std::vector<SweepRow>& rows, const std::vector<std::string>& keys,
                          const SweepReportOptions& options) {
  const std::vector<SweepRow> ranked = rank_rows(rows);
  const auto context_it = options.traces.find(ranked.front().trace);
  const SweepTraceContext* context = context_it == options.traces.end() ? nullptr : &context_it->second;
  // The baseline of the "vs" column. On a recorded run it is the recorded settings (what the job
  // did): a grid row of the same policy, or the extra run the sweep made of them. Otherwise the
  // defaults' row; when several rows are equivalent to it (none and the default value both
  // swept), the first in canonical order.
  const SweepRow* baseline = nullptr;
  bool recorded_baseline = false;
  if (context != nullptr && !context->recorded_spec.empty()) {
    for (const SweepRow& r : ranked) {
      if (same_policy(r.spec, context->recorded_spec) && (baseline == nullptr || canonical_less(r, *baseline))) {
        baseline = &r;
      }
    }
    if (baseline == nullptr && context->recorded_run) baseline = &*context->recorded_run;
    recorded_baseline = baseline != nullptr;
  }
  if (!recorded_baseline) {
    for (const SweepRow& r : ranked) {
      if (all_default(r, keys) && (baseline == nullptr || canonical_less(r, *baseline))) baseline = &r;
    }
  }
  std::string out = fmt::format("== {} on {}: {} settings{} ==\n", ranked.front().trace,
                                describe_device_column(ranked.front().device), ranked.size(),
                                context != nullptr && !context->start_state.empty()
                                    ? fmt::format(", start state {}", context->start_state)
                                    : std::string());
  if (recorded_baseline) {
    const bool grid_point = !context->recorded_run || baseline != &*context->recorded_run;
    out += fmt::format("recorded settings: {}{}: peak reserved {}, {} retries, {} device calls{}\n",
                       context->recorded_spec, grid_point ? " (a grid point, marked *)" : "",
                       format_bytes(baseline->metrics.peak_reserved), baseline->metrics.num_alloc_retries,
                       baseline->device_calls(), baseline->metrics.num_ooms > 0 ? ", OUT OF MEMORY" : "");
  }

  // The table, by peak reserved.
  std::vector<size_t> widths;
  for (size_t k = 0; k < keys.size(); ++k) {
    size_t w = keys[k].size();
    for (const SweepRow& r : ranked) w = std::max(w, r.knobs[k] ? r.knobs[k]->size() : 4);
    widths.push_back(w);
  }
  out += fmt::format("{:>4}", "rank");
  for (size_t k = 0; k < keys.size(); ++k) out += fmt::format("  {:<{}}", keys[k], widths[k]);
  out += fmt::format("  {:>12}  {:>8}  {:>8}  {:>7}  {:>5}  {:>9}\n", "peak_resv",
                     recorded_baseline ? "vs_rec" : "vs_dflt", "frag@pk", "retries", "ooms", "dev_calls");
  const size_t shown = options.top == 0 ? ranked.size() : std::min(options.top, ranked.size());
  for (size_t i = 0; i < shown; ++i) {
    const SweepRow& r = ranked[i];
    const bool is_baseline = recorded_baseline && baseline == &r;
    out += fmt::format("{:>4}", fmt::format("{}{}", is_baseline ? "*" : "", i + 1));
    for (size_t k = 0; k < keys.size(); ++k)
      out += fmt::format("  {:<{}}", r.knobs[k] ? *r.knobs[k] : "none", widths[k]);
    out +=
        fmt::format("  {:>12}  {:>8}  {:>8.4f}  {:>7}  {:>5}  {:>9}\n", format_bytes(r.metrics.peak_reserved),
                    baseline ? percent_change(r.metrics.peak_reserved, baseline->metrics.peak_reserved) : "-",
                    r.metrics.fragmentation_at_peak, r.metrics.num_alloc_retries, r.metrics.num_ooms, r.device_calls());
  }
  if (shown < ranked.size()) {
    out += fmt::format("  ... {} more (showing {} of {}; --top 0 shows all)\n", ranked.size() - shown, shown,
                       ranked.size());
  }

  out += identical_rows_note(rows, keys, assumed_capacity(ranked.front().device));

  // The Pareto front; settings with identical figures share one line.
  const std::vector<SweepRow> front = pareto_front(rows);
  out += "\nPareto front (lower peak reserved vs less device time; runs with OOMs left out):\n";
  if (front.empty()) out += "  (none: every setting ran out of memory)\n";
  for (size_t i = 0; i < front.size();) {
    size_t j = i + 1;
    while (j < front.size() && same_front_figures(front[i], front[j])) ++j;
    out += fmt::format("  {:>12}  {:>10.6f} s device  {:>10.6f} s stall  {:>7} retries  {:>9} device calls  {}",
                       format_bytes(front[i].metrics.peak_reserved), front[i].metrics.device_time_s,
                       front[i].metrics.stall_time_s, front[i].metrics.num_alloc_retries, front[i].device_calls(),
                       describe_knobs(front[i], keys));
    if (j - i > 1) out += fmt::format(" (+{} more with the same figures)", j - i - 1);
    out += '\n';
    i = j;
  }
  out += '\n';
  if (ranked.front().metrics.num_ooms > 0) {
    out += "best: none - every setting ran out of memory on this device (try a larger --device or other values)\n";
  } else {
    out += best_lines(ranked.front(), baseline, recorded_baseline ? "the recorded settings'" : "the defaults'");
  }
  return out;
}

// With several traces: the setting with the least peak reserved summed over every trace, among
// settings that ran on all of them without an OOM.
std::string across_traces(const std::vector<SweepRow>& rows, size_t trace_count) {
  struct Total {
    Bytes reserved = 0;
    std::uint64_t retries = 0;
    size_t traces = 0;
    bool oom = false;
    const SweepRow* first = nullptr;
  };
  std::map<std::string, Total> totals;  // by spec
  for (const SweepRow& r : rows) {
    Total& t = totals[r.spec];
    t.reserved += r.metrics.peak_reserved;
    t.retries += r.metrics.num_alloc_retries;
    t.oom |= r.metrics.num_ooms > 0;
    ++t.traces;
    if (t.first == nullptr) t.first = &r;
  }
  const std::pair<const std::string, Total>* best = nullptr;
  for (const auto& entry : totals) {
    const Total& t = entry.second;
    if (t.oom || t.traces != trace_count) continue;
    if (best == nullptr || t.reserved < best->second.reserved ||
        (t.reserved == best->second.reserved && t.retries < best->second.retries)) {
      best = &entry;
    }
  }
  std::string out = fmt::format("== across {} traces ==\n", trace_count);
  if (best == nullptr) return out + "best: none - no setting ran on every trace without an OOM\n";
  out += fmt::format("best: {}\n  peak reserved summed over the traces {} ({} bytes), {} retries\n", best->first,
                     format_bytes(best->second.reserved), best->second.reserved, best->second.retries);
  if (const auto line = alloc_conf_line(best->first)) out += *line + "\n";
  return out;
}

}  // namespace

std::string describe_device_column(std::string_view device) {
  try {
    const SimDeviceConfig config = parse_sim_device(device);
    return fmt::format("{}, capacity {}{}", device, format_bytes(config.capacity),
                       names_capacity(device) ? "" : " (default)");
  } catch (const InputError&) {
    return std::string(device);
  }
}

std::string sweep_report(const ResultsTable& table, const SweepReportOptions& options) {
  // One section per (trace, device), in canonical order.
  std::vector<SweepRow> rows = table.rows;
  std::sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) {
    if (int c = natural_compare(a.trace, b.trace)) return c < 0;
    if (int c = natural_compare(a.device, b.device)) return c < 0;
    return canonical_less(a, b);
  });
  std::string out;
  std::set<std::string> traces;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i;
    while (j < rows.size() && rows[j].trace == rows[i].trace && rows[j].device == rows[i].device) ++j;
    if (!out.empty()) out += '\n';
    out += trace_section({rows.begin() + static_cast<std::ptrdiff_t>(i), rows.begin() + static_cast<std::ptrdiff_t>(j)},
                         table.knob_keys, options);
    traces.insert(rows[i].trace + '\n' + rows[i].device);
    i = j;
  }
  if (traces.size() > 1) out += '\n' + across_traces(rows, traces.size());
  return out;
}

}  // namespace fraglab
