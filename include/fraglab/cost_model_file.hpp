// The cost-model file `fraglab calibrate` writes and `--cost-model FILE.json` reads:
// {"fraglab_cost_model": 1, "gpu": ..., "driver": ..., "source": ...,
//  "calls": {"cudaMalloc": {"fixed_us": .., "per_gib_us": .., "samples": N}, ...}}.
// One call of an API moving B bytes takes fixed_us + per_gib_us * B / 2^30 microseconds.
#pragma once

#include <string>

#include "fraglab/calibration.hpp"

namespace fraglab {

// The file's text (JSON, two-space indent, a newline at the end), calls in the order measured.
std::string cost_model_file_text(const Calibration& calibration);

}  // namespace fraglab
