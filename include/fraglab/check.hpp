// The CI gate (`fraglab check`): compares replay results with a stored baseline, both in the
// results-JSON format of `fraglab replay --json` (README "Metrics"), metric by metric
// against thresholds, and says what regressed and by how much.
//
// Invariants:
//  - runs are matched by their policy spec; a run missing on either side is a failure (a gate
//    that silently checks less than it did is no gate);
//  - without thresholds for a metric the defaults apply: any rise of peak_reserved_bytes,
//    num_alloc_retries or num_ooms fails (the replay is deterministic, so there is no noise to
//    allow for); a threshold given for a metric replaces its default;
//  - the trace is part of what is checked: when both sides record the trace's identity
//    (trace_identity.hpp) and the request hash or event count differs, the check fails (a CI job
//    whose trace silently changed must not go green) unless CheckOptions::allow_trace_change.
//    A side without an identity (written before fraglab recorded one) gives a warning instead.
#pragma once

#include <optional>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/trace_identity.hpp"

namespace fraglab {

struct CheckedMetric {
  std::string key;     // the results-JSON run key
  bool bytes = false;  // shown and parsed as a byte size
  bool higher_is_better = false;
};
// Every run metric check knows, in table order.
const std::vector<CheckedMetric>& checked_metrics();
// "peak_reserved" -> "peak_reserved_bytes"; throws InputError listing the known names.
std::string canonical_metric(std::string_view name);

struct Limit {
  enum class Kind { RegressBy, RegressByPercent, AtMost };
  Kind kind = Kind::RegressBy;
  double value = 0;
  std::string text;  // for the table: "+2%", "+1.00 GiB", "<= 0"
};

class Thresholds {
 public:
  Thresholds();  // the defaults (see the top of this file)
  // "METRIC=2%" (relative to the baseline), "METRIC=1GiB" / "METRIC=0.01" (absolute): the most the
  // metric may get worse. Throws InputError naming the argument.
  void add_max_regress(std::string_view text);
  // "METRIC=VALUE": a ceiling on the current value, whatever the baseline.
  void add_max(std::string_view text);
  // The metric is reported but not gated.
  void ignore(std::string_view metric);
  const std::vector<Limit>* limits(const std::string& metric) const;

 private:
  void add(const std::string& metric, Limit limit);
  std::map<std::string, std::vector<Limit>> limits_;
  std::set<std::string> user_set_;  // metrics whose defaults the user replaced
};

struct MetricCheck {
  std::string policy;
  std::string metric;
  double baseline = 0;
  double current = 0;
  std::string limits;  // joined Limit::text, "-" when not gated
  bool gated = false;
  bool regressed = false;
  std::string violated;  // the first limit broken
};

struct CheckOptions {
  bool allow_trace_change = false;  // a changed trace identity is a note, not a failure
};

struct CheckOutcome {
  std::vector<MetricCheck> checks;
  std::vector<std::string> problems;  // the trace changed, runs missing on one side, malformed results
  std::vector<std::string> notes;     // e.g. the device differs from the baseline's
  std::vector<std::string> warnings;  // e.g. the baseline has no trace identity (for stderr)
  // Each side's trace as its results JSON records it; request_hash empty when not recorded.
  std::optional<TraceIdentity> baseline_trace;
  std::optional<TraceIdentity> current_trace;
  bool trace_changed = false;  // both sides have an identity and they differ
  std::size_t regressions() const;
  bool passed() const { return problems.empty() && regressions() == 0; }
};

// The largest byte count or count a results JSON may hold: what a signed 64-bit integer holds
// (fraglab writes unsigned counts far below it; a larger one is corrupt, and past 2^64 a double cast
// to an integer is undefined).
inline constexpr std::uint64_t kMaxResultCount = (std::uint64_t{1} << 63) - 1;

// Checks the numbers of a results JSON (a baseline or --results) before they are compared: every
// run's gated metrics, the device's capacity_bytes / external_bytes and the trace's events must be
// integers 0..kMaxResultCount (byte counts and counts) or numbers 0..1 (fractions). Throws
// InputError "ORIGIN: runs[I] (policy 'P'): 'KEY' = VALUE: expected ..." on the first one that
// is not. `origin` names the file.
void check_results_numbers(const nlohmann::json& doc, std::string_view origin);

// Throws InputError unless `doc` has the shape the check reads: an object with a "runs" list of
// objects, each "policy" (when present) a string. `what` ("baseline", "results") names the
// document; the caller names the file.
void require_results_shape(const nlohmann::json& doc, std::string_view what);

// Throws InputError when either document lacks that shape (require_results_shape).
CheckOutcome check_results(const nlohmann::json& baseline, const nlohmann::json& current, const Thresholds& thresholds,
                           const CheckOptions& options = {});
// The metric's definition; nullptr for a key that is not gated.
const CheckedMetric* find_checked_metric(std::string_view key);
// A baseline or current value as the table and the limits show it: bytes in binary units, counts
// as integers, ratios with four decimals.
std::string show_metric_value(double value, bool bytes);

}  // namespace fraglab
