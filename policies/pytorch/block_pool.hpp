// Blocks, segments and the pools of free blocks (allocator-model §2, §3.1, §4).
//
// Invariants:
//  - a Node is one block: a contiguous range of one segment; the blocks of a segment form a
//    doubly linked address-ordered chain through prev/next (a whole segment has neither);
//  - a node is in exactly one of: its pool's free set (free, mapped), its pool's unmapped set
//    (expandable address space without pages), or neither (allocated or pending free);
//  - the free set is ordered by (stream, size, address) — PyTorch's BlockComparatorSize — so a
//    lower_bound on (stream, rounded, 0) is the best fit with ties to the lowest address (§3.1);
//  - the unmapped set is ordered by (stream, address) — BlockComparatorAddress (§7.1);
//  - a node's `gc_base` is its pool's get_free_block clock when it last entered the free set;
//    its age is clock - gc_base (§3.3).
// Node storage is an arena of recycled slots, so steady-state replay allocates nothing.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "pytorch/constants.hpp"

namespace fraglab::cca {

using NodeId = std::uint32_t;
inline constexpr NodeId kNil = 0xffffffffu;

struct Node {
  Addr addr = 0;
  Bytes size = 0;
  Bytes requested = 0;  // the last request served by this block (stale when free)
  StreamId stream = 0;
  std::uint64_t gc_base = 0;
  NodeId prev = kNil;
  NodeId next = kNil;
  std::int32_t segment = -1;  // expandable segment index; -1 = part of a cudaMalloc'd segment
  std::uint32_t serial = 0;   // allocation serial: the Block cookie carries it (stale frees)
  PoolKind pool = PoolKind::Large;
  bool allocated = false;
  bool pending = false;  // free requested, not yet completed: PyTorch's event_count > 0
  bool mapped = true;
  bool live = false;

  bool is_split() const { return prev != kNil || next != kNil; }
  bool expandable() const { return segment >= 0; }
  // PyTorch's "allocatable"/merge condition: not handed out and no outstanding events.
  bool reusable() const { return !allocated && !pending; }
};

class NodeArena {
 public:
  NodeId create() {
    NodeId id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
      nodes_[id] = Node{};
    } else {
      id = static_cast<NodeId>(nodes_.size());
      nodes_.emplace_back();
    }
    nodes_[id].live = true;
    return id;
  }
  void destroy(NodeId id) {
    nodes_[id].live = false;
    free_.push_back(id);
  }
  Node& operator[](NodeId id) { return nodes_[id]; }
  const Node& operator[](NodeId id) const { return nodes_[id]; }
  std::size_t slots() const { return nodes_.size(); }

 private:
  std::vector<Node> nodes_;
  std::vector<NodeId> free_;
};

struct FreeKey {
  StreamId stream;
  Bytes size;
  Addr addr;
};
struct FreeEntry {
  StreamId stream;
  Bytes size;
  Addr addr;
  NodeId id;
};
inline bool key_less(const FreeEntry& a, const FreeKey& b) {
  if (a.stream != b.stream) return a.stream < b.stream;
  if (a.size != b.size) return a.size < b.size;
  return a.addr < b.addr;
}

// An ordered set of free blocks: a sorted sequence of small sorted chunks (a flat B-tree of
// height two). lower_bound is two binary searches; insert/erase move at most one chunk.
class FreeBlockSet {
 public:
  struct Pos {
    std::uint32_t chunk;
    std::uint32_t index;
    bool operator==(const Pos&) const = default;
  };

  void insert(const FreeEntry& entry);
  void erase(const FreeKey& key);  // the key must be present
  // Erases the entry at p (not end()), for callers that already found it: saves the search.
  // Positions after p in its chunk, and every later chunk's positions, are invalidated.
  void erase(Pos p);
  Pos lower_bound(const FreeKey& key) const;
  Pos begin() const { return Pos{0, 0}; }
  Pos end() const { return Pos{static_cast<std::uint32_t>(chunks_.size()), 0}; }
  bool is_end(Pos p) const { return p.chunk >= chunks_.size(); }
  Pos next(Pos p) const {
    if (++p.index >= chunks_[p.chunk].size()) return Pos{p.chunk + 1, 0};
    return p;
  }
  Pos prev(Pos p) const {  // p must not be begin()
    if (p.index > 0) return Pos{p.chunk, p.index - 1};
    return Pos{p.chunk - 1, static_cast<std::uint32_t>(chunks_[p.chunk - 1].size() - 1)};
  }
  const FreeEntry& at(Pos p) const { return chunks_[p.chunk][p.index]; }
  std::size_t size() const { return size_; }
  // Appends every entry, in order (callers walk a copy when the walk frees blocks).
  void copy_to(std::vector<FreeEntry>& out) const {
    for (const auto& c : chunks_) out.insert(out.end(), c.begin(), c.end());
  }

 private:
  // Small chunks keep the memmove of an insert/erase short; 16 measured fewest CPU seconds on
  // lm2.7b-ctx128 (callgrind: 128 -> 16 cut replay instructions by ~14 %, 8 gained <1 % more).
  static constexpr std::size_t kMaxChunk = 16;
  std::size_t chunk_for(const FreeKey& key) const;  // first chunk whose last entry >= key
  std::vector<std::vector<FreeEntry>> chunks_;      // never holds an empty chunk
  std::size_t size_ = 0;
};

// One of PyTorch's BlockPools: the small or the large pool.
struct BlockPool {
  explicit BlockPool(PoolKind k) : kind(k) {}
  PoolKind kind;
  FreeBlockSet blocks;                                   // free mapped blocks
  std::map<std::pair<StreamId, Addr>, NodeId> unmapped;  // expandable address space, no pages
  std::uint64_t get_free_blocks_call_count = 0;          // the GC clock (§3.3)
};

inline FreeKey key_of(const Node& n) { return FreeKey{n.stream, n.size, n.addr}; }

}  // namespace fraglab::cca
