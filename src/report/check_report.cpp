// Rendering a check outcome: the readable table (`fraglab check`), and `--json FILE` and
// `--junit FILE` for CI systems. All are deterministic (no timestamps, no durations, fixed order),
// so the files can be diffed and cached.
//
// JUnit: one <testcase classname=POLICY name=METRIC> per metric of every run, a <failure> for each
// regression, and one failing <testcase classname="fraglab check"> per problem (a changed trace,
// a run missing on one side): a report that lists only metrics would show green for those.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "fraglab/check.hpp"
#include "fraglab/check_report.hpp"

namespace fraglab {
namespace {

std::string show_change(double baseline, double current, bool bytes) {
  const double delta = current - baseline;
  std::string out = fmt::format(
      "{}{}", delta < 0 ? "-" : "+",
      bytes ? format_bytes(static_cast<Bytes>(std::fabs(delta))) : show_metric_value(std::fabs(delta), false));
  if (baseline != 0) out += fmt::format(" ({:+.2f}%)", delta / std::fabs(baseline) * 100);
  return out;
}

bool is_ratio(const std::string& metric) { return metric == "fragmentation_at_peak" || metric == "peak_utilization"; }

// Counts and byte sizes as JSON integers, ratios as JSON numbers with a fraction.
nlohmann::ordered_json number(const std::string& metric, double value) {
  if (!is_ratio(metric) && value >= 0 && value == std::floor(value) && value < 1.8e19) {
    return static_cast<std::uint64_t>(value);
  }
  return value;
}

nlohmann::ordered_json identity_json(const std::optional<TraceIdentity>& id) {
  if (!id) return nullptr;
  nlohmann::ordered_json j;
  j["name"] = id->name;
  j["events"] = id->events;
  j["request_hash"] =
      id->request_hash.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(id->request_hash);
  return j;
}

// Attribute-safe text: the five XML entities, and control characters XML 1.0 cannot carry
// replaced by '?' (tab, newline and carriage return are kept as character references).
std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += c < 0x20 || c == 0x7f ? '?' : ch;
    }
  }
  return out;
}

std::string show(const std::string& metric, double value) {
  for (const CheckedMetric& m : checked_metrics()) {
    if (m.key == metric && m.bytes) return format_bytes(static_cast<Bytes>(value));
  }
  if (!is_ratio(metric)) return fmt::format("{}", static_cast<std::int64_t>(value));
  return fmt::format("{:.4f}", value);
}

}  // namespace

std::string check_table(const CheckOutcome& outcome) {
  std::string out;
  for (const std::string& note : outcome.notes) out += "note: " + note + '\n';
  std::string policy;
  for (const MetricCheck& c : outcome.checks) {
    if (!c.gated && c.baseline == c.current) continue;  // keep the table to what matters
    if (c.policy != policy) {
      policy = c.policy;
      out += fmt::format("\n{}\n  {:<24} {:>14} {:>14} {:>26} {:>14}  {}\n", policy, "metric", "baseline", "current",
                         "change", "limit", "status");
    }
    const bool bytes = find_checked_metric(c.metric)->bytes;
    const std::string status = c.regressed ? "REGRESSED" : (!c.gated ? "changed (not gated)" : "ok");
    out += fmt::format("  {:<24} {:>14} {:>14} {:>26} {:>14}  {}\n", c.metric, show_metric_value(c.baseline, bytes),
                       show_metric_value(c.current, bytes),
                       c.baseline == c.current ? "=" : show_change(c.baseline, c.current, bytes), c.limits, status);
  }
  out += '\n';
  for (const std::string& p : outcome.problems) out += "error: " + p + '\n';
  if (outcome.passed()) {
    std::size_t gated = 0;
    for (const MetricCheck& c : outcome.checks) gated += c.gated ? 1 : 0;
    out += fmt::format("ok: {} gated metric{} within limits\n", gated, gated == 1 ? "" : "s");
    return out;
  }
  out += fmt::format("FAIL: {} regression{}", outcome.regressions(), outcome.regressions() == 1 ? "" : "s");
  if (!outcome.problems.empty())
    out += fmt::format(", {} problem{}", outcome.problems.size(), outcome.problems.size() == 1 ? "" : "s");
  out += '\n';
  for (const MetricCheck& c : outcome.checks) {
    if (!c.regressed) continue;
    const bool bytes = find_checked_metric(c.metric)->bytes;
    out += fmt::format("  {} {}: {} -> {}: {}, limit {}\n", c.policy, c.metric, show_metric_value(c.baseline, bytes),
                       show_metric_value(c.current, bytes), show_change(c.baseline, c.current, bytes), c.violated);
  }
  return out;
}

std::string check_json(const CheckOutcome& outcome) {
  nlohmann::ordered_json j;
  j["passed"] = outcome.passed();
  j["regressions"] = outcome.regressions();
  j["trace_changed"] = outcome.trace_changed;
  j["baseline_trace"] = identity_json(outcome.baseline_trace);
  j["trace"] = identity_json(outcome.current_trace);
  j["problems"] = outcome.problems;
  j["notes"] = outcome.notes;
  j["warnings"] = outcome.warnings;
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const MetricCheck& c : outcome.checks) {
    nlohmann::ordered_json e;
    e["policy"] = c.policy;
    e["metric"] = c.metric;
    e["baseline"] = number(c.metric, c.baseline);
    e["value"] = number(c.metric, c.current);
    e["limit"] = c.gated ? nlohmann::ordered_json(c.limits) : nlohmann::ordered_json(nullptr);
    e["gated"] = c.gated;
    e["pass"] = !c.regressed;
    e["violated"] = c.regressed ? nlohmann::ordered_json(c.violated) : nlohmann::ordered_json(nullptr);
    checks.push_back(std::move(e));
  }
  j["checks"] = std::move(checks);
  return j.dump(2) + '\n';
}

std::string check_junit(const CheckOutcome& outcome) {
  const std::size_t tests = outcome.checks.size() + outcome.problems.size();
  const std::size_t failures = outcome.regressions() + outcome.problems.size();
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out +=
      fmt::format("<testsuites name=\"fraglab check\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", tests, failures);
  out += fmt::format("  <testsuite name=\"fraglab check\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n",
                     tests, failures);
  for (std::size_t i = 0; i < outcome.problems.size(); ++i) {
    const std::string name =
        outcome.problems[i].starts_with("the trace changed") ? "trace" : fmt::format("problem {}", i + 1);
    out += fmt::format("    <testcase classname=\"fraglab check\" name=\"{}\">\n", xml_escape(name));
    out += fmt::format("      <failure message=\"{}\" type=\"problem\"/>\n", xml_escape(outcome.problems[i]));
    out += "    </testcase>\n";
  }
  for (const MetricCheck& c : outcome.checks) {
    const std::string head =
        fmt::format("    <testcase classname=\"{}\" name=\"{}\"", xml_escape(c.policy), xml_escape(c.metric));
    if (!c.regressed) {
      out += head + "/>\n";
      continue;
    }
    const std::string message =
        fmt::format("{} -> {}, limit {}", show(c.metric, c.baseline), show(c.metric, c.current), c.violated);
    out += head + ">\n";
    out += fmt::format("      <failure message=\"{}\" type=\"regression\"/>\n", xml_escape(message));
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace fraglab
