// OccupancyIndex: see occupancy_index.hpp for the structure and why a query is correct.
#include "offline/occupancy_index.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace fraglab::offline {

OccupancyIndex::OccupancyIndex(std::uint32_t slots, std::uint32_t cached_depth)
    : slots_(slots),
      leaves_(std::bit_ceil(std::max<std::uint32_t>(std::min(slots, kMaxSlots), 1))),
      height_(static_cast<std::uint32_t>(std::countr_zero(leaves_))) {
  if (slots > kMaxSlots) throw std::length_error("offline: more time slots than the occupancy index holds (2^30)");
  nodes_.assign(2 * std::size_t{leaves_}, NodeSets{});
  const std::size_t cached = std::min<std::size_t>(nodes_.size(), std::size_t{2} << std::min<std::uint32_t>(cached_depth, 31));
  covers_.resize(cached);
}

// ---- insert -----------------------------------------------------------------------------------

void OccupancyIndex::insert(std::uint32_t first, std::uint32_t last, OffsetRun taken) {
  if (first >= last || last > slots_) throw std::logic_error("OccupancyIndex: bad slot range");
  if (taken.begin >= taken.end) return;
  // The canonical nodes: the bottom-up decomposition of [first, last).
  const auto store = [&](NodeId v) {
    sets_.add_run(nodes_[v].own, taken);
    if (v < leaves_) sets_.add_run(nodes_[v].below, taken);  // a leaf's below is its own set
    if (cached(v)) ++covers_[v].own_version;
  };
  for (NodeId lo = leaves_ + first, hi = leaves_ + last; lo < hi; lo >>= 1, hi >>= 1) {
    if (lo & 1) store(lo++);
    if (hi & 1) store(--hi);
  }
  // The partial nodes: the ancestors of the first and last leaf that are not inside the range,
  // bottom up. below(parent) holds below(child), so once a node's below set already held the run
  // (add_run false), so do all the nodes above it on that path: the walk stops there.
  const NodeId first_leaf = leaves_ + first;
  const NodeId last_leaf = leaves_ + last - 1;
  bool left_goes_on = true;
  bool right_goes_on = true;
  for (std::uint32_t height = 1; height <= height_ && (left_goes_on || right_goes_on); ++height) {
    const NodeId left = first_leaf >> height;
    const NodeId right = last_leaf >> height;
    if (right == left) {  // the paths have met (above a stopped walk, the run is held already)
      left_goes_on = left_goes_on && right_goes_on &&
                     (inside(left, height, first, last) || sets_.add_run(nodes_[left].below, taken));
      right_goes_on = left_goes_on;
      continue;
    }
    if (left_goes_on && !inside(left, height, first, last)) left_goes_on = sets_.add_run(nodes_[left].below, taken);
    if (right_goes_on && !inside(right, height, first, last)) right_goes_on = sets_.add_run(nodes_[right].below, taken);
  }
}

// ---- query ------------------------------------------------------------------------------------

const std::vector<OffsetRun>& OccupancyIndex::occupied(std::uint32_t first, std::uint32_t last) {
  if (first >= last || last > slots_) throw std::logic_error("OccupancyIndex: bad slot range");
  answer_.clear();
  for (NodeId lo = leaves_ + first, hi = leaves_ + last; lo < hi; lo >>= 1, hi >>= 1) {
    if (lo & 1) add_to_answer(sets_.runs(below(lo++)));
    if (hi & 1) add_to_answer(sets_.runs(below(--hi)));
  }
  const NodeId first_leaf = leaves_ + first;
  const NodeId last_leaf = leaves_ + last - 1;
  add_partial_path(first_leaf, 0, first, last);
  add_partial_path(last_leaf, first_leaf, first, last);
  return answer_;
}

void OccupancyIndex::add_partial_path(NodeId leaf, NodeId other_leaf, std::uint32_t first, std::uint32_t last) {
  // Top down (a cover is built from its parent's): the partial nodes are a prefix of the path.
  NodeId deepest_cached = 0;
  for (std::uint32_t height = height_ + 1; height-- > 0;) {
    const NodeId v = leaf >> height;
    if (inside(v, height, first, last)) break;
    const bool on_other_path = other_leaf != 0 && (other_leaf >> height) == v;
    if (cached(v)) {
      fresh_cover(v);
      // A node on both paths: the other path's deepest cached partial node is it or below it,
      // and that cover holds this one.
      deepest_cached = on_other_path ? 0 : v;
    } else if (!on_other_path) {
      add_to_answer(sets_.runs(nodes_[v].own));
    }
  }
  if (deepest_cached != 0) add_to_answer(covers_[deepest_cached].runs);
}

void OccupancyIndex::add_to_answer(std::span<const OffsetRun> set) {
  if (set.empty()) return;
  if (answer_.empty()) {
    answer_.assign(set.begin(), set.end());
    return;
  }
  merge_union(answer_, set, merged_);
  answer_.swap(merged_);
}

const OccupancyIndex::RunSet& OccupancyIndex::fresh_cover(NodeId v) {
  Cover& cover = covers_[v];
  const Cover* parent = v == 1 ? nullptr : &covers_[v / 2];
  const std::uint32_t parent_version = parent == nullptr ? 0 : parent->version;
  if (cover.built_own_version == cover.own_version && cover.built_parent_version == parent_version) return cover.runs;
  const std::span<const OffsetRun> parent_runs = parent == nullptr ? std::span<const OffsetRun>{} : parent->runs;
  merge_union(parent_runs, sets_.runs(nodes_[v].own), cover.runs);
  cover.built_own_version = cover.own_version;
  cover.built_parent_version = parent_version;
  ++cover.version;
  return cover.runs;
}

// ---- merging ----------------------------------------------------------------------------------

// out = a ∪ b, for sorted sets of disjoint non-touching runs.
void OccupancyIndex::merge_union(std::span<const OffsetRun> a, std::span<const OffsetRun> b, RunSet& out) {
  out.resize(a.size() + b.size());
  if (out.empty()) return;
  const OffsetRun* i = a.data();
  const OffsetRun* const i_end = i + a.size();
  const OffsetRun* j = b.data();
  const OffsetRun* const j_end = j + b.size();
  OffsetRun* o = out.data();
  // `run` is the output run being grown; the next input run (in begin order) extends it when it
  // touches or overlaps it, else `run` is done.
  OffsetRun run = (j == j_end || (i != i_end && i->begin <= j->begin)) ? *i++ : *j++;
  const auto take = [&](const OffsetRun& next) {
    if (next.begin <= run.end) {
      run.end = std::max(run.end, next.end);
    } else {
      *o++ = run;
      run = next;
    }
  };
  while (i != i_end && j != j_end) {
    const bool from_a = i->begin <= j->begin;
    take(from_a ? *i : *j);
    i += from_a ? 1 : 0;
    j += from_a ? 0 : 1;
  }
  while (i != i_end) take(*i++);
  while (j != j_end) take(*j++);
  *o++ = run;
  out.resize(static_cast<std::size_t>(o - out.data()));
}

}  // namespace fraglab::offline
