// The min/max envelope of `fraglab report`'s series, against buckets worked out by hand.
#include <gtest/gtest.h>

#include "fraglab/html_report.hpp"

namespace fraglab {
namespace {

TEST(EnvelopeSeries, KeepsTheLeastAndTheMostOfEachBucketExactly) {
  // 10 events in at most 4 buckets: ceil(10 / 4) = 3 events per bucket, so buckets start at
  // events 0, 3, 6 and 9 (the last holds one event).
  EnvelopeSeries series(10, 4);
  const Bytes reserved[10] = {5, 9, 2, 4, 4, 4, 1, 8, 3, 7};
  for (std::uint64_t e = 0; e < 10; ++e) series.add(e, /*requested=*/e, /*allocated=*/10 - e, reserved[e]);
  EXPECT_EQ(series.bucket_events(), 3u);
  const auto& b = series.buckets();
  ASSERT_EQ(b.size(), 4u);
  const std::uint64_t first[4] = {0, 3, 6, 9};
  const Bytes reserved_min[4] = {2, 4, 1, 7}, reserved_max[4] = {9, 4, 8, 7};
  const Bytes requested_min[4] = {0, 3, 6, 9}, requested_max[4] = {2, 5, 8, 9};
  const Bytes allocated_min[4] = {8, 5, 2, 1}, allocated_max[4] = {10, 7, 4, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].first_event, first[i]) << i;
    EXPECT_EQ(b[i].min[2], reserved_min[i]) << i;
    EXPECT_EQ(b[i].max[2], reserved_max[i]) << i;
    EXPECT_EQ(b[i].min[0], requested_min[i]) << i;
    EXPECT_EQ(b[i].max[0], requested_max[i]) << i;
    EXPECT_EQ(b[i].min[1], allocated_min[i]) << i;
    EXPECT_EQ(b[i].max[1], allocated_max[i]) << i;
  }
}

TEST(EnvelopeSeries, AMillionEventsMakeAThousandBucketsAndKeepTheSinglePeak) {
  // 10^6 events in 1000 buckets of 1000; one event (123456) reaches 2^40, every other one 1.
  EnvelopeSeries series(1'000'000, 1000);
  for (std::uint64_t e = 0; e < 1'000'000; ++e) series.add(e, 1, 1, e == 123456 ? Bytes{1} << 40 : 1);
  ASSERT_EQ(series.buckets().size(), 1000u);
  EXPECT_EQ(series.bucket_events(), 1000u);
  for (std::size_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(series.buckets()[i].max[2], i == 123 ? Bytes{1} << 40 : 1) << i;
    EXPECT_EQ(series.buckets()[i].min[2], 1u) << i;
  }
}

TEST(EnvelopeSeries, FewerEventsThanBucketsKeepsEveryEvent) {
  EnvelopeSeries series(3, 1000);
  series.add(0, 1, 2, 3);
  series.add(1, 4, 5, 6);
  series.add(2, 0, 0, 6);
  EXPECT_EQ(series.bucket_events(), 1u);
  ASSERT_EQ(series.buckets().size(), 3u);
  EXPECT_EQ(series.buckets()[1].min[0], 4u);
  EXPECT_EQ(series.buckets()[1].max[2], 6u);
  EXPECT_EQ(series.buckets()[2].max[0], 0u);
}

}  // namespace
}  // namespace fraglab
