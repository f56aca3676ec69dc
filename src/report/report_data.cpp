// What `fraglab report` shows of one policy's run, gathered by observers of two replays of the
// trace (the replay is deterministic, so the second one reaches exactly the state the first one
// measured its peak at): the series, marks and retries from the first; the segments and the live
// allocations after the peak event from the second.
#include <algorithm>
#include <unordered_map>

#include "fraglab/html_report.hpp"
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
    live_[allocation.id] = {block, kNoString, allocation.free_requested};
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
      live_[e.id] = {*point.block, e.tag, false};
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      live_.erase(e.id);
    } else if (e.op == Op::FreeRequested) {
      if (auto it = live_.find(e.id); it != live_.end()) it->second.free_requested = true;
    }
    if (static_cast<std::int64_t>(point.event_index) == peak_event_) capture();
  }

 private:
  struct Live {
    Block block;
    std::uint32_t tag = kNoString;
    bool free_requested = false;
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
  {
    SeriesRecorder recorder(report, trace.events.size(), max_buckets);
    ReplayObservers observers;
    observers.extra = {&recorder};
    report.result = run_replay(trace, spec, device, options, observers);
  }
  {
    PeakRecorder recorder(report, report.result.metrics.peak_reserved_event);
    ReplayObservers observers;
    observers.extra = {&recorder};
    run_replay(trace, spec, device, options, observers);
  }
  report.alloc_conf = alloc_conf_line(spec).value_or("");
  attach_anatomy(trace, report);
  attach_frames(trace, report);
  return report;
}

// The fragmentation anatomy (issue 17 §1) is built on another branch: the integrator fills
// report.anatomy here (over time, downsampled like the series, and at the peak event). Until
// then the page says "not available".
void attach_anatomy(const Trace& /*trace*/, PolicyReport& report) { report.anatomy = std::nullopt; }

// Kept stack frames (Trace::frames / stacks / event_stacks) are built on another branch: the
// integrator fills each peak allocation's frames here, by its alloc id. Until then the page says
// "not available".
void attach_frames(const Trace& /*trace*/, PolicyReport& report) {
  for (PeakAllocation& a : report.peak_allocations) a.frames = std::nullopt;
}

}  // namespace fraglab
