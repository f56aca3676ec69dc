// Greedy-by-size best-fit planning: see greedy_plan.hpp for the algorithm and its sources.
//
// Time: two live intervals [begin, end) overlap iff each begins before the other ends; then the
// later begin lies in both. So a few positions ("slots") stand for all of time: a request becomes
// the range of slots inside its interval, and two requests overlap iff their ranges share a slot.
// The slots are the last begin of each run of begins with no end among them (a run of allocs with
// no free between them): an interval that contains some begin of a run ends after the run's last
// begin (no end lies in between), so it contains that one too. Every interval contains its own
// begin's slot. On training traces this is ~2-3 times fewer slots than requests.
//
// Placement: the requests' slot ranges in placement order are the occupancy index's queries, all
// known before the first one, so the index can skip the sets no later query reads
// (occupancy_index.hpp). Per request: the best-fit offset among the offsets taken during its slots
// (the index scans the gaps while it unites its sets), then insert.
#include "offline/greedy_plan.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>

#include "offline/occupancy_index.hpp"

namespace fraglab::offline {
namespace {

// What placement_order and count_slots need to know of all the requests, gathered in the pass
// that rounds their sizes: another pass over the requests costs ~5-7 instructions per request in
// loop and loads alone.
struct RequestBounds {
  Bytes largest = 0;           // planned size
  Bytes smallest = ~Bytes{0};  // planned size
  Bytes any_size_bits = 0;     // the OR of the planned sizes
  std::uint64_t longest = 0;   // end - begin
  std::uint64_t shortest = ~std::uint64_t{0};
  std::uint64_t horizon = 0;  // the last end
  void note(Bytes size, const PlannedRequest& request) {
    largest = std::max(largest, size);
    smallest = std::min(smallest, size);
    any_size_bits |= size;
    const std::uint64_t lifetime = request.end - request.begin;
    longest = std::max(longest, lifetime);
    shortest = std::min(shortest, lifetime);
    horizon = std::max(horizon, request.end);
  }
};

// The request ordinals in XLA's spatial order (GetSpatialBufferIntervalCompare): size desc,
// duration desc, id asc. One key per request, ascending: the size below the largest in its high
// bits, the lifetime below the longest in its low bits (both count down from the largest value, so
// descending becomes ascending; the sizes' common trailing zero bits, the alignment's, are dropped).
// The key's order is the (size desc, lifetime desc) order, so a stable LSD radix sort of it by
// 11-bit digits (equal keys keep ordinal order) is the spatial order: a few linear passes (three
// on training traces) instead of n log n comparisons that a branch predictor cannot guess. When
// the two fields do not fit one 64-bit key, the size goes in a second, more significant pass.
std::unique_ptr<std::uint32_t[]> placement_order(std::span<const Bytes> sizes,
                                                 const std::vector<PlannedRequest>& requests,
                                                 const RequestBounds& bounds) {
  struct Keyed {
    std::uint64_t key;
    std::uint32_t request;
  };
  // The fields' widths: the largest of (largest - size) is largest - smallest, and its top bit is
  // the top bit of their OR; the sizes' common trailing zero bits are common to their differences
  // too (those may have more: then the key keeps a few zero bits, in the same order).
  const Bytes largest = bounds.largest;
  const std::uint64_t longest = bounds.longest;
  const Bytes any_size_bits = bounds.any_size_bits;
  const int size_shift = any_size_bits == 0 ? 0 : std::countr_zero(any_size_bits);
  const Bytes size_bits = largest - bounds.smallest;  // (the top bit of every size key's bits)
  const std::uint64_t lifetime_bits = longest - bounds.shortest;
  const int lifetime_width = std::bit_width(lifetime_bits);
  const bool one_key = std::bit_width(size_bits >> size_shift) + lifetime_width <= 64;
  const auto lifetime_key = [&](std::uint32_t k) { return longest - (requests[k].end - requests[k].begin); };
  const auto size_key = [&](std::uint32_t k) { return (largest - sizes[k]) >> size_shift; };
  const auto above_lifetime = [&](std::uint64_t v) { return lifetime_width == 64 ? 0 : v << lifetime_width; };
  // Every entry is written before it is read: allocated without the zero-fill of a vector.
  const std::size_t count = sizes.size();
  std::unique_ptr<Keyed[]> items = std::make_unique_for_overwrite<Keyed[]>(count);
  std::unique_ptr<Keyed[]> sorted = std::make_unique_for_overwrite<Keyed[]>(count);
  const auto all = [&](const std::unique_ptr<Keyed[]>& array) { return std::span<Keyed>(array.get(), count); };
  std::unique_ptr<std::uint32_t[]> order = std::make_unique_for_overwrite<std::uint32_t[]>(count);
  // Stable LSD radix sort of `items` by key, skipping the digits that are the same in every key.
  // With `last`, its last pass (when that digit moves anything) writes the requests' order itself
  // rather than the items: no pass to copy them out. Returns whether it did.
  const auto sort_by_key = [&](std::uint64_t any_bits, bool last) {
    constexpr unsigned kDigitBits = 11;
    const unsigned last_shift = any_bits == 0 ? 0 : (std::bit_width(any_bits) - 1) / kDigitBits * kDigitBits;
    for (unsigned shift = 0; shift < 64 && (any_bits >> shift) != 0; shift += kDigitBits) {
      const auto digit = [&](const Keyed& item) {
        return static_cast<std::size_t>((item.key >> shift) & ((1u << kDigitBits) - 1));
      };
      std::array<std::uint32_t, std::size_t{1} << kDigitBits> next{};  // counts, then where each digit's next goes
      for (const Keyed& item : all(items)) ++next[digit(item)];
      if (next[digit(items[0])] == count) continue;  // one digit value: nothing moves
      std::uint32_t start = 0;
      for (std::uint32_t& slot : next) start += std::exchange(slot, start);
      if (last && shift == last_shift) {
        for (const Keyed& item : all(items)) order[next[digit(item)]++] = item.request;
        return true;
      }
      for (const Keyed& item : all(items)) sorted[next[digit(item)]++] = item;
      items.swap(sorted);
    }
    return false;
  };
  if (one_key) {
    for (std::uint32_t k = 0; k < count; ++k) {
      items[k] = Keyed{above_lifetime(size_key(k)) | lifetime_key(k), k};
    }
    if (sort_by_key(above_lifetime(size_bits >> size_shift) | lifetime_bits, true)) return order;
  } else {
    for (std::uint32_t k = 0; k < count; ++k) items[k] = Keyed{lifetime_key(k), k};
    sort_by_key(lifetime_bits, false);
    for (Keyed& item : all(items)) item.key = size_key(item.request);
    if (sort_by_key(size_bits >> size_shift, true)) return order;
  }
  for (std::size_t n = 0; n < count; ++n) order[n] = items[n].request;
  return order;
}

// The requests' slots (see the top of the file): for each event position p from 0 to the last end,
// the number of slots at positions before p, so that a request's slots are
// [before[begin], before[end]); and the number of slots.
struct SlotCounts {
  std::unique_ptr<std::uint32_t[]> before;
  std::uint32_t slots = 0;
};

// One pass up the positions, with the latest begin not yet known to be a slot pending: an end
// makes it one (ends come before begins at one position), a next begin first replaces it. The
// count at a position may leave out a pending begin that turns out a slot later, but it is only
// read at the positions of begins and ends: an end there settles the pending one first, and a
// begin there means the pending one was no slot. Every begin has an end after it, so none is
// pending after the last end (the last position).
SlotCounts count_slots(const std::vector<PlannedRequest>& requests, std::uint64_t horizon) {
  constexpr std::uint8_t kBegin = 1;
  constexpr std::uint8_t kEnd = 2;
  std::vector<std::uint8_t> events_here(horizon + 1, 0);
  for (const PlannedRequest& r : requests) {
    events_here[r.begin] |= kBegin;
    events_here[r.end] |= kEnd;
  }
  SlotCounts counts{std::make_unique_for_overwrite<std::uint32_t[]>(horizon + 1)};  // (every entry written)
  std::uint32_t count = 0;
  std::uint32_t pending = 0;  // 1: the latest begin may still be a slot
  for (std::uint64_t position = 0; position <= horizon; ++position) {
    const std::uint8_t here = events_here[position];
    if (here & kEnd) count += std::exchange(pending, 0);
    counts.before[position] = count;
    if (here & kBegin) pending = 1;
  }
  counts.slots = count;
  return counts;
}

// XLA's NoFragmentationStatsHeap: the most planned bytes live at any event position. The live
// bytes only grow at a begin, and from a begin to the slot of its run (the last begin before an
// end) only begins come, so the most is reached at a slot: the most bytes whose slot ranges hold
// one slot (the requests live at a slot's position are those whose ranges hold it).
class MostBytesLive {
 public:
  explicit MostBytesLive(std::uint32_t slots) : change_(std::size_t{slots} + 1, 0) {}
  void add(SlotRange range, Bytes bytes) {
    change_[range.first] += static_cast<std::int64_t>(bytes);
    change_[range.last] -= static_cast<std::int64_t>(bytes);
  }
  Bytes most() const {
    std::int64_t live = 0;
    std::int64_t most = 0;
    for (std::int64_t delta : change_) {
      live += delta;
      most = std::max(most, live);
    }
    return static_cast<Bytes>(most);
  }

 private:
  std::vector<std::int64_t> change_;  // bytes that go live (+) or end (-) at a slot
};

}  // namespace

Bytes planned_size(Bytes requested, Bytes alignment) {
  const Bytes at_least_one = std::max<Bytes>(requested, 1);
  return (at_least_one + alignment - 1) & ~(alignment - 1);  // (a power of two: no division)
}

GreedyPlan plan_greedy_by_size(const std::vector<PlannedRequest>& requests, Bytes alignment) {
  GreedyPlan plan;
  plan.sizes.resize(requests.size());    // (every one written below, in order: not zero-filled)
  plan.offsets.resize(requests.size());  // (every one written by place_all: not zero-filled)
  RequestBounds bounds;
  Bytes* planned = plan.sizes.data();
  for (const PlannedRequest& request : requests) {
    if (request.begin >= request.end) throw std::logic_error("offline: a planned request has an empty live interval");
    const Bytes size = planned_size(request.size, alignment);
    *planned++ = size;
    bounds.note(size, request);
  }
  if (requests.empty()) return plan;
  if (requests.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("offline: more requests than the planner indexes (2^32)");
  }

  const SlotCounts slots = count_slots(requests, bounds.horizon);
  const std::unique_ptr<std::uint32_t[]> placement = placement_order(plan.sizes, requests, bounds);
  const std::span<const std::uint32_t> order(placement.get(), requests.size());
  // Each request's slots, in placement order: the index's queries, known before the first.
  // The lower bound's changes per slot are noted in the same pass.
  // (An array written in order, entry by entry: no zero-fill first, and no capacity test per
  // entry as a vector's push_back makes.)
  const std::unique_ptr<SlotRange[]> slot_ranges = std::make_unique_for_overwrite<SlotRange[]>(order.size());
  MostBytesLive live(slots.slots);
  SlotRange* range = slot_ranges.get();
  for (const std::uint32_t k : order) {
    *range = SlotRange{slots.before[requests[k].begin], slots.before[requests[k].end]};
    live.add(*range++, plan.sizes[k]);
  }

  OccupancyIndex index(slots.slots, std::span<const SlotRange>(slot_ranges.get(), order.size()));
  plan.heap_size = index.place_all(order, plan.sizes.data(), plan.offsets.data());
  plan.lower_bound = live.most();
  return plan;
}

}  // namespace fraglab::offline
