// The requests a Replayer will make of a policy, known before the replay. For policies that see
// the whole trace first (offline planners, gemini's tag-driven packing).
//
// The Replayer's order of calls (the contract these rely on): prepare(trace) once; then adopt()
// of the initial state, whose default issues one allocate() per initial allocation, in order;
// then one allocate() per alloc event, in trace order, including those that fail. So the k-th
// allocate() call is planned_requests(trace)[k].
//
// Time is counted in event positions: an initial allocation begins at 0, the allocation of event
// i at i + 1; it ends at (index of the event that completes its free) + 1, or at events + 1 when
// the trace never frees it. Two requests are live at once iff their [begin, end) overlap.
#pragma once

#include <cstdint>
#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab {

struct PlannedRequest {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  Bytes size = 0;
  StreamId stream = 0;
  std::uint32_t tag = kNoString;  // index into Trace::strings, kNoString when untagged
  AllocId id = 0;
};

std::vector<PlannedRequest> planned_requests(const Trace& trace);

}  // namespace fraglab
