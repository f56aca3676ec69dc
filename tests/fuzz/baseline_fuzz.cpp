// The baseline of `fraglab check --baseline FILE` (a results JSON) as the check reads it:
// check_results (src/sweep/check.cpp) with the baseline on either side, after the parse and the
// "runs" test the command does first (src/cli/cmd_check.cpp read_json).
// Properties:
//  - bad input is an InputError, never anything else (nlohmann's type errors included);
//  - a baseline compared with itself has no regression when its runs name distinct policies.
#include <set>

#include <nlohmann/json.hpp>

#include "fraglab/check.hpp"
#include "fuzz_support.hpp"

namespace fraglab::fuzz {

namespace {

// A results JSON as fraglab replay --json writes it: one run, every checked metric.
const nlohmann::json& current_results() {
  static const nlohmann::json j = nlohmann::json::parse(R"({
    "trace": {"name": "t", "events": 10, "request_hash": "0123456789abcdef"},
    "device": {"kind": "sim", "capacity_bytes": 85899345920, "external_bytes": 0, "capacity_source": "default"},
    "start_state": "cold",
    "runs": [{"policy": "pytorch", "peak_reserved": 2097152, "peak_allocated": 1048576, "peak_requested": 1000000,
              "fragmentation_at_peak": 0.5, "peak_utilization": 0.5, "num_alloc_retries": 0, "num_ooms": 0,
              "num_device_alloc": 1, "num_device_free": 0, "device_calls": 1}]})");
  return j;
}

bool distinct_policies(const nlohmann::json& doc) {
  std::set<std::string> seen;
  for (const auto& run : doc["runs"]) {
    if (!run.is_object()) return false;
    const auto it = run.find("policy");
    if (it == run.end() || !it->is_string() || !seen.insert(it->get<std::string>()).second) return false;
  }
  return true;
}

}  // namespace

void fuzz_one(std::string_view data) {
  nlohmann::json baseline;
  try {
    baseline = nlohmann::json::parse(data);
  } catch (const nlohmann::json::exception&) {
    return;  // the command says "not valid JSON" (parse errors, and numbers beyond a double: 1e400)
  }
  if (!baseline.is_object() || !baseline.contains("runs") || !baseline["runs"].is_array()) return;
  Thresholds thresholds;
  const CheckOutcome self = check_results(baseline, baseline, thresholds);
  if (distinct_policies(baseline) && self.regressions() != 0)
    fail("a baseline compared with itself regressed: " + baseline.dump());
  (void)check_results(baseline, current_results(), thresholds);
  (void)check_results(current_results(), baseline, thresholds, CheckOptions{.allow_trace_change = true});
}

}  // namespace fraglab::fuzz
