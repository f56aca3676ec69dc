// What `fraglab report` shows of one policy's run, gathered by observers of two replays of the
// trace (the replay is deterministic, so the second one reaches exactly the state the first one
// measured its peak at): the series, marks and retries from the first; the segments and the live
// allocations after the peak event from the second.
#include <algorithm>
#include <unordered_map>

#include "fraglab/anatomy.hpp"
#include "fraglab/frames.hpp"
#include "fraglab/html_report.hpp"
#include "fraglab/peak_allocations.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

// The index of `text` in the trace's string table, kNoString when absent.
std::uint32_t string_index(const Trace& trace, std::string_view text) {
  const auto it = std::find(trace.strings.begin(), trace.strings.end(), text);
  return it == trace.strings.end() ? kNoString : static_cast<std::uint32_t>(it - trace.strings.begin());
}

// Mark values are JSON text ("\"forward\"", "3"): strings lose their quotes.
std::string unquote(std::string_view value) {
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
  return std::string(value);
}

// The frames of a stack the page shows: the top frame (FrameFilter: the program's source line that
// asked for the memory) and its callers, PyTorch's own allocator, tensor-creation and dispatch
// frames left out, at most kShownFrames, innermost first.
constexpr std::size_t kShownFrames = 6;
std::vector<std::string> shown_frames(const Trace& trace, std::uint32_t stack) {
  std::vector<std::string> out;
  const auto frames = trace.stack_at(stack);
  if (!frames) return out;
  static const FrameFilter filter;
  const std::optional<std::uint32_t> top = filter.top_frame(trace, *frames);
  bool reached = !top;
  for (const std::uint32_t index : *frames) {
    reached = reached || index == *top;
    const Frame& frame = trace.frames.at(index);
    if (!reached || filter.ignored(frame)) continue;
    out.push_back(frame_text(frame));
    if (out.size() == kShownFrames) break;
  }
  return out;
}

// The anatomy's parts in the order the page lists them.
std::vector<AnatomyPart> anatomy_parts(const Anatomy& a) {
  return {{"rounding", static_cast<std::int64_t>(a.rounding)},
          {"cached_free_usable", static_cast<std::int64_t>(a.cached_free_usable)},
          {"stream_bound", static_cast<std::int64_t>(a.stream_bound)},
          {"oversize_locked", static_cast<std::int64_t>(a.oversize_locked)},
          {"small_pool", static_cast<std::int64_t>(a.small_pool)},
          {"other", a.other}};
}

// The first replay also samples the anatomy at evenly spaced events (one walk of the policy's
// segments each: at most kAnatomySamples of them, so the cost stays linear in the events).
constexpr std::uint64_t kAnatomySamples = 200;
class AnatomySampler : public ReplayObserver {
 public:
  AnatomySampler(AnatomyView& view, std::uint64_t events)
      : view_(view),
        events_(events),
        every_(std::max<std::uint64_t>(1, (events + kAnatomySamples - 1) / kAnatomySamples)) {}
  void on_initial_block(const InitialAllocation& /*allocation*/, const Block& block) override {
    counters_.on_initial_block(block);
  }
  void on_start(const Trace& /*trace*/, const Policy& policy) override { policy_ = &policy; }
  void on_event(const ReplayPoint& point) override {
    counters_.on_event(point);
    if ((point.event_index + 1) % every_ != 0 && point.event_index + 1 != events_) return;
    const AnatomyInput input{static_cast<std::int64_t>(point.event_index), point.reserved, point.requested, point.held,
                             counters_.stream()};
    view_.over_time.push_back({point.event_index, anatomy_parts(anatomy_of(*policy_, input))});
  }

 private:
  AnatomyView& view_;
  std::uint64_t events_;
  std::uint64_t every_;
  const Policy* policy_ = nullptr;
  AnatomyCounters counters_;
};

// The first replay: the envelope of requested / allocated / reserved, the step and phase marks,
// and the events during which the policy flushed its cache and retried.
class SeriesRecorder : public ReplayObserver {
 public:
  SeriesRecorder(PolicyReport& report, std::uint64_t events, std::size_t max_buckets) : report_(report) {
    report_.series = EnvelopeSeries(events, max_buckets);
  }
  void on_start(const Trace& trace, const Policy& policy) override {
    trace_ = &trace;
    policy_ = &policy;
    step_label_ = string_index(trace, "step");
    phase_label_ = string_index(trace, "phase");
    retries_ = policy.counters().num_alloc_retries;
  }
  void on_event(const ReplayPoint& point) override {
    report_.series.add(point.event_index, point.requested, point.allocated, point.reserved);
    const Event& e = *point.event;
    if (e.op == Op::Mark && (e.id == step_label_ || e.id == phase_label_)) {
      report_.marks.push_back({point.event_index, e.id == step_label_ ? "step" : "phase",
                               unquote(trace_->string_at(static_cast<std::uint32_t>(e.size)))});
    }
    if (e.op == Op::Alloc || e.op == Op::EmptyCache) {  // only requests can make a policy retry
      const std::uint64_t retries = policy_->counters().num_alloc_retries;
      if (retries != retries_) report_.retries.push_back(point.event_index);
      retries_ = retries;
    }
  }

 private:
  PolicyReport& report_;
  const Trace* trace_ = nullptr;
  const Policy* policy_ = nullptr;
  std::uint32_t step_label_ = kNoString;
  std::uint32_t phase_label_ = kNoString;
  std::uint64_t retries_ = 0;
};

// The second replay: follows the live allocations as the Replayer does (requested until the free
// completes) and copies them and the policy's segments once the peak event has been applied.
class PeakRecorder : public ReplayObserver {
 public:
  PeakRecorder(PolicyReport& report, std::int64_t peak_event) : report_(report), peak_event_(peak_event) {}
  void on_initial_block(const InitialAllocation& allocation, const Block& block) override {
    live_[allocation.id] = {block, kNoString, allocation.free_requested, allocation.stack};
  }
  void on_start(const Trace& trace, const Policy& policy) override {
    trace_ = &trace;
    policy_ = &policy;
    if (peak_event_ < 0) capture();
  }
  void on_event(const ReplayPoint& point) override {
    if (done_) return;
    const Event& e = *point.event;
    if (e.op == Op::Alloc && point.block != nullptr) {
      const std::uint32_t stack =
          point.event_index < trace_->event_stacks.size() ? trace_->event_stacks[point.event_index] : kNoString;
      live_[e.id] = {*point.block, e.tag, false, stack};
    } else {
      apply_free_event(live_, e, [](const Live&) {});
    }
    if (static_cast<std::int64_t>(point.event_index) == peak_event_) capture();
  }

 private:
  struct Live {
    Block block;
    std::uint32_t tag = kNoString;
    bool free_requested = false;
    std::uint32_t stack = kNoString;  // Trace::stacks index, kNoString: none kept
  };
  void capture() {
    report_.peak_segments = policy_->segments();
    std::sort(report_.peak_segments.begin(), report_.peak_segments.end(),
              [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
    report_.peak_allocations.clear();
    for (const auto& [id, live] : live_) {
      PeakAllocation a;
      a.id = id;
      a.addr = live.block.addr;
      a.size = live.block.size;
      a.requested = live.block.requested;
      a.stream = live.block.stream;
      if (live.tag != kNoString) a.tag = std::string(trace_->string_at(live.tag));
      a.free_requested = live.free_requested;
      if (trace_->has_frames()) a.frames = shown_frames(*trace_, live.stack);
      report_.peak_allocations.push_back(std::move(a));
    }
    std::sort(report_.peak_allocations.begin(), report_.peak_allocations.end(),
              [](const PeakAllocation& a, const PeakAllocation& b) {
                return a.addr != b.addr ? a.addr < b.addr : a.id < b.id;
              });
    done_ = true;
    live_.clear();
  }

  PolicyReport& report_;
  std::int64_t peak_event_;
  const Trace* trace_ = nullptr;
  const Policy* policy_ = nullptr;
  std::unordered_map<AllocId, Live> live_;
  bool done_ = false;
};

}  // namespace

PolicyReport gather_policy_report(const Trace& trace, const std::string& spec, const DeviceSpec& device,
                                  const ReplayOptions& options, std::size_t max_buckets) {
  PolicyReport report;
  AnatomyView anatomy;
  {
    SeriesRecorder recorder(report, trace.events.size(), max_buckets);
    AnatomySampler sampler(anatomy, trace.events.size());
    ReplayObservers observers;
    observers.extra = {&recorder, &sampler};
    report.result = run_replay(trace, spec, device, options, observers);
  }
  {
    // The second replay passes the peak event for the live allocations and segments anyway, so the
    // anatomy at the peak is taken there too: never a third replay (run_replay's fallback).
    PolicyOnDevice run(spec, device);
    const std::int64_t peak_event = report.result.metrics.peak_reserved_event;
    PeakRecorder recorder(report, peak_event);
    AnatomyAtEvent at_peak(run.device(), peak_event);
    ReplayObservers observers;
    observers.extra = {&recorder, &at_peak};
    run.run(trace, options, observers);
    report.result.anatomy_at_peak = at_peak.anatomy();
  }
  if (report.result.anatomy_at_peak) {
    anatomy.at_peak = anatomy_parts(*report.result.anatomy_at_peak);
    report.anatomy = std::move(anatomy);
  }
  report.alloc_conf = alloc_conf_line(spec).value_or("");
  return report;
}

}  // namespace fraglab
