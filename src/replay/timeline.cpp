#include "fraglab/timeline.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fraglab {

namespace {
// Policy specs contain commas ("pytorch:a:1,b:2"): quote them for CSV.
std::string csv_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}
}  // namespace

TimelineWriter::TimelineWriter(std::ostream& out, const std::string& policy, std::uint64_t every, bool anatomy)
    : out_(out), policy_(csv_quote(policy)), every_(std::max<std::uint64_t>(every, 1)), anatomy_(anatomy) {}

void TimelineWriter::write_header(std::ostream& out, bool anatomy) {
  out << "policy,event,op,requested_bytes,allocated_bytes,reserved_bytes,step,device_time_s,stall_time_s";
  if (anatomy) {
    out << ",rounding_bytes,cached_free_usable_bytes,stream_bound_bytes,oversize_locked_bytes,small_pool_bytes,"
           "other_bytes,host_resident_bytes";
  }
  out << '\n';
}

void TimelineWriter::on_initial_block(const InitialAllocation& /*allocation*/, const Block& block) {
  counters_.on_initial_block(block);
}

void TimelineWriter::on_start(const Trace& trace, const Policy& policy) {
  trace_ = &trace;
  policy_obj_ = &policy;
  auto it = std::find(trace.strings.begin(), trace.strings.end(), "step");
  step_label_ = it == trace.strings.end() ? kNoString : static_cast<std::uint32_t>(it - trace.strings.begin());
}

void TimelineWriter::on_event(const ReplayPoint& point) {
  const Event& e = *point.event;
  if (e.op == Op::Mark && e.id == step_label_) {
    step_ = trace_->string_at(static_cast<std::uint32_t>(e.size));
    if (step_.size() >= 2 && step_.front() == '"') step_ = step_.substr(1, step_.size() - 2);
  }
  counters_.on_event(point);
  const bool reserved_changed = point.reserved != last_reserved_;
  last_reserved_ = point.reserved;
  if (point.event_index % every_ != 0 && !reserved_changed) return;
  // Times as the results files write doubles (shortest round trip), cumulative from the start.
  const DeviceTime time = point.device_time != nullptr ? *point.device_time : DeviceTime{};
  fmt::format_to(std::back_inserter(buffer_), "{},{},{},{},{},{},{},{},{}", policy_, point.event_index, op_name(e.op),
                 point.requested, point.allocated, point.reserved, step_, time.device_us / 1e6, time.stall_us / 1e6);
  if (anatomy_) {
    const Anatomy a =
        anatomy_of(*policy_obj_, AnatomyInput{static_cast<std::int64_t>(point.event_index), point.reserved,
                                              point.requested, point.held, counters_.stream()});
    fmt::format_to(std::back_inserter(buffer_), ",{},{},{},{},{},{},{}", a.rounding, a.cached_free_usable,
                   a.stream_bound, a.oversize_locked, a.small_pool, a.other, a.host_resident);
  }
  buffer_ += '\n';
  // Write as we go: a long replay that is interrupted keeps what it measured.
  if (buffer_.size() > (1u << 16)) {
    out_ << buffer_;
    buffer_.clear();
  }
}

void TimelineWriter::on_finish() {
  out_ << buffer_;
  buffer_.clear();
  out_.flush();
}

}  // namespace fraglab
