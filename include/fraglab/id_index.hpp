// IdIndex: allocation id -> an index (into the caller's own array) while the allocation lives,
// as a table by id for small ids and a hash map for the rest. Header-only, core layer: the replay
// (planned_requests.cpp) and the pytorch policy's start-state evidence (start_evidence.cpp) use it.
//
// Why a table: traces number their allocations densely (gen, convert and the snapshot reader
// count from 0), so a table indexed by id costs one load per lookup instead of a hash node made
// and dropped per allocation. Ids at or above the dense limit (hand-written traces may use any
// u64) go to a hash map seeded against chosen keys (fraglab/seeded_hash.hpp); both give the
// same answers, so the limit only decides the cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

class IdIndex {
 public:
  static constexpr std::size_t kNone = ~std::size_t{0};

  // Ids below `dense_limit` are kept in the table (grown on demand), the others hashed.
  explicit IdIndex(std::uint64_t dense_limit) : dense_limit_(dense_limit) {}
  // Sizes the table for ids below `n` (<= the dense limit) at once, when the largest id is known.
  void reserve_table(std::uint64_t n) { table_.assign(n, kNone); }

  // `id` now maps to `index` (replacing what it mapped to).
  void set(AllocId id, std::size_t index) {
    if (id < dense_limit_) {
      if (id >= table_.size()) table_.resize(id + 1, kNone);
      table_[id] = index;
    } else {
      hashed_[id] = index;
    }
  }
  // `id` maps to `index` unless it already maps to one (the first of the same id counts).
  void insert(AllocId id, std::size_t index) {
    if (id < dense_limit_) {
      if (id >= table_.size()) table_.resize(id + 1, kNone);
      if (table_[id] == kNone) table_[id] = index;
    } else {
      hashed_.emplace(id, index);
    }
  }
  // The index `id` maps to (kNone if none); `id` then maps to none.
  std::size_t take(AllocId id) {
    if (id < table_.size()) return std::exchange(table_[id], kNone);
    if (hashed_.empty()) return kNone;
    const auto it = hashed_.find(id);
    if (it == hashed_.end()) return kNone;
    const std::size_t index = it->second;
    hashed_.erase(it);
    return index;
  }

 private:
  std::uint64_t dense_limit_;
  std::vector<std::size_t> table_;  // by id, below the dense limit
  std::unordered_map<AllocId, std::size_t, SeededHash> hashed_;
};

}  // namespace fraglab
