// live_after() and peak_requested_event() (fraglab/peak_allocations.hpp): one walk over the
// events with the lifetime rules of trace.hpp (an allocation holds its bytes until its free
// completes).
#include "fraglab/peak_allocations.hpp"

#include <algorithm>
#include <unordered_map>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {

namespace {

// Walks the trace from the start, calling `after(i, live_bytes)` after each event (and once with
// -1 at the start); stops when it returns false.
template <class Live, class After>
void walk(const Trace& trace, Live& live, After after) {
  Bytes bytes = 0;
  for (const InitialAllocation& a : trace.initial.allocations) {
    live[a.id] = LiveAllocation{a.id, a.requested, a.stream, -1, a.stack, a.free_requested};
    bytes += a.requested;
  }
  if (!after(-1, bytes)) return;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Alloc) {
      const std::uint32_t stack = i < trace.event_stacks.size() ? trace.event_stacks[i] : kNoString;
      live[e.id] = LiveAllocation{e.id, e.size, e.stream, static_cast<std::int64_t>(i), stack, false};
      bytes += e.size;
    } else {
      apply_free_event(live, e, [&](const LiveAllocation& a) { bytes -= a.size; });
    }
    if (!after(static_cast<std::int64_t>(i), bytes)) return;
  }
}

}  // namespace

std::int64_t peak_requested_event(const Trace& trace) {
  std::unordered_map<AllocId, LiveAllocation, SeededHash> live;
  std::int64_t peak_event = -1;
  Bytes peak = 0;
  walk(trace, live, [&](std::int64_t i, Bytes bytes) {
    if (i < 0 || bytes > peak) {
      peak = bytes;
      peak_event = i;
    }
    return true;
  });
  return peak_event;
}

LiveSet live_after(const Trace& trace, std::int64_t event_index) {
  std::unordered_map<AllocId, LiveAllocation, SeededHash> live;
  LiveSet out;
  out.after_event = std::min<std::int64_t>(event_index, static_cast<std::int64_t>(trace.events.size()) - 1);
  walk(trace, live, [&](std::int64_t i, Bytes bytes) {
    out.live_bytes = bytes;
    return i < out.after_event;
  });
  out.allocations.reserve(live.size());
  for (const auto& [id, a] : live) out.allocations.push_back(a);
  std::sort(out.allocations.begin(), out.allocations.end(), [](const LiveAllocation& x, const LiveAllocation& y) {
    return x.size != y.size ? x.size > y.size : x.id < y.id;
  });
  return out;
}

}  // namespace fraglab
