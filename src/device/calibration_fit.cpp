// fit_call, median: see fraglab/calibration.hpp.
#include <algorithm>

#include "fraglab/calibration.hpp"

namespace fraglab {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

void fit_call(CallFit& call) {
  const auto n = static_cast<double>(call.medians.size());
  call.fixed_us = 0;
  call.per_gib_us = 0;
  if (call.medians.empty()) return;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CallSample& s : call.medians) {
    const double x = static_cast<double>(s.bytes) / static_cast<double>(GiB);
    sx += x;
    sy += s.median_us;
    sxx += x * x;
    sxy += x * s.median_us;
  }
  const double denominator = n * sxx - sx * sx;
  double slope = denominator > 0 ? (n * sxy - sx * sy) / denominator : 0;
  double intercept = (sy - slope * sx) / n;
  if (slope < 0) {  // no growth with size: a constant, the mean
    slope = 0;
    intercept = sy / n;
  } else if (intercept < 0) {  // through the origin
    intercept = 0;
    slope = sxx > 0 ? sxy / sxx : 0;
  }
  call.fixed_us = std::max(0.0, intercept);
  call.per_gib_us = std::max(0.0, slope);
}

}  // namespace fraglab
