// cost_model_file_text: see fraglab/cost_model_file.hpp.
#include "fraglab/cost_model_file.hpp"

#include <nlohmann/json.hpp>

namespace fraglab {

std::string cost_model_file_text(const Calibration& calibration) {
  nlohmann::ordered_json file;
  file["fraglab_cost_model"] = 1;
  if (!calibration.gpu.empty()) file["gpu"] = calibration.gpu;
  if (!calibration.driver.empty()) file["driver"] = calibration.driver;
  if (!calibration.source.empty()) file["source"] = calibration.source;
  nlohmann::ordered_json calls = nlohmann::ordered_json::object();
  for (const CallFit& call : calibration.calls) {
    calls[call.name] = {{"fixed_us", call.fixed_us}, {"per_gib_us", call.per_gib_us}, {"samples", call.samples}};
  }
  file["calls"] = calls;
  return file.dump(2) + "\n";
}

}  // namespace fraglab
