// Rendering a `fraglab check` outcome (src/report/check_report.cpp): the table for people, JSON
// and JUnit XML for CI systems.
#pragma once

#include <string>

#include "fraglab/check.hpp"

namespace fraglab {

// The readable table: per run, every gated metric and every changed one, then a verdict line.
std::string check_table(const CheckOutcome& outcome);

// The outcome for machines (check_report.cpp), both deterministic (no timestamps, fixed key order):
// JSON {"passed", "regressions", "trace_changed", "baseline_trace", "trace", "problems", "notes",
// "warnings", "checks": [{"policy", "metric", "baseline", "value", "limit", "gated", "pass",
// "violated"}]}; JUnit XML with one <testcase classname=POLICY name=METRIC> per check, a <failure>
// for each regression, and one failing testcase per problem (classname "fraglab check").
std::string check_json(const CheckOutcome& outcome);
std::string check_junit(const CheckOutcome& outcome);

}  // namespace fraglab
