// Indices of a start state's segments or allocations in address order (allocator-model §12.2).
//
// InitialState keeps both sorted by address (the snapshot reader writes them so), which makes the
// sort every run paid a no-op: when the addresses strictly ascend, 0, 1, 2, ... is what std::sort
// would return, so the sort is skipped. Otherwise (a hand-written trace; equal addresses, whose
// order std::sort leaves unspecified) the sort runs as before, so the order never differs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace fraglab::cca {

template <typename Item>
void sort_by_address(std::vector<std::size_t>& order, const std::vector<Item>& items) {
  order.resize(items.size());
  std::iota(order.begin(), order.end(), 0);
  const bool ascending = std::adjacent_find(items.begin(), items.end(), [](const Item& a, const Item& b) {
                           return a.addr >= b.addr;
                         }) == items.end();
  if (!ascending) {
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return items[a].addr < items[b].addr; });
  }
}

template <typename Item>
std::vector<std::size_t> by_address(const std::vector<Item>& items) {
  std::vector<std::size_t> order;
  sort_by_address(order, items);
  return order;
}

}  // namespace fraglab::cca
