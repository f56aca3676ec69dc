// The allocations live at one point of a trace, largest first, and the point where the program's
// own requested bytes peak: what `inspect --top-at-peak` lists (README "Stack frames").
#pragma once

#include <cstdint>
#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab {

struct LiveAllocation {
  AllocId id = 0;
  Bytes size = 0;  // requested bytes
  StreamId stream = 0;
  std::int64_t alloc_event = -1;    // index of its alloc event; -1 = live at the start
  std::uint32_t stack = kNoString;  // index into Trace::stacks: its alloc's stack
  bool free_requested = false;      // freed by the user, still held for another stream
};

struct LiveSet {
  std::int64_t after_event = -1;            // the state after this event; -1 = the start
  Bytes live_bytes = 0;                     // requested bytes of every live allocation
  std::vector<LiveAllocation> allocations;  // largest first, then by id
};

// The end of an allocation's life by the rules of trace.hpp, on a map of the live allocations by
// id whose records have a `free_requested` flag: Free and FreeCompleted end it (on_end(record)
// first), FreeRequested marks it (its bytes stay held); other events change nothing. Alloc is the
// caller's, since what it records differs (live_after() below: the request; the report's
// PeakRecorder, src/report/report_data.cpp: the policy's block).
template <class LiveMap, class OnEnd>
void apply_free_event(LiveMap& live, const Event& e, OnEnd on_end) {
  if (e.op == Op::Free || e.op == Op::FreeCompleted) {
    if (auto it = live.find(e.id); it != live.end()) {
      on_end(it->second);
      live.erase(it);
    }
  } else if (e.op == Op::FreeRequested) {
    if (auto it = live.find(e.id); it != live.end()) it->second.free_requested = true;
  }
}

// The first event after which the requested bytes live (initial allocations included, a pending
// free still holding its bytes, as summarize() counts them) are at their peak; -1 = the start.
std::int64_t peak_requested_event(const Trace& trace);
// The allocations live after `event_index` (-1: at the start). An index past the end is the end.
LiveSet live_after(const Trace& trace, std::int64_t event_index);

}  // namespace fraglab
