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
// (set(id, index), take(id) -> index or kNone). The events through a span and the requests'
// count in a local: the vectors' size() would be a division each (events are 56 bytes, requests
// 48); and the map lives in a local object, since members would be reloaded after every store to
// a request.
template <typename LiveMap>
void collect(const Trace& trace, LiveMap& live, std::vector<PlannedRequest>& requests) {
  const std::uint64_t never = trace.events.size() + 1;
  std::size_t next = 0;  // requests.size()
  for (const InitialAllocation& a : trace.initial.allocations) {
    live.set(a.id, next++);
    requests.push_back({0, never, a.requested, a.stream, kNoString, a.id});
  }
  const std::span<const Event> events = trace.events;
  for (std::uint64_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.op == Op::Alloc) {
      live.set(e.id, next++);
      requests.push_back({i + 1, never, e.size, e.stream, e.tag, e.id});
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      const std::size_t index = live.take(e.id);
      if (index == kNone) continue;  // validate_trace() rules this out for loaded traces
      requests.data()[index].end = i + 1;
    }
  }
}

// Allocation ids -> index of the live request, by a table indexed by id: traces number their
// allocations densely (fraglab/id_index.hpp), so every id is below the table's size.
class DenseLive {
 public:
  explicit DenseLive(AllocId largest) : table_(largest + 1, kNone), slots_(table_.data()), largest_(largest) {}
  void set(AllocId id, std::size_t index) { slots_[id] = index; }  // (id <= largest: an alloc's)
  std::size_t take(AllocId id) {
    if (id > largest_) [[unlikely]]
      return kNone;  // a free of no allocation
    const std::size_t index = slots_[id];
    slots_[id] = kNone;
    return index;
  }

 private:
  std::vector<std::size_t> table_;
  std::size_t* slots_;  // table_.data(), in the object the loop keeps in registers
  AllocId largest_;
};

}  // namespace

std::vector<PlannedRequest> planned_requests(const Trace& trace) {
  // The number of requests (so that the vector is reserved exactly: a guess too small would copy
  // them all once more) and the largest id (a table by id when it is at most a few times that).
  AllocId largest = 0;
  std::size_t allocs = trace.initial.allocations.size();
  for (const InitialAllocation& a : trace.initial.allocations) largest = std::max(largest, a.id);
  for (const Event& e : trace.events) {
    if (e.op == Op::Alloc) {
      largest = std::max(largest, e.id);
      ++allocs;
    }
  }
  std::vector<PlannedRequest> requests;
  requests.reserve(allocs);
  if (largest < 4 * allocs + 1024) {
    DenseLive live(largest);
    collect(trace, live, requests);
  } else {
    IdIndex live(0);  // every id hashed
    collect(trace, live, requests);
  }
  return requests;
}

}  // namespace fraglab
