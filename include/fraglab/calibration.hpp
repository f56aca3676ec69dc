// Calibration: the cost model's figures measured on a GPU (`fraglab calibrate`). For each call the
// cost model names, the median time of K calls at each size from 2 MiB to 1 GiB, and the straight
// line fixed_us + per_gib_us * bytes / 2^30 fitted to those medians (least squares, neither
// coefficient below 0). The cost-model file it becomes is written by the report layer
// (cost_model_file.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fraglab/types.hpp"

namespace fraglab {

struct CallSample {
  Bytes bytes = 0;
  double median_us = 0;
};

struct CallFit {
  std::string name;  // the cost model's name: "cudaMalloc", "cuMemMap", ...
  double fixed_us = 0;
  double per_gib_us = 0;
  std::uint64_t samples = 0;  // calls timed
  std::vector<CallSample> medians;
};

struct Calibration {
  std::string gpu;     // the device's name
  std::string driver;  // "13.0"
  std::string source;  // how the figures were obtained
  std::vector<CallFit> calls;
};

// Least squares of y = fixed + per_gib * bytes / 2^30 over the medians; a negative coefficient is
// clamped at 0 and the other refitted alone (a time cannot fall with size nor start below zero).
void fit_call(CallFit& call);

// The median of `values` (the mean of the two middle ones for an even count); 0 when empty.
double median(std::vector<double> values);

}  // namespace fraglab
