// ProfileRecorder: per step/phase span and per tag figures of one replay, plus its timeline.
//
// Invariant: the per-tag live bytes always sum to the replay's requested bytes (an allocation
// counts from its successful alloc until its free completes, as Metrics::peak_requested), so
// "live at the reserved peak" by tag explains the peak's requested part completely.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "fraglab/diff.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/seeded_hash.hpp"

namespace fraglab {

struct ProfileRecorder::State {
  const Trace* trace = nullptr;
  std::uint32_t step_label = kNoString;
  std::uint32_t phase_label = kNoString;
  std::string step, phase;
  std::map<std::pair<std::string, std::string>, size_t> span_index;
  std::vector<SpanProfile> spans;
  size_t span = 0;

  std::vector<TagProfile> tags;
  std::unordered_map<std::uint32_t, size_t, SeededHash> tag_slot;                 // trace string index -> tags index
  std::vector<Bytes> live;                                                        // per tags index
  std::unordered_map<AllocId, std::pair<size_t, Bytes>, SeededHash> allocations;  // live: tag slot, requested
  std::vector<Bytes> live_at_start;

  Bytes best_reserved = 0;
  std::int64_t peak_event = -1;
  std::vector<Bytes> live_at_peak;
  std::vector<StatePoint> timeline;

  size_t slot_named(const std::string& name, std::uint32_t string_index) {
    auto it = tag_slot.find(string_index);
    if (it != tag_slot.end()) return it->second;
    tags.push_back(TagProfile{name, 0, 0, 0});
    live.push_back(0);
    tag_slot.emplace(string_index, tags.size() - 1);
    return tags.size() - 1;
  }
  void enter_span(std::uint64_t event) {
    auto [it, fresh] = span_index.emplace(std::make_pair(step, phase), spans.size());
    if (fresh) {
      SpanProfile s;
      s.step = step;
      s.phase = phase;
      s.first_event = event;
      spans.push_back(std::move(s));
    }
    span = it->second;
  }
  void add_live(size_t slot, Bytes bytes) {
    live[slot] += bytes;
    tags[slot].peak_live = std::max(tags[slot].peak_live, live[slot]);
  }
};

namespace {
// Sentinel string indices for the two tags that do not come from the trace.
constexpr std::uint32_t kUntagged = kNoString;
constexpr std::uint32_t kInitial = kNoString - 1;

std::uint32_t find_string(const Trace& trace, std::string_view s) {
  for (size_t i = 0; i < trace.strings.size(); ++i) {
    if (trace.strings[i] == s) return static_cast<std::uint32_t>(i);
  }
  return kNoString;
}

// A mark's value is stored as JSON text: show strings without their quotes.
std::string mark_value(const Trace& trace, const Event& e) {
  std::string v(trace.string_at(static_cast<std::uint32_t>(e.size)));
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}
}  // namespace

double SpanProfile::fragmentation_at_peak() const {
  return peak_reserved == 0
             ? 0.0
             : 1.0 - static_cast<double>(allocated_at_peak_reserved) / static_cast<double>(peak_reserved);
}

ProfileRecorder::ProfileRecorder() : state_(std::make_unique<State>()) {}
ProfileRecorder::~ProfileRecorder() = default;

void ProfileRecorder::on_start(const Trace& trace, const Policy& /*policy*/) {
  State& s = *state_;
  s.trace = &trace;
  s.step_label = find_string(trace, "step");
  s.phase_label = find_string(trace, "phase");
  s.timeline.reserve(trace.events.size());
  for (const InitialAllocation& a : trace.initial.allocations) {
    const size_t slot = s.slot_named("(initial)", kInitial);
    ++s.tags[slot].allocs;
    s.add_live(slot, a.requested);
    s.allocations[a.id] = {slot, a.requested};
  }
  s.live_at_start = s.live;
  s.enter_span(0);
}

void ProfileRecorder::on_event(const ReplayPoint& point) {
  State& s = *state_;
  const Event& e = *point.event;
  switch (e.op) {
    case Op::Mark:
      if (e.id == s.step_label || e.id == s.phase_label) {
        (e.id == s.step_label ? s.step : s.phase) = mark_value(*s.trace, e);
        s.enter_span(point.event_index);
      }
      break;
    case Op::Alloc:
      if (point.block != nullptr) {  // an OOM'd request never counts as requested
        const size_t slot = e.tag == kNoString ? s.slot_named("(untagged)", kUntagged)
                                               : s.slot_named(std::string(s.trace->string_at(e.tag)), e.tag);
        ++s.tags[slot].allocs;
        s.add_live(slot, e.size);
        s.allocations[e.id] = {slot, e.size};
      }
      break;
    case Op::Free:
    case Op::FreeCompleted: {
      auto it = s.allocations.find(e.id);
      if (it != s.allocations.end()) {
        s.live[it->second.first] -= it->second.second;
        s.allocations.erase(it);
      }
      break;
    }
    default:
      break;
  }
  s.timeline.push_back({point.requested, point.allocated, point.reserved});
  if (point.reserved > s.best_reserved) {
    s.best_reserved = point.reserved;
    s.peak_event = static_cast<std::int64_t>(point.event_index);
    s.live_at_peak = s.live;
  }
  // A mark changes nothing in memory; counting it would give every "step" mark followed by a
  // "phase" mark a span of its own.
  if (e.op == Op::Mark) return;
  SpanProfile& span = s.spans[s.span];
  ++span.events;
  if (span.events == 1 || point.reserved > span.peak_reserved) {
    span.peak_reserved = point.reserved;
    span.allocated_at_peak_reserved = point.allocated;
  } else if (point.reserved == span.peak_reserved) {  // as the Replayer: the busiest moment at the peak
    span.allocated_at_peak_reserved = std::max(span.allocated_at_peak_reserved, point.allocated);
  }
  span.peak_requested = std::max(span.peak_requested, point.requested);
  span.peak_allocated = std::max(span.peak_allocated, point.allocated);
}

ReplayProfile ProfileRecorder::take(ReplayResult result) {
  State& s = *state_;
  ReplayProfile p;
  // The Replayer's peak is the first event that beat the start state; when none did, the start
  // state is the peak and its live bytes are what the peak holds.
  if (result.metrics.peak_reserved_event < 0) {
    s.peak_event = -1;
    s.live_at_peak = s.live_at_start;
  }
  s.live_at_peak.resize(s.tags.size(), 0);
  for (size_t i = 0; i < s.tags.size(); ++i) s.tags[i].live_at_peak_reserved = s.live_at_peak[i];
  std::sort(s.tags.begin(), s.tags.end(), [](const TagProfile& a, const TagProfile& b) { return a.tag < b.tag; });
  // A span without events (the start span of a trace that begins with marks) says nothing.
  for (SpanProfile& span : s.spans) {
    if (span.events > 0) p.spans.push_back(std::move(span));
  }
  p.result = std::move(result);
  p.tags = std::move(s.tags);
  p.timeline = std::move(s.timeline);
  p.peak_event = s.peak_event;
  return p;
}

ReplayProfile profile_replay(const Trace& trace, const std::string& spec, const DeviceSpec& device,
                             const ReplayOptions& options, const ReplayProgress& progress) {
  ProfileRecorder recorder;
  ReplayResult result = run_replay(trace, spec, device, options, {.progress = progress, .extra = {&recorder}});
  return recorder.take(std::move(result));
}

}  // namespace fraglab
