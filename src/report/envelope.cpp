// The min/max envelope of `fraglab report`'s series (fraglab/html_report.hpp): each bucket of
// consecutive events keeps the least and the most of each quantity, so a downsampled chart still
// reaches every peak exactly and shows every dip.
#include <algorithm>

#include "fraglab/html_report.hpp"

namespace fraglab {

EnvelopeSeries::EnvelopeSeries(std::uint64_t events, std::size_t max_buckets) {
  const std::uint64_t buckets = std::max<std::uint64_t>(max_buckets, 1);
  bucket_events_ = std::max<std::uint64_t>((events + buckets - 1) / buckets, 1);
  buckets_.reserve(
      static_cast<std::size_t>(std::min<std::uint64_t>(buckets, (events + bucket_events_ - 1) / bucket_events_)));
}

void EnvelopeSeries::add(std::uint64_t event, Bytes requested, Bytes allocated, Bytes reserved) {
  const Bytes values[3] = {requested, allocated, reserved};
  const std::uint64_t first = event - event % bucket_events_;
  if (buckets_.empty() || buckets_.back().first_event != first) {
    EnvelopeBucket bucket;
    bucket.first_event = first;
    std::copy(values, values + 3, bucket.min);
    std::copy(values, values + 3, bucket.max);
    buckets_.push_back(bucket);
    return;
  }
  EnvelopeBucket& bucket = buckets_.back();
  for (int k = 0; k < 3; ++k) {
    bucket.min[k] = std::min(bucket.min[k], values[k]);
    bucket.max[k] = std::max(bucket.max[k], values[k]);
  }
}

}  // namespace fraglab
