// planned_requests(): see include/fraglab/planned_requests.hpp for the contract.
#include "fraglab/planned_requests.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {
namespace {

constexpr std::size_t kNotLive = std::numeric_limits<std::size_t>::max();

// Allocation ids -> index in the requests of the live allocation with that id. Traces number
// their allocations densely (gen, convert and the snapshot reader count from 0), so a table
// indexed by id is used when the largest id is at most a few times the number of allocations:
// one load per lookup instead of a hash node made and dropped per allocation. Any other ids go to
// a hash map; both give the same answers.
class LiveIndex {
 public:
  explicit LiveIndex(const Trace& trace) {
    AllocId largest = 0;
    std::size_t allocs = trace.initial.allocations.size();
    for (const InitialAllocation& a : trace.initial.allocations) largest = std::max(largest, a.id);
    for (const Event& e : trace.events) {
      if (e.op == Op::Alloc) {
        largest = std::max(largest, e.id);
        ++allocs;
      }
    }
    dense_ = largest < 4 * allocs + 1024;
    if (dense_) table_.assign(largest + 1, kNotLive);
  }

  void set(AllocId id, std::size_t index) {
    if (dense_) {
      table_[id] = index;
    } else {
      hashed_[id] = index;
    }
  }
  // The index of the live allocation `id` (kNotLive when none), which is then no longer live.
  std::size_t take(AllocId id) {
    if (dense_) {
      if (id >= table_.size()) return kNotLive;
      return std::exchange(table_[id], kNotLive);
    }
    auto it = hashed_.find(id);
    if (it == hashed_.end()) return kNotLive;
    const std::size_t index = it->second;
    hashed_.erase(it);
    return index;
  }

 private:
  bool dense_ = false;
  std::vector<std::size_t> table_;
  std::unordered_map<AllocId, std::size_t, SeededHash> hashed_;
};

}  // namespace

std::vector<PlannedRequest> planned_requests(const Trace& trace) {
  std::vector<PlannedRequest> requests;
  requests.reserve(trace.initial.allocations.size() + trace.events.size() / 2);
  const std::uint64_t never = trace.events.size() + 1;
  LiveIndex live(trace);
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
      if (index == kNotLive) continue;  // validate_trace() rules this out for loaded traces
      requests[index].end = i + 1;
    }
  }
  return requests;
}

}  // namespace fraglab
