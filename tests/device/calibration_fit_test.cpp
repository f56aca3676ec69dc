// fit_call and median (fraglab/calibration.hpp), on figures worked out by hand.
#include <gtest/gtest.h>

#include "fraglab/calibration.hpp"

namespace fraglab {
namespace {

CallFit fitted(std::vector<CallSample> medians) {
  CallFit call;
  call.medians = std::move(medians);
  fit_call(call);
  return call;
}

TEST(CalibrationFit, ALineThroughTwoPoints) {
  // 3 us at 1 GiB, 5 us at 2 GiB: 1 us + 2 us per GiB.
  const CallFit c = fitted({{GiB, 3.0}, {2 * GiB, 5.0}});
  EXPECT_DOUBLE_EQ(c.fixed_us, 1.0);
  EXPECT_DOUBLE_EQ(c.per_gib_us, 2.0);
}

TEST(CalibrationFit, LeastSquaresOverThreePoints) {
  // x = 0, 1, 2 GiB; y = 1, 2, 6: mean x 1, mean y 3; slope = Σ(dx dy) / Σ dx² = (2 + 0 + 3) / 2 = 2.5,
  // intercept = 3 - 2.5 = 0.5.
  const CallFit c = fitted({{0, 1.0}, {GiB, 2.0}, {2 * GiB, 6.0}});
  EXPECT_DOUBLE_EQ(c.fixed_us, 0.5);
  EXPECT_DOUBLE_EQ(c.per_gib_us, 2.5);
}

TEST(CalibrationFit, ANegativeSlopeBecomesTheMean) {
  const CallFit c = fitted({{GiB, 5.0}, {2 * GiB, 3.0}});
  EXPECT_DOUBLE_EQ(c.per_gib_us, 0.0);
  EXPECT_DOUBLE_EQ(c.fixed_us, 4.0);
}

TEST(CalibrationFit, ANegativeInterceptGoesThroughTheOrigin) {
  // 1 us at 1 GiB, 4 us at 2 GiB: the line is -2 + 3x; through 0: Σxy / Σx² = (1 + 8) / (1 + 4) = 1.8.
  const CallFit c = fitted({{GiB, 1.0}, {2 * GiB, 4.0}});
  EXPECT_DOUBLE_EQ(c.fixed_us, 0.0);
  EXPECT_DOUBLE_EQ(c.per_gib_us, 1.8);
}

TEST(CalibrationFit, OneSizeIsAConstant) {
  const CallFit c = fitted({{2 * MiB, 7.0}});
  EXPECT_DOUBLE_EQ(c.fixed_us, 7.0);
  EXPECT_DOUBLE_EQ(c.per_gib_us, 0.0);
}

TEST(CalibrationFit, Medians) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
}

}  // namespace
}  // namespace fraglab
