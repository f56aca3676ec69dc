// Greedy-by-size best-fit planning: see greedy_plan.hpp for the algorithm and its sources.
//
// Time: two live intervals [begin, end) overlap iff each begins before the other ends; then the
// later begin lies in both. So a few positions ("slots") stand for all of time: a request becomes
// the range of slots inside its interval, and two requests overlap iff their ranges share a slot.
// The slots are the last begin of each run of begins with no end among them (a run of allocs with
// no free between them): an interval that contains some begin of a run ends after the run's last
// begin (no end lies in between), so it contains that one too. Every interval contains its own
// begin's slot. On training traces this is ~2-3 times fewer slots than requests.
#include "offline/greedy_plan.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "offline/occupancy_index.hpp"

namespace fraglab::offline {
namespace {

// One request as the placement loop reads it: everything in one place, in placement order.
struct Placement {
  Bytes size = 0;
  std::uint64_t lifetime = 0;  // end - begin, in event positions
  std::uint32_t request = 0;   // index in planned order
  std::uint32_t first_slot = 0;
  std::uint32_t last_slot = 0;  // exclusive
};

// XLA's spatial order (GetSpatialBufferIntervalCompare): size desc, duration desc, id asc.
bool placed_before(const Placement& a, const Placement& b) {
  if (a.size != b.size) return a.size > b.size;
  if (a.lifetime != b.lifetime) return a.lifetime > b.lifetime;
  return a.request < b.request;
}

// The offset best fit picks given the offsets taken by the overlapping placed requests (sorted
// disjoint runs): the start of the smallest gap of at least `size` bytes below the top run, the
// lowest offset among equal gaps; else the end of the top run.
Bytes best_fit_offset(const std::vector<OffsetRun>& taken, Bytes size) {
  Bytes gap_begin = 0;
  Bytes best_gap = std::numeric_limits<Bytes>::max();
  Bytes best_offset = 0;
  bool found = false;
  for (const OffsetRun& run : taken) {
    const Bytes gap = run.begin - gap_begin;
    if (gap >= size && gap < best_gap) {
      best_gap = gap;
      best_offset = gap_begin;
      found = true;
    }
    gap_begin = run.end;
  }
  return found ? best_offset : gap_begin;
}

// The slot positions (see the top of the file), ascending.
std::vector<std::uint64_t> slot_positions(const std::vector<PlannedRequest>& requests) {
  std::uint64_t horizon = 0;
  for (const PlannedRequest& r : requests) horizon = std::max(horizon, r.end);
  std::vector<std::uint8_t> begins_here(horizon + 1, 0);
  std::vector<std::uint8_t> ends_here(horizon + 1, 0);
  for (const PlannedRequest& r : requests) {
    begins_here[r.begin] = 1;
    ends_here[r.end] = 1;
  }
  std::vector<std::uint64_t> slots;
  bool run_open = false;  // a begin was seen since the last end
  for (std::uint64_t position = 0; position <= horizon; ++position) {
    if (ends_here[position]) run_open = false;  // an end closes the run (ends come before begins)
    if (!begins_here[position]) continue;
    if (run_open) {
      slots.back() = position;  // the open run's last begin so far
    } else {
      slots.push_back(position);
      run_open = true;
    }
  }
  return slots;
}

// XLA's NoFragmentationStatsHeap: the most planned bytes live at any event position.
Bytes most_bytes_live(const std::vector<PlannedRequest>& requests, const std::vector<Bytes>& sizes) {
  std::uint64_t horizon = 0;
  for (const PlannedRequest& r : requests) horizon = std::max(horizon, r.end);
  std::vector<std::int64_t> change(horizon + 1, 0);  // bytes that go live (+) or end (-) at a position
  for (std::size_t k = 0; k < requests.size(); ++k) {
    change[requests[k].begin] += static_cast<std::int64_t>(sizes[k]);
    change[requests[k].end] -= static_cast<std::int64_t>(sizes[k]);
  }
  std::int64_t live = 0;
  std::int64_t most = 0;
  for (std::int64_t delta : change) {
    live += delta;
    most = std::max(most, live);
  }
  return static_cast<Bytes>(most);
}

}  // namespace

Bytes planned_size(Bytes requested, Bytes alignment) {
  const Bytes at_least_one = std::max<Bytes>(requested, 1);
  return (at_least_one + alignment - 1) / alignment * alignment;
}

GreedyPlan plan_greedy_by_size(const std::vector<PlannedRequest>& requests, Bytes alignment) {
  GreedyPlan plan;
  plan.sizes.resize(requests.size());
  plan.offsets.assign(requests.size(), 0);
  for (std::size_t k = 0; k < requests.size(); ++k) {
    if (requests[k].begin >= requests[k].end) {
      throw std::logic_error("offline: a planned request has an empty live interval");
    }
    plan.sizes[k] = planned_size(requests[k].size, alignment);
  }
  if (requests.empty()) return plan;
  if (requests.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("offline: more requests than the planner indexes (2^32)");
  }

  const std::vector<std::uint64_t> slots = slot_positions(requests);
  const auto slot_of = [&](std::uint64_t position) {  // slots before `position`
    return static_cast<std::uint32_t>(std::lower_bound(slots.begin(), slots.end(), position) - slots.begin());
  };
  std::vector<Placement> order(requests.size());
  for (std::uint32_t k = 0; k < order.size(); ++k) {
    const PlannedRequest& r = requests[k];
    order[k] = Placement{plan.sizes[k], r.end - r.begin, k, slot_of(r.begin), slot_of(r.end)};
  }
  std::sort(order.begin(), order.end(), placed_before);

  OccupancyIndex index(static_cast<std::uint32_t>(slots.size()));
  for (const Placement& p : order) {
    const Bytes offset = best_fit_offset(index.occupied(p.first_slot, p.last_slot), p.size);
    plan.offsets[p.request] = offset;
    plan.heap_size = std::max(plan.heap_size, offset + p.size);
    index.insert(p.first_slot, p.last_slot, OffsetRun{offset, offset + p.size});
  }
  plan.lower_bound = most_bytes_live(requests, plan.sizes);
  return plan;
}

}  // namespace fraglab::offline
