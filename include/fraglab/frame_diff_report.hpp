// Rendering `diff --by-frame` (src/report/frame_diff_report.cpp): text and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fraglab/frame_diff.hpp"

namespace fraglab {

std::string frame_diff_report(const FrameDiff& diff);
nlohmann::json frame_diff_json(const FrameDiff& diff);

}  // namespace fraglab
