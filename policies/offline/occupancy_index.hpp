// OccupancyIndex: "which offset ranges are taken at some moment of this time interval?" for the
// greedy planner, without visiting every placed buffer that overlaps the interval.
//
// Time is a range of slots [0, slots). A perfect binary segment tree over the slots (heap
// numbering: root 1, children 2v and 2v + 1, slot s at leaf L + s); each node covers a slot range
// and holds sets of occupied offset ranges, each sorted, disjoint and merged (touching or
// overlapping runs become one run, so a set is a union of buffers, usually of few runs):
//  - own: the buffers whose slot range covers the node's whole range and none of its ancestors'
//    (the node is one of the O(log n) canonical pieces of the buffer's range);
//  - below: the union of every buffer stored in the node's subtree (own included): the buffers
//    live somewhere in the node's range, except those held by an ancestor (for a leaf: own);
//  - cover (upper levels only, a cache): the union of own over the node and its ancestors: every
//    buffer live during the node's whole range.
// A buffer live somewhere in a query range Q is held either by a node only partly inside Q (its
// own buffers cover all of it, hence part of Q) or inside the subtree of a canonical node of Q.
// The partial nodes are the top parts of the paths from the root to Q's first and last slot, so
// the answer is the cover of the deepest partial node of each path plus below of each canonical
// node: a handful of merged sets instead of every buffer live in Q (on training traces that is
// ~1000 buffers in ~20 runs).
//
// The cover cache is rebuilt lazily, top down along a query's paths: a node's cover is stale when
// its own set or its parent's cover changed since it was built (version counters). Deep nodes
// change too often between visits for a cache to pay, so below `cached_depth` (13 by default:
// best on the traces measured) the partial nodes' own sets are read one by one instead.
//
// Cost: insert and query touch O(log n) nodes, found by index arithmetic; a set insert is a
// binary search and a move of the tail of a small array (run_set_store.hpp); a query merges a
// few sorted sets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fraglab/types.hpp"
#include "offline/run_set_store.hpp"

namespace fraglab::offline {

class OccupancyIndex {
 public:
  static constexpr std::uint32_t kDefaultCachedDepth = 13;
  static constexpr std::uint32_t kMaxSlots = std::uint32_t{1} << 30;  // node ids stay 32-bit

  // Nodes at depth <= cached_depth (root: 0) keep a cover set: at most 2^(cached_depth + 1).
  explicit OccupancyIndex(std::uint32_t slots, std::uint32_t cached_depth = kDefaultCachedDepth);

  // [taken.begin, taken.end) is occupied during slots [first, last) (first < last <= slots).
  void insert(std::uint32_t first, std::uint32_t last, OffsetRun taken);
  // The offsets occupied at some slot of [first, last), as sorted, disjoint, non-touching runs.
  // The reference stays valid until the next call. (Not const: refreshes the cover cache.)
  const std::vector<OffsetRun>& occupied(std::uint32_t first, std::uint32_t last);

 private:
  using RunSet = std::vector<OffsetRun>;
  using NodeId = std::uint32_t;

  // True when node `v` at `height` (leaves: 0) covers only slots of [first, last).
  bool inside(NodeId v, std::uint32_t height, std::uint32_t first, std::uint32_t last) const {
    const std::uint64_t begin = (std::uint64_t{v} << height) - leaves_;
    const std::uint64_t end = (std::uint64_t{v + 1} << height) - leaves_;
    return first <= begin && end <= last;
  }
  bool cached(NodeId v) const { return v < covers_.size(); }
  // A leaf's subtree is itself: its below set is its own set (kept once).
  RunSetStore::Handle below(NodeId v) const { return v >= leaves_ ? nodes_[v].own : nodes_[v].below; }
  // Adds the partial nodes of the path from the root to `leaf` (top part, depth < stop_height's)
  // to the answer; `other_leaf`'s path was already added where the two paths coincide.
  void add_partial_path(NodeId leaf, NodeId other_leaf, std::uint32_t first, std::uint32_t last);
  void add_to_answer(std::span<const OffsetRun> set);
  const RunSet& fresh_cover(NodeId v);
  static void merge_union(std::span<const OffsetRun> a, std::span<const OffsetRun> b, RunSet& out);

  std::uint32_t slots_;
  std::uint32_t leaves_;  // bit_ceil(slots): slot s is leaf leaves_ + s
  std::uint32_t height_;  // the root's height: log2(leaves_)
  struct NodeSets {  // a node's own and below sets in sets_ (together: one cache line to touch)
    RunSetStore::Handle own = RunSetStore::kNone;
    RunSetStore::Handle below = RunSetStore::kNone;
  };
  std::vector<NodeSets> nodes_;  // by node id
  RunSetStore sets_;
  struct Cover {
    RunSet runs;
    std::uint32_t own_version = 0;          // bumped by every insert into the node's own set
    std::uint32_t version = 0;              // bumped by every rebuild of runs
    std::uint32_t built_own_version = 0;    // own_version when runs was built
    std::uint32_t built_parent_version = 0;  // the parent's version then
  };
  std::vector<Cover> covers_;  // by node id, for the cached levels
  // The answer of the query in progress, and a buffer to merge into.
  RunSet answer_;
  RunSet merged_;
};

}  // namespace fraglab::offline
