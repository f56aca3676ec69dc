// RunSetStore: many small sets of offset runs in one pooled array, for the OccupancyIndex.
//
// A set is a sorted vector of disjoint, non-touching runs [begin, end); add_run merges a new run
// with the runs it touches or overlaps, so a set is the union of everything added to it. The
// index keeps two sets per tree node (a million sets on a million-event trace, most of them a
// few runs), so sets live in blocks of one pool rather than in a std::vector each: a set that
// outgrows its block moves to one twice as large and leaves the old block on a free list of its
// size class for the next set that grows. No allocation per set, and a set's runs are contiguous.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "fraglab/types.hpp"

namespace fraglab::offline {

struct OffsetRun {
  Bytes begin = 0;
  Bytes end = 0;  // exclusive
};

class RunSetStore {
 public:
  using Handle = std::uint32_t;
  static constexpr Handle kNone = std::numeric_limits<Handle>::max();  // the empty set

  std::span<const OffsetRun> runs(Handle set) const {
    if (set == kNone) return {};
    const Header& h = headers_[set];
    return {pool_.data() + h.start, h.size};
  }

  // Adds [run.begin, run.end) to the set (creating it when `set` is kNone). False when the set
  // held it already (and is unchanged).
  bool add_run(Handle& set, OffsetRun run) {
    if (set == kNone) {
      set = static_cast<Handle>(headers_.size());
      headers_.push_back(Header{take_block(0), 0, 0});
    }
    Header& h = headers_[set];
    OffsetRun* const base = pool_.data() + h.start;
    // The first run that ends at or after run.begin touches or overlaps it, as may the ones after
    // it up to the first that starts past run.end; all of them merge into one.
    OffsetRun* const end = base + h.size;
    OffsetRun* const first =
        std::lower_bound(base, end, run.begin, [](const OffsetRun& r, Bytes begin) { return r.end < begin; });
    OffsetRun* last = first;
    while (last != end && last->begin <= run.end) {
      run.begin = std::min(run.begin, last->begin);
      run.end = std::max(run.end, last->end);
      ++last;
    }
    if (first != last) {  // merged: one run replaces [first, last)
      if (last - first == 1 && first->begin == run.begin && first->end == run.end) return false;
      *first = run;
      std::copy(last, end, first + 1);
      h.size -= static_cast<std::uint32_t>(last - first - 1);
      return true;
    }
    const std::uint32_t at = static_cast<std::uint32_t>(first - base);
    if (h.size == capacity(h.size_class)) grow(h);  // moves the runs (and may move pool_)
    OffsetRun* const runs = pool_.data() + h.start;
    std::copy_backward(runs + at, runs + h.size, runs + h.size + 1);
    runs[at] = run;
    ++h.size;
    return true;
  }

 private:
  struct Header {
    std::uint32_t start;       // index of the block in pool_
    std::uint32_t size;        // runs in use
    std::uint32_t size_class;  // the block holds capacity(size_class) runs
  };
  static constexpr std::uint32_t kFirstCapacity = 2;
  static std::uint32_t capacity(std::uint32_t size_class) { return kFirstCapacity << size_class; }

  std::uint32_t take_block(std::uint32_t size_class) {
    if (size_class < free_blocks_.size() && !free_blocks_[size_class].empty()) {
      const std::uint32_t start = free_blocks_[size_class].back();
      free_blocks_[size_class].pop_back();
      return start;
    }
    const std::size_t start = pool_.size();
    if (start + capacity(size_class) > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("offline: the occupancy index outgrew its 2^32-run pool");
    }
    pool_.resize(start + capacity(size_class));
    return static_cast<std::uint32_t>(start);
  }

  void grow(Header& h) {
    const std::uint32_t old_start = h.start;
    const std::uint32_t old_class = h.size_class;
    const std::uint32_t new_start = take_block(old_class + 1);
    std::copy(pool_.begin() + old_start, pool_.begin() + old_start + h.size, pool_.begin() + new_start);
    if (free_blocks_.size() <= old_class) free_blocks_.resize(old_class + 1);
    free_blocks_[old_class].push_back(old_start);
    h.start = new_start;
    h.size_class = old_class + 1;
  }

  std::vector<Header> headers_;
  std::vector<OffsetRun> pool_;
  std::vector<std::vector<std::uint32_t>> free_blocks_;  // block starts by size class
};

}  // namespace fraglab::offline
