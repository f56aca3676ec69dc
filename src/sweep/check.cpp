// Baseline comparison for `fraglab check`: thresholds and the per-metric verdicts (the report
// layer renders them: src/report/check_report.cpp).
#include "fraglab/check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "fraglab/sim_device.hpp"
#include "fraglab/types.hpp"

namespace fraglab {
namespace {

// "METRIC=VALUE" -> metric key and value text.
std::pair<std::string, std::string> split_assignment(std::string_view text, std::string_view flag) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    throw InputError(fmt::format("{} '{}': expected METRIC=VALUE (e.g. {} peak_reserved=2%)", flag, text, flag));
  }
  return {canonical_metric(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

double parse_amount(const std::string& metric, const std::string& value, std::string_view flag) {
  const CheckedMetric* m = find_checked_metric(metric);
  if (m->bytes) return static_cast<double>(parse_byte_size(value, fmt::format("{} {}", flag, metric)));
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end != value.c_str() + value.size() || !std::isfinite(v) || v < 0) {
    throw InputError(
        fmt::format("{} {}={}: expected a non-negative number (or N% for a relative limit)", flag, metric, value));
  }
  return v;
}

// How much worse `current` is than `baseline` (negative: better).
double worsening(const CheckedMetric& m, double baseline, double current) {
  return m.higher_is_better ? baseline - current : current - baseline;
}

bool breaks(const Limit& limit, const CheckedMetric& m, double baseline, double current) {
  const double worse = worsening(m, baseline, current);
  switch (limit.kind) {
    case Limit::Kind::RegressBy:
      return worse > limit.value;
    case Limit::Kind::RegressByPercent:
      return worse > std::fabs(baseline) * limit.value / 100.0;
    case Limit::Kind::AtMost:
      return current > limit.value;
  }
  return false;
}

// The trace a results JSON was made from, as far as it says ("trace": name, events, request_hash).
std::optional<TraceIdentity> trace_of(const nlohmann::json& doc) {
  if (!doc.contains("trace") || !doc["trace"].is_object()) return std::nullopt;
  const auto& t = doc["trace"];
  TraceIdentity id;
  id.name = t.contains("name") && t["name"].is_string() ? t["name"].get<std::string>() : "?";
  if (t.contains("events") && t["events"].is_number_integer() && t["events"] >= 0) {
    id.events = t["events"].get<std::uint64_t>();
  }
  if (t.contains("request_hash") && t["request_hash"].is_string())
    id.request_hash = t["request_hash"].get<std::string>();
  return id;
}

void compare_traces(const nlohmann::json& baseline, const nlohmann::json& current, const CheckOptions& options,
                    CheckOutcome& out) {
  out.baseline_trace = trace_of(baseline);
  out.current_trace = trace_of(current);
  const TraceIdentity none{"?", 0, ""};
  const TraceIdentity& b = out.baseline_trace ? *out.baseline_trace : none;
  const TraceIdentity& c = out.current_trace ? *out.current_trace : none;
  if (b.request_hash.empty() || c.request_hash.empty()) {
    if (b.request_hash.empty()) {
      out.warnings.emplace_back(
          "the baseline has no trace identity (recorded before fraglab kept one), so a changed trace cannot be "
          "detected; refresh it with: fraglab check TRACE --baseline FILE --update-baseline");
    }
    if (c.request_hash.empty()) {
      out.warnings.emplace_back(
          "the results have no trace identity (written before fraglab kept one), so the trace "
          "cannot be compared with the baseline's; rewrite them with fraglab replay --json");
    }
    // What can still be compared: name and event count.
    if (b.name != c.name || b.events != c.events) {
      out.notes.push_back(
          fmt::format("trace: baseline {} ({} events), now {} ({} events)", b.name, b.events, c.name, c.events));
    }
    return;
  }
  if (b.request_hash != c.request_hash || b.events != c.events) {
    out.trace_changed = true;
    const std::string what = fmt::format("the trace changed: baseline {}, now {}", describe(b), describe(c));
    if (options.allow_trace_change) {
      out.notes.push_back(what + " (allowed by --allow-trace-change)");
    } else {
      out.problems.push_back(what +
                             "; if the new trace is intended, refresh the baseline (fraglab check TRACE "
                             "--baseline FILE --update-baseline) or pass --allow-trace-change");
    }
  } else if (b.name != c.name) {
    out.notes.push_back(
        fmt::format("trace: baseline named {}, now {} (same requests, {})", b.name, c.name, c.request_hash));
  }
}

// The gated metrics that are fractions (0..1); the others are byte counts or counts.
bool is_fraction(std::string_view key) { return key == "fragmentation_at_peak" || key == "peak_utilization"; }

// Why `v` is no count 0..kMaxResultCount (an integer; JSON floats only when integral and exact),
// or nullopt when it is one.
std::optional<std::string> not_a_count(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() <= kMaxResultCount) return std::nullopt;
    return std::string("out of range");
  }
  if (v.is_number_integer()) return std::string(v.get<std::int64_t>() < 0 ? "negative" : "out of range");
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0) return std::string(d < 0 ? "negative" : "not finite");
    if (d != std::floor(d)) return std::string("not an integer");
    // Integral doubles are exact up to 2^53; above, the JSON text was not the integer it shows.
    if (d > 9007199254740992.0) return std::string("out of range");
    return std::nullopt;
  }
  return std::string("not a number");
}

}  // namespace

void check_results_numbers(const nlohmann::json& doc, std::string_view origin) {
  const auto count_error = [&](const std::string& where, const std::string& key, const nlohmann::json& v,
                               const std::string& why, bool bytes) {
    return InputError(fmt::format("{}: {}'{}' = {}: {}; expected {} (an integer 0..2^63-1)", origin, where, key,
                                  v.dump(), why, bytes ? "a byte count" : "a count"));
  };
  if (doc.is_object() && doc.contains("device") && doc["device"].is_object()) {
    for (const char* key : {"capacity_bytes", "external_bytes"}) {
      const auto it = doc["device"].find(key);
      if (it == doc["device"].end()) continue;
      if (auto why = not_a_count(*it)) throw count_error("device: ", key, *it, *why, true);
    }
  }
  if (doc.is_object() && doc.contains("trace") && doc["trace"].is_object()) {
    const auto it = doc["trace"].find("events");
    if (it != doc["trace"].end()) {
      if (auto why = not_a_count(*it)) throw count_error("trace: ", "events", *it, *why, false);
    }
  }
  if (!doc.is_object() || !doc.contains("runs") || !doc["runs"].is_array()) return;
  std::size_t index = 0;
  for (const auto& run : doc["runs"]) {
    const std::string policy = run.is_object() && run.contains("policy") && run["policy"].is_string()
                                   ? run["policy"].get<std::string>()
                                   : std::string("?");
    const std::string where = fmt::format("runs[{}] (policy '{}'): ", index++, policy);
    if (!run.is_object()) throw InputError(fmt::format("{}: {}expected an object", origin, where));
    for (const CheckedMetric& m : checked_metrics()) {
      const auto it = run.find(m.key);
      if (it == run.end()) continue;  // check_results says which run lacks which number
      if (is_fraction(m.key)) {
        const bool ok =
            it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0 && it->get<double>() <= 1;
        if (!ok) {
          throw InputError(
              fmt::format("{}: {}'{}' = {}: expected a fraction (a number 0..1)", origin, where, m.key, it->dump()));
        }
      } else if (auto why = not_a_count(*it)) {
        throw count_error(where, m.key, *it, *why, m.bytes);
      }
    }
  }
}

const std::vector<CheckedMetric>& checked_metrics() {
  static const std::vector<CheckedMetric> metrics = {
      {"peak_reserved_bytes", true, false},
      {"peak_allocated_bytes", true, false},
      {"peak_requested_bytes", true, false},
      {"fragmentation_at_peak", false, false},
      {"peak_utilization", false, true},
      {"num_alloc_retries", false, false},
      {"num_ooms", false, false},
      {"num_device_alloc", false, false},
      {"num_device_free", false, false},
  };
  return metrics;
}

const CheckedMetric* find_checked_metric(std::string_view key) {
  for (const CheckedMetric& m : checked_metrics()) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

std::string show_metric_value(double value, bool bytes) {
  if (bytes) return format_bytes(static_cast<Bytes>(value));
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<std::int64_t>(value));
  return fmt::format("{:.4f}", value);
}

std::string canonical_metric(std::string_view name) {
  for (const CheckedMetric& m : checked_metrics()) {
    if (m.key == name || (m.bytes && m.key == std::string(name) + "_bytes")) return m.key;
  }
  std::string known;
  for (const CheckedMetric& m : checked_metrics()) known += fmt::format("{}{}", known.empty() ? "" : ", ", m.key);
  throw InputError(fmt::format("unknown metric '{}' (known: {})", name, known));
}

Thresholds::Thresholds() {
  for (const char* metric : {"peak_reserved_bytes", "num_alloc_retries", "num_ooms"}) {
    limits_[metric].push_back({Limit::Kind::RegressBy, 0, "+0"});
  }
}

void Thresholds::add(const std::string& metric, Limit limit) {
  if (user_set_.insert(metric).second) limits_[metric].clear();  // the user's limits replace the default
  limits_[metric].push_back(std::move(limit));
}

void Thresholds::add_max_regress(std::string_view text) {
  const auto [metric, value] = split_assignment(text, "--max-regress");
  if (value.back() == '%') {
    const std::string number = value.substr(0, value.size() - 1);
    char* end = nullptr;
    const double pct = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(pct) || pct < 0) {
      throw InputError(fmt::format("--max-regress {}={}: expected a non-negative percentage like 2%", metric, value));
    }
    add(metric, {Limit::Kind::RegressByPercent, pct, fmt::format("+{}%", number)});
    return;
  }
  const double amount = parse_amount(metric, value, "--max-regress");
  add(metric, {Limit::Kind::RegressBy, amount,
               fmt::format("+{}", show_metric_value(amount, find_checked_metric(metric)->bytes))});
}

void Thresholds::add_max(std::string_view text) {
  const auto [metric, value] = split_assignment(text, "--max");
  const double amount = parse_amount(metric, value, "--max");
  add(metric, {Limit::Kind::AtMost, amount,
               fmt::format("<= {}", show_metric_value(amount, find_checked_metric(metric)->bytes))});
}

void Thresholds::ignore(std::string_view metric) {
  const std::string key = canonical_metric(metric);
  user_set_.insert(key);
  limits_[key].clear();
}

const std::vector<Limit>* Thresholds::limits(const std::string& metric) const {
  auto it = limits_.find(metric);
  return it == limits_.end() || it->second.empty() ? nullptr : &it->second;
}

std::size_t CheckOutcome::regressions() const {
  std::size_t n = 0;
  for (const MetricCheck& c : checks) n += c.regressed ? 1 : 0;
  return n;
}

namespace {
// "a number", "an array", "an object", ...: a JSON value's type with its article, for messages.
std::string a_json_type(const nlohmann::json& value) {
  const std::string type = value.type_name();
  return (type.front() == 'a' || type.front() == 'o' ? "an " : "a ") + type;
}
}  // namespace

void require_results_shape(const nlohmann::json& doc, std::string_view what) {
  if (!doc.is_object() || !doc.contains("runs") || !doc["runs"].is_array()) {
    throw InputError(
        fmt::format("the {} is not a results JSON (no \"runs\" list; write one with fraglab replay "
                    "--json or check --update-baseline)",
                    what));
  }
  // Runs are read with json::value(), which throws a type_error on anything but an object.
  const auto& runs = doc["runs"];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].is_object())
      throw InputError(fmt::format("the {}'s runs[{}] is {}, expected an object", what, i, a_json_type(runs[i])));
    if (runs[i].contains("policy") && !runs[i]["policy"].is_string())
      throw InputError(
          fmt::format("the {}'s runs[{}].policy is {}, expected a string", what, i, a_json_type(runs[i]["policy"])));
  }
  // The sections the check and the command read with json::value() too.
  for (const char* section : {"device", "trace"}) {
    if (doc.contains(section) && !doc[section].is_object())
      throw InputError(
          fmt::format("the {}'s \"{}\" is {}, expected an object", what, section, a_json_type(doc[section])));
  }
  if (doc.contains("device") && doc["device"].contains("kind") && !doc["device"]["kind"].is_string())
    throw InputError(
        fmt::format("the {}'s device.kind is {}, expected a string", what, a_json_type(doc["device"]["kind"])));
}

CheckOutcome check_results(const nlohmann::json& baseline, const nlohmann::json& current, const Thresholds& thresholds,
                           const CheckOptions& options) {
  require_results_shape(baseline, "baseline");
  require_results_shape(current, "results");
  CheckOutcome out;
  auto text_at = [](const nlohmann::json& doc, const char* section, const char* key) -> std::string {
    if (!doc.contains(section) || !doc[section].contains(key)) return "?";
    const auto& v = doc[section][key];
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  compare_traces(baseline, current, options, out);
  if (text_at(baseline, "device", "capacity_bytes") != text_at(current, "device", "capacity_bytes") ||
      text_at(baseline, "device", "external_bytes") != text_at(current, "device", "external_bytes")) {
    out.notes.push_back(
        fmt::format("device: baseline capacity {} external {}, now {} external {}",
                    text_at(baseline, "device", "capacity_bytes"), text_at(baseline, "device", "external_bytes"),
                    text_at(current, "device", "capacity_bytes"), text_at(current, "device", "external_bytes")));
  }

  auto find_run = [](const nlohmann::json& doc, const std::string& policy) -> const nlohmann::json* {
    for (const auto& run : doc["runs"]) {
      if (run.contains("policy") && run["policy"] == policy) return &run;
    }
    return nullptr;
  };
  for (const auto& run : current["runs"]) {
    const std::string policy = run.value("policy", "");
    if (find_run(baseline, policy) == nullptr) {
      out.problems.push_back(fmt::format("run '{}' has no baseline (record one with --update-baseline)", policy));
    }
  }
  for (const auto& base_run : baseline["runs"]) {
    const std::string policy = base_run.value("policy", "");
    const nlohmann::json* run = find_run(current, policy);
    if (run == nullptr) {
      out.problems.push_back(fmt::format("run '{}' is in the baseline but was not replayed", policy));
      continue;
    }
    for (const CheckedMetric& m : checked_metrics()) {
      const bool in_base = base_run.contains(m.key) && base_run[m.key].is_number();
      const bool in_run = run->contains(m.key) && (*run)[m.key].is_number();
      if (!in_base || !in_run) {
        out.problems.push_back(
            fmt::format("run '{}': the {} lacks the number '{}'", policy, in_base ? "results" : "baseline", m.key));
        continue;
      }
      MetricCheck c;
      c.policy = policy;
      c.metric = m.key;
      c.baseline = base_run[m.key].get<double>();
      c.current = (*run)[m.key].get<double>();
      std::string limit_texts;
      if (const std::vector<Limit>* limits = thresholds.limits(m.key)) {
        c.gated = true;
        for (const Limit& limit : *limits) {
          limit_texts += fmt::format("{}{}", limit_texts.empty() ? "" : ", ", limit.text);
          if (!c.regressed && breaks(limit, m, c.baseline, c.current)) {
            c.regressed = true;
            c.violated = limit.text;
          }
        }
      }
      c.limits = c.gated ? std::move(limit_texts) : std::string("-");
      out.checks.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace fraglab
