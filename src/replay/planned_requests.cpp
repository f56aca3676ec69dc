// planned_requests(): see include/fraglab/planned_requests.hpp for the contract.
#include "fraglab/planned_requests.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "fraglab/id_index.hpp"

namespace fraglab {
namespace {

constexpr std::size_t kNone = IdIndex::kNone;

// The requests, with `live` the map from an allocation id to the index of its live request
// (set(id, index) -> whether the map holds it; take(id, requests so far) -> index or kNone).
// Returns whether every set() held (else the requests are not to be used). The events go through
// a span and the requests' count is a local: the vectors' size() would be a division each (events
// are 56 bytes, requests 48); and the map lives in a local object, since members would be
// reloaded after every store to a request (set()'s results are gathered in a local too).
template <typename LiveMap>
bool collect(const Trace& trace, LiveMap& live, std::vector<PlannedRequest>& requests) {
  const std::uint64_t never = trace.events.size() + 1;
  std::size_t next = 0;  // requests.size()
  bool held = true;
  for (const InitialAllocation& a : trace.initial.allocations) {
    held &= live.set(a.id, next++);
    requests.push_back({0, never, a.requested, a.stream, kNoString, a.id});
  }
  const std::span<const Event> events = trace.events;
  for (std::uint64_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.op == Op::Alloc) {
      held &= live.set(e.id, next++);
      requests.push_back({i + 1, never, e.size, e.stream, e.tag, e.id});
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      const std::size_t index = live.take(e.id, next);
      if (index == kNone) continue;  // validate_trace() rules this out for loaded traces
      requests.data()[index].end = i + 1;
    }
  }
  return held;
}

// Allocation ids that count the requests from the first one's id (the trace readers and gen
// number the allocations 1, 2, ...): the index is the id minus that, with no map at all. The
// request of an id is live until its end is set.
class IdCountsRequests {
 public:
  IdCountsRequests(const std::vector<PlannedRequest>& requests, AllocId first_id, std::uint64_t never)
      : requests_(requests), first_id_(first_id), never_(never) {}
  // False when the id does not count the requests (then the requests collected are not used:
  // the caller collects them again with a map).
  bool set(AllocId id, std::size_t index) const { return id == first_id_ + index; }
  std::size_t take(AllocId id, std::size_t requests_so_far) const {
    const std::size_t index = id - first_id_;  // (an id below the first wraps to a large index)
    if (index >= requests_so_far || requests_.data()[index].end != never_) [[unlikely]] {
      return kNone;  // a free of no allocation yet, or of one freed already
    }
    return index;
  }

 private:
  const std::vector<PlannedRequest>& requests_;
  AllocId first_id_;
  std::uint64_t never_;
};

// Any other ids: IdIndex, a table by id when the largest id is at most a few times the number of
// requests, else every id hashed.
struct IndexedLive {
  IdIndex index;
  bool set(AllocId id, std::size_t k) {
    index.set(id, k);
    return true;
  }
  std::size_t take(AllocId id, std::size_t /*requests_so_far*/) { return index.take(id); }
};

}  // namespace

std::vector<PlannedRequest> planned_requests(const Trace& trace) {
  // The ids usually count the requests from the first one's id (the trace readers and gen number
  // the allocations so): the requests are collected on that guess with no map at all, checked as
  // they come, in one pass over the events. The vector is reserved for one request per event and
  // initial allocation (the memory past the requests is never touched): counting the requests
  // first took a pass of its own over the events.
  AllocId first_id = 0;  // the first request's id
  if (!trace.initial.allocations.empty()) {
    first_id = trace.initial.allocations.front().id;
  } else {
    const auto alloc =
        std::find_if(trace.events.begin(), trace.events.end(), [](const Event& e) { return e.op == Op::Alloc; });
    if (alloc != trace.events.end()) first_id = alloc->id;
  }
  std::vector<PlannedRequest> requests;
  requests.reserve(trace.initial.allocations.size() + trace.events.size());
  IdCountsRequests counted(requests, first_id, trace.events.size() + 1);
  if (collect(trace, counted, requests)) return requests;
  // Other ids: collected again with IndexedLive.
  const std::size_t allocs = requests.size();
  requests.clear();
  AllocId largest = 0;
  for (const InitialAllocation& a : trace.initial.allocations) largest = std::max(largest, a.id);
  for (const Event& e : trace.events) {
    if (e.op == Op::Alloc) largest = std::max(largest, e.id);
  }
  const bool dense = largest < 4 * allocs + 1024;
  IndexedLive live{IdIndex(dense ? largest + 1 : 0)};
  if (dense) live.index.reserve_table(largest + 1);
  collect(trace, live, requests);
  return requests;
}

}  // namespace fraglab
