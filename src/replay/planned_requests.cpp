// planned_requests(): see include/fraglab/planned_requests.hpp for the contract.
#include "fraglab/planned_requests.hpp"

#include <algorithm>
#include <vector>

#include "fraglab/id_index.hpp"

namespace fraglab {
namespace {

// Allocation ids -> index in the requests of the live allocation with that id: a table by id
// when the largest id is at most a few times the number of allocations (fraglab/id_index.hpp),
// else every id hashed. `allocs` comes back as the number of requests.
IdIndex live_index(const Trace& trace, std::size_t& allocs) {
  AllocId largest = 0;
  allocs = trace.initial.allocations.size();
  for (const InitialAllocation& a : trace.initial.allocations) largest = std::max(largest, a.id);
  for (const Event& e : trace.events) {
    if (e.op == Op::Alloc) {
      largest = std::max(largest, e.id);
      ++allocs;
    }
  }
  const bool dense = largest < 4 * allocs + 1024;
  IdIndex index(dense ? largest + 1 : 0);
  if (dense) index.reserve_table(largest + 1);
  return index;
}

}  // namespace

std::vector<PlannedRequest> planned_requests(const Trace& trace) {
  std::size_t allocs = 0;
  IdIndex live = live_index(trace, allocs);
  std::vector<PlannedRequest> requests;
  requests.reserve(allocs);  // (exactly: a guess too small would copy them all once more)
  const std::uint64_t never = trace.events.size() + 1;
  for (const InitialAllocation& a : trace.initial.allocations) {
    live.set(a.id, requests.size());
    requests.push_back({0, never, a.requested, a.stream, kNoString, a.id});
  }
  for (std::uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Alloc) {
      live.set(e.id, requests.size());
      requests.push_back({i + 1, never, e.size, e.stream, e.tag, e.id});
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      const std::size_t index = live.take(e.id);
      if (index == IdIndex::kNone) continue;  // validate_trace() rules this out for loaded traces
      requests[index].end = i + 1;
    }
  }
  return requests;
}

}  // namespace fraglab
