// The offline planner: every request of a trace gets a fixed offset in one arena, computed before
// the replay from the requests' live intervals — "greedy by size" offset calculation.
//
// Algorithm (Pisarchyk & Lee, arXiv 2001.03288, "Greedy by Size for Offset Calculation"; XLA's
// GlobalDecreasingSizeBestFitHeap in xla/service/heap_simulator, anchors.md §1.7):
//  1. order the requests by planned size, largest first; ties: the longer live interval first,
//     then the earlier request (XLA's spatial order: size desc, duration desc, buffer id asc —
//     our request ordinal is the buffer id, and ordinals are in begin order);
//  2. for each request, take the requests already placed whose live intervals overlap its own;
//     the gaps are the offset ranges none of them occupies below their highest end: the range
//     from 0 to the first occupied byte and the ranges between occupied runs;
//  3. place it at the start of the smallest gap it fits in, the lowest offset among equal gaps
//     (XLA's min over (gap size, offset)); when none fits, at the highest end of the overlapping
//     placed requests (XLA's unbounded last free chunk; Pisarchyk & Lee's "prev_offset").
// Heap size = max(offset + size). Its lower bound is XLA's NoFragmentationStatsHeap: the most
// planned bytes live at once.
//
// Invariants of the result: two requests whose live intervals overlap get disjoint
// [offset, offset + size); every offset is a multiple of the alignment; the plan is a pure
// function of the requests (no pointer values or hash orders are involved).
//
// Simplifications: no colocations / aliasing (XLA's ShareWith), no preferred offsets, one heap
// (no ConstrainedGlobalDecreasingSizeBestFitHeap size limit). A 0-byte request gets one alignment
// unit rather than XLA's shared offset 0, because every block needs an address of its own.
#pragma once

#include <cstdint>
#include <vector>

#include "fraglab/planned_requests.hpp"
#include "fraglab/types.hpp"
#include "offline/default_init_allocator.hpp"

namespace fraglab::offline {

struct GreedyPlan {
  // Per request, in the order of planned_requests(). (Neither is zero-filled first: the planner
  // writes every size in request order and every offset in placement order.)
  std::vector<Bytes, DefaultInitAllocator<Bytes>> offsets;
  std::vector<Bytes, DefaultInitAllocator<Bytes>> sizes;  // planned (rounded) size
  Bytes heap_size = 0;                                    // max(offset + size): the arena the plan needs
  Bytes lower_bound = 0;                                  // most planned bytes live at once: no placement needs less
};

// The bytes a request occupies in the plan: rounded up to `alignment` (a power of two), and at
// least one alignment unit.
Bytes planned_size(Bytes requested, Bytes alignment);

// Greedy-by-size best-fit offsets for `requests` (live intervals [begin, end), begin < end).
GreedyPlan plan_greedy_by_size(const std::vector<PlannedRequest>& requests, Bytes alignment);

}  // namespace fraglab::offline
