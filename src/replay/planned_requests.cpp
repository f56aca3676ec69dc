// planned_requests(): see include/fraglab/planned_requests.hpp for the contract.
#include "fraglab/planned_requests.hpp"

#include <unordered_map>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {

std::vector<PlannedRequest> planned_requests(const Trace& trace) {
  std::vector<PlannedRequest> requests;
  requests.reserve(trace.initial.allocations.size() + trace.events.size() / 2);
  const std::uint64_t never = trace.events.size() + 1;
  std::unordered_map<AllocId, std::size_t, SeededHash> live;  // id -> index in requests
  for (const InitialAllocation& a : trace.initial.allocations) {
    live[a.id] = requests.size();
    requests.push_back({0, never, a.requested, a.stream, kNoString, a.id});
  }
  for (std::uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Alloc) {
      live[e.id] = requests.size();
      requests.push_back({i + 1, never, e.size, e.stream, e.tag, e.id});
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      auto it = live.find(e.id);
      if (it == live.end()) continue;  // validate_trace() rules this out for loaded traces
      requests[it->second].end = i + 1;
      live.erase(it);
    }
  }
  return requests;
}

}  // namespace fraglab
