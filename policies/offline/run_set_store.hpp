// RunSetStore: many small sets of offset runs in one pooled array, for the OccupancyIndex.
//
// A set is a sorted array of disjoint, non-touching runs [begin, end); add_run merges a new run
// with the runs it touches or overlaps, so a set is the union of everything added to it. The
// index keeps two or three sets per tree node (a million sets on a million-event trace, most of
// them a few runs), so sets live in blocks of one pool rather than in a std::vector each: a set
// that outgrows its block moves to one twice as large and leaves the old block on a free list of
// its size class for the next set that grows. No allocation per set, and a set's runs are
// contiguous.
//
// A RunSet is only a place in the pool (start, size, capacity), held by its owner (the index's
// node array) so that reading a set is one load, not a handle lookup. Blocks never move while
// their set lives, but the pool itself may reallocate when it grows: keep RunSets, not pointers,
// across a call that can take a block (add_run, assign_union). The pool is reserved up front for
// what a training trace needs (the index's guess) and is never written before use, so neither
// growing nor zero-filling it shows up in the plan's time.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "fraglab/types.hpp"

namespace fraglab::offline {

// (No member initializers: a trivial type, so the pool can be allocated without being written.)
struct OffsetRun {
  Bytes begin;
  Bytes end;  // exclusive
};

// A set's place in the pool: runs pool[start, start + size) of a block of `capacity` runs
// (capacity 0: the empty set before its first run, with no block).
struct RunSet {
  std::uint32_t start = 0;
  std::uint32_t size = 0;
  std::uint32_t capacity = 0;

  bool empty() const { return size == 0; }
};

// out = a ∪ b for sorted sets of disjoint non-touching runs; `out` has room for |a| + |b| runs
// and overlaps neither input. Returns the number of runs written.
// kNonEmpty: the caller knows neither set is empty (the index's query merges: their parts are
// non-empty sets), so neither is tested.
template <bool kNonEmpty = false>
inline std::size_t merge_union(std::span<const OffsetRun> a, std::span<const OffsetRun> b, OffsetRun* out) {
  const OffsetRun* i = a.data();
  const OffsetRun* i_end = i + a.size();
  const OffsetRun* j = b.data();
  const OffsetRun* j_end = j + b.size();
  if constexpr (!kNonEmpty) {
    if (i == i_end) return static_cast<std::size_t>(std::copy(j, j_end, out) - out);
    if (j == j_end) return static_cast<std::size_t>(std::copy(i, i_end, out) - out);
  }
  // The runs of both sets in order of begin; `run` is the output run in progress: a next run that
  // begins at or below its end touches or overlaps it and joins it, one that begins above it
  // starts the next output run (a set's own runs never touch each other, but a run of the other
  // set can bridge them).
  OffsetRun* o = out;
  OffsetRun run = i->begin <= j->begin ? *i++ : *j++;
  const auto take = [&](const OffsetRun& next) {
    if (next.begin > run.end) {
      *o++ = run;
      run = next;
    } else {
      run.end = std::max(run.end, next.end);
    }
  };
  // Runs of equal begin may come in either order (the second joins the first), so the set whose
  // last run begins first can be `i`: it runs out first (`j` keeps its last run, which begins at
  // or after every run of `i`: taken only once `i` is done), and the loop need not watch `j`.
  // (The first run taken above was the lowest of both sets, so a set it emptied is that one.)
  if (i_end[-1].begin > j_end[-1].begin) {
    std::swap(i, j);
    std::swap(i_end, j_end);
  }
  while (i != i_end) take(i->begin <= j->begin ? *i++ : *j++);
  // The rest of the other set: the runs that touch `run` join it, the others begin past it and
  // are copied as they are.
  for (; j != j_end && j->begin <= run.end; ++j) run.end = std::max(run.end, j->end);
  *o++ = run;
  o = std::copy(j, j_end, o);
  return static_cast<std::size_t>(o - out);
}

// merge_union(few, many, out) for a `few` much smaller than `many` (either may be empty): the
// runs of `many` between two runs of `few` are copied as they are once the first of them has
// joined the output so far (a set's runs never touch each other, so none of the rest touches it,
// and only the last can touch the next run of `few`): a copy and one comparison per run instead
// of merge_union's choice of the next run and its test against the run in progress.
inline std::size_t merge_union_sparse(std::span<const OffsetRun> few, std::span<const OffsetRun> many, OffsetRun* out) {
  const OffsetRun* j = many.data();
  const OffsetRun* const j_end = j + many.size();
  OffsetRun* o = out;
  // Appends a run that begins at or above every run written: it joins the last when it touches it.
  const auto emit = [&](const OffsetRun& run) {
    if (o != out && run.begin <= o[-1].end) {
      o[-1].end = std::max(o[-1].end, run.end);
    } else {
      *o++ = run;
    }
  };
  // The runs of `many` that touch the last run written join it; returns with j past them.
  const auto absorb = [&] {
    for (; j != j_end && j->begin <= o[-1].end; ++j) o[-1].end = std::max(o[-1].end, j->end);
  };
  for (const OffsetRun& next : few) {
    if (j != j_end && j->begin <= next.begin) {
      emit(*j++);
      absorb();
      // (Each begins past the one before.) When a run of `many` begins past `next`, the copy stops
      // there without watching the end: one comparison per run copied instead of two.
      if (j != j_end && j_end[-1].begin > next.begin) {
        for (; j->begin <= next.begin; ++j) *o++ = *j;
      } else {
        for (; j != j_end; ++j) *o++ = *j;
      }
    }
    emit(next);
  }
  if (o != out) absorb();
  o = std::copy(j, j_end, o);
  return static_cast<std::size_t>(o - out);
}

// merge_union(a, b, out), by merge_union_sparse when one set has at most a quarter of the other's
// runs (on lm2.7b, 1/2 and 1/8 took more instructions, 1/3 to 1/5 about as few). The covers'
// rebuilds use it (a parent's long cover with a node's few own runs); in the queries' pairwise
// merges it took more (+39 k to +115 k on lm2.7b): there the sets are closer in size.
inline std::size_t merge_union_sized(std::span<const OffsetRun> a, std::span<const OffsetRun> b, OffsetRun* out) {
  constexpr std::size_t kSparse = 4;
  if (a.size() * kSparse <= b.size()) return merge_union_sparse(a, b, out);
  if (b.size() * kSparse <= a.size()) return merge_union_sparse(b, a, out);
  return merge_union(a, b, out);
}

// The offset best fit picks given the offsets taken (sorted disjoint runs): the start of the
// smallest gap of at least `size` bytes below the top run, the lowest offset among equal gaps;
// else the end of the top run (greedy_plan.hpp, step 3).
// The choice both scans below make, gap by gap in offset order: the smallest gap that holds
// `size`, the first (lowest) among equal ones; none, the offset above the last run.
class BestGap {
 public:
  explicit BestGap(Bytes size) : size_(size), bound_(size == 0 ? kAnyGap : Bytes{0} - size), best_excess_(bound_) {}
  // True when the gap is an exact fit: no later gap can be smaller, and an equal one lies higher,
  // so the choice is made and the scan can stop.
  bool consider(Bytes gap_begin, Bytes gap) {
    // One comparison per gap for both tests, fits and smaller than the best so far: a gap too
    // small wraps around to gap - size + 2^64 >= 2^64 - size, the starting bound, while the
    // excess of a gap that fits is below it (gap < 2^64).
    const Bytes excess = gap - size_;
    if (excess < best_excess_) {
      best_excess_ = excess;
      best_offset_ = gap_begin;
      return excess == 0;
    }
    return false;
  }
  Bytes offset(Bytes top) const { return best_excess_ != bound_ ? best_offset_ : top; }

 private:
  static constexpr Bytes kAnyGap = std::numeric_limits<Bytes>::max();  // (size 0: every gap fits)
  Bytes size_;
  Bytes bound_;        // 2^64 - size: above the excess of every gap that fits, at most a misfit's
  Bytes best_excess_;  // gap - size of the best gap so far; bound_ before the first
  Bytes best_offset_ = 0;
};

inline Bytes best_fit_in(std::span<const OffsetRun> taken, Bytes size) {
  BestGap best(size);
  Bytes gap_begin = 0;
  for (const OffsetRun& run : taken) {
    if (best.consider(gap_begin, run.begin - gap_begin)) return gap_begin;
    gap_begin = run.end;
  }
  return best.offset(gap_begin);
}

// best_fit_in(a ∪ b, size) without writing the union: the runs of both sets in order of begin,
// with `top` the highest end so far; a run that begins above `top` leaves the gap [top, begin)
// in the union (one that begins at or below it touches or overlaps the union so far). The same
// gaps in the same order as a scan of the merged set, hence the same choice.
// kNonEmpty: the caller knows neither set is empty (as merge_union's).
template <bool kNonEmpty = false>
inline Bytes best_fit_in_union(std::span<const OffsetRun> a, std::span<const OffsetRun> b, Bytes size) {
  const OffsetRun* i = a.data();
  const OffsetRun* i_end = i + a.size();
  const OffsetRun* j = b.data();
  const OffsetRun* j_end = j + b.size();
  BestGap best(size);
  Bytes top = 0;
  // True when an exact fit is found (at `top`, the gap's begin, left unchanged).
  const auto take = [&](const OffsetRun& run) {
    if (run.begin > top) {
      if (best.consider(top, run.begin - top)) return true;
      top = run.end;
    } else {
      top = std::max(top, run.end);
    }
    return false;
  };
  // As in merge_union: `i` is the set whose last run begins first (runs of equal begin leave the
  // same gaps in either order), so it runs out first and the loop need not watch `j`; then the
  // rest of `j`.
  if (kNonEmpty || (i != i_end && j != j_end)) {
    if (i_end[-1].begin > j_end[-1].begin) {
      std::swap(i, j);
      std::swap(i_end, j_end);
    }
    while (i != i_end) {
      if (take(i->begin <= j->begin ? *i++ : *j++)) return top;
    }
  } else if (j == j_end) {
    j = i;
    j_end = i_end;
  }
  for (; j != j_end; ++j) {
    if (take(*j)) return top;
  }
  return best.offset(top);
}

// Adds [run.begin, run.end) to a sorted set of disjoint, non-touching runs held in a vector.
inline void add_run(std::vector<OffsetRun>& set, OffsetRun run) {
  // The runs from the first that ends at or after run.begin to the last that starts at or before
  // run.end touch or overlap it: they and it become one run.
  const auto first =
      std::lower_bound(set.begin(), set.end(), run.begin, [](const OffsetRun& r, Bytes b) { return r.end < b; });
  auto last = first;
  while (last != set.end() && last->begin <= run.end) ++last;
  if (first == last) {
    set.insert(first, run);
    return;
  }
  first->begin = std::min(first->begin, run.begin);
  first->end = std::max(last[-1].end, run.end);
  set.erase(first + 1, last);
}

class RunSetStore {
 public:
  // Room for `expected_runs` before the pool first grows (memory only: nothing is written).
  explicit RunSetStore(std::size_t expected_runs) { reserve(std::max<std::size_t>(expected_runs, kFirstCapacity)); }

  std::span<const OffsetRun> runs(const RunSet& set) const { return {pool_.get() + set.start, set.size}; }

  // Adds [run.begin, run.end) to the set. False when the set held it already (and is unchanged).
  // Inlined into the index's insert walks (~9 calls per planned request: the call and the saved
  // registers were ~15% of its cost); growing a block stays out of line (move_to_block).
  [[gnu::always_inline]] bool add_run(RunSet& set, OffsetRun run) {
    OffsetRun* const base = pool_.get() + set.start;
    OffsetRun* const end = base + set.size;
    // The first run that ends at or after run.begin touches or overlaps it, as may the ones after
    // it up to the first that starts past run.end; all of them merge into one.
    OffsetRun* const first = first_ending_at_or_after(base, set.size, run.begin);
    if (first != end && first->begin <= run.end) {
      if (first->begin <= run.begin && run.end <= first->end) return false;  // held already
      OffsetRun* last = first + 1;                                           // past the runs that merge
      while (last != end && last->begin <= run.end) ++last;
      first->begin = std::min(first->begin, run.begin);
      first->end = std::max(last[-1].end, run.end);
      if (last != first + 1) {
        set.size -= static_cast<std::uint32_t>(last - first - 1);
        for (OffsetRun* to = first + 1; last != end; ++to, ++last) *to = *last;  // (a few runs: no std::copy)
      }
      return true;
    }
    // Touches nothing: a new run where `first` was (the runs from there on begin above it, those
    // before it end below it). The runs above it move up one by one, until the one below: a loop
    // that stops on the data, which the compiler does not turn into a memmove call; the shifts are
    // of a few runs, where that call costs more than the moves (-1 % of the replay's
    // instructions on lm2.7b).
    if (set.size == set.capacity && !take_first_block(set)) {
      move_to_block(set, std::max(kFirstCapacity, 2 * set.capacity));  // may move pool_
    }
    OffsetRun* const runs = pool_.get() + set.start;
    OffsetRun* to = runs + set.size;
    for (; to != runs && to[-1].begin > run.begin; --to) *to = to[-1];
    *to = run;
    ++set.size;
    return true;
  }

  // set = a ∪ b, where a and b are other sets of this store (neither is `set`, whose block they
  // may not share either).
  void assign_union(RunSet& set, const RunSet& a, const RunSet& b) {
    const std::uint32_t most = a.size + b.size;
    if (most > set.capacity) {  // a new block; the old contents need not come along
      set.size = 0;
      const std::uint32_t capacity = std::max(kFirstCapacity, std::bit_ceil(most));
      if (!take_first_block(set, capacity)) move_to_block(set, capacity);  // may move pool_
    }
    set.size = static_cast<std::uint32_t>(merge_union_sized(runs(a), runs(b), pool_.get() + set.start));
  }

  // Gives the set's block back (the set becomes empty, with no block).
  void release(RunSet& set) {
    if (set.capacity != 0) free_list(set.capacity).push_back(set.start);
    set = RunSet{};
  }

 private:
  // A set's first block: 4 runs, not 2, since most sets the planner grows pass 2 runs (on lm2.7b
  // a third fewer block moves, -0.7% of the replay's instructions; 8 saves little more for twice
  // the memory of the many small sets).
  static constexpr std::uint32_t kFirstCapacity = 4;

  // lower_bound by end over runs[0, size): a scan of a small set, up to 16 runs (most sets the
  // planner adds to hold a few runs: fewer instructions than the search, -1.5 % of the plan's on
  // lm2.7b; 16 rather than 8: -0.3 % more there, -0.2 % on the 75-step GPT2-XL trace), else a
  // binary search without branches on the data (the comparisons of a search over runs that
  // merge and split are unpredictable).
  static OffsetRun* first_ending_at_or_after(OffsetRun* runs, std::uint32_t size, Bytes begin) {
    if (size <= 16) {
      // The top run first: when it ends below `begin`, no run does; else the scan stops at it at
      // the latest, with no test of the end per step.
      if (size == 0 || runs[size - 1].end < begin) return runs + size;
      while (runs->end < begin) ++runs;
      return runs;
    }
    while (size > 1) {
      const std::uint32_t half = size / 2;
      runs += static_cast<std::uint32_t>(runs[half - 1].end < begin) * half;  // (a multiply, not a branch)
      size -= half;
    }
    return runs->end < begin ? runs + 1 : runs;
  }

  // A set's first block (of `capacity` runs, a power of two), in line (most sets the planner
  // grows are new, and each cover takes one): a freed block of that size, else the next one of
  // the pool when it has room. False: move_to_block must do it.
  bool take_first_block(RunSet& set, std::uint32_t capacity = kFirstCapacity) {
    if (set.capacity != 0) return false;
    std::vector<std::uint32_t>& reuse = free_list(capacity);
    if (!reuse.empty()) {
      set.start = reuse.back();
      reuse.pop_back();
    } else if (used_ + capacity <= capacity_) {  // (so the start fits 32 bits: see reserve's caller)
      set.start = static_cast<std::uint32_t>(used_);
      used_ += capacity;
    } else {
      return false;
    }
    set.capacity = capacity;
    return true;
  }

  std::vector<std::uint32_t>& free_list(std::uint32_t capacity) {
    return free_blocks_[static_cast<std::size_t>(std::countr_zero(capacity))];
  }

  // Moves the set's runs into a block of `capacity` runs (a power of two) and frees the old one.
  [[gnu::noinline]] void move_to_block(RunSet& set, std::uint32_t capacity) {
    std::vector<std::uint32_t>& reuse = free_list(capacity);
    std::uint32_t start = 0;
    if (!reuse.empty()) {
      start = reuse.back();
      reuse.pop_back();
    } else {
      if (used_ + capacity > std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error("offline: the occupancy index outgrew its 2^32-run pool");
      }
      if (used_ + capacity > capacity_) {  // (never past 2^32 runs, which take_first_block relies on)
        reserve(std::min<std::size_t>(std::max<std::size_t>(2 * capacity_, used_ + capacity),
                                      std::numeric_limits<std::uint32_t>::max()));
      }
      start = static_cast<std::uint32_t>(used_);
      used_ += capacity;
    }
    std::copy_n(pool_.get() + set.start, set.size, pool_.get() + start);
    if (set.capacity != 0) free_list(set.capacity).push_back(set.start);
    set.start = start;
    set.capacity = capacity;
  }

  void reserve(std::size_t runs) {
    auto bigger = std::make_unique_for_overwrite<OffsetRun[]>(runs);  // unwritten: OffsetRun is trivial
    if (used_ != 0) std::copy_n(pool_.get(), used_, bigger.get());
    pool_ = std::move(bigger);
    capacity_ = runs;
  }

  // The pool: blocks in [0, used_) of capacity_ runs.
  std::unique_ptr<OffsetRun[]> pool_;
  std::size_t used_ = 0;
  std::size_t capacity_ = 0;
  std::array<std::vector<std::uint32_t>, 32> free_blocks_;  // block starts by size class (log2 capacity)
};

}  // namespace fraglab::offline
