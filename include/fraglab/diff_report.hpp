// Rendering a TraceDiff (src/report/diff_report.cpp): text for people, JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fraglab/diff.hpp"

namespace fraglab {

// The report: overall, per step / phase, per tag, and the divergence, as text or JSON.
std::string diff_report(const Trace& a, const Trace& b, const TraceDiff& diff);
nlohmann::json diff_json(const Trace& a, const Trace& b, const TraceDiff& diff);

}  // namespace fraglab
