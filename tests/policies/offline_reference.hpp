// The greedy-by-size plan transcribed from its definition (policies/offline/greedy_plan.hpp),
// every placed request checked against every other: the reference the planner's faster index
// must match offset for offset.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "fraglab/planned_requests.hpp"
#include "fraglab/types.hpp"

namespace fraglab::test {

struct ReferencePlan {
  std::vector<Bytes> sizes;
  std::vector<Bytes> offsets;
  Bytes heap_size = 0;
};

// Sizes round up to `alignment` (at least one unit); order: size desc, lifetime desc, request
// order; each request goes to the smallest gap of at least its size below the top of the placed
// requests whose [begin, end) overlaps its own (the lowest offset among equal gaps), else to that
// top.
inline ReferencePlan reference_plan(const std::vector<PlannedRequest>& requests, Bytes alignment) {
  ReferencePlan plan;
  plan.sizes.resize(requests.size());
  std::vector<std::size_t> order(requests.size());
  for (std::size_t k = 0; k < requests.size(); ++k) {
    plan.sizes[k] = std::max<Bytes>(1, (requests[k].size + alignment - 1) / alignment) * alignment;
    order[k] = k;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::uint64_t life_a = requests[a].end - requests[a].begin;
    const std::uint64_t life_b = requests[b].end - requests[b].begin;
    if (plan.sizes[a] != plan.sizes[b]) return plan.sizes[a] > plan.sizes[b];
    if (life_a != life_b) return life_a > life_b;
    return a < b;
  });
  plan.offsets.assign(requests.size(), 0);
  std::vector<std::size_t> placed;
  std::vector<std::pair<Bytes, Bytes>> taken;
  for (const std::size_t k : order) {
    taken.clear();
    for (const std::size_t p : placed) {
      if (requests[p].begin < requests[k].end && requests[k].begin < requests[p].end) {
        taken.emplace_back(plan.offsets[p], plan.offsets[p] + plan.sizes[p]);
      }
    }
    std::sort(taken.begin(), taken.end());
    Bytes top = 0;
    Bytes best_gap = std::numeric_limits<Bytes>::max();
    std::optional<Bytes> best;
    for (const auto& [begin, end] : taken) {
      if (begin > top && begin - top >= plan.sizes[k] && begin - top < best_gap) {
        best_gap = begin - top;
        best = top;
      }
      top = std::max(top, end);
    }
    plan.offsets[k] = best.value_or(top);
    plan.heap_size = std::max(plan.heap_size, plan.offsets[k] + plan.sizes[k]);
    placed.push_back(k);
  }
  return plan;
}

}  // namespace fraglab::test
