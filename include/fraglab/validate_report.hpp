// Rendering a fidelity validation (src/report/validate_report.cpp): JSON for scripts, text for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fraglab/validate.hpp"

namespace fraglab {

nlohmann::json validation_json(const ValidationReport& report);
std::string validation_text(const ValidationReport& report);

}  // namespace fraglab
