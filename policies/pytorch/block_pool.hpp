// Blocks, segments and the pools of free blocks (allocator-model §2, §3.1, §4).
//
// Invariants:
//  - a Node is one block: a contiguous range of one segment; the blocks of a segment form a
//    doubly linked address-ordered chain through prev/next (a whole segment has neither);
//  - a node is in exactly one of: its pool's free set (free, mapped), its pool's unmapped set
//    (expandable address space without pages), or neither (allocated or pending free);
//  - the free set is ordered by (stream, size, address) — PyTorch's BlockComparatorSize — so a
//    lower_bound on (rounded, 0) in the stream's set is the best fit with ties to the lowest
//    address (§3.1);
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

// (size, address) as one 128-bit number: comparing two is one wide compare, and the numeric
// order is the (size, address) order exactly, for every 64-bit size and address.
__extension__ typedef unsigned __int128 SizeAddr;
inline SizeAddr size_addr(Bytes size, Addr addr) { return (SizeAddr{size} << 64) | addr; }

// The free blocks of one stream, ordered by (size, address): a sorted sequence of small sorted
// chunks (a flat B-tree of height two). The last key of every chunk sits in one contiguous
// array, so lower_bound is a binary search over it and one inside a chunk; insert/erase move
// at most one chunk's tail. A full chunk splits in two; an empty one is dropped.
class StreamBlocks {
 public:
  struct Pos {
    std::uint32_t chunk;  // ordinal in the sequence
    std::uint32_t index;
    bool operator==(const Pos&) const = default;
  };

  // The first entry not below `key` (end() if none).
  Pos lower_bound(SizeAddr key) const {
    const std::uint32_t c = chunk_for(key);
    if (c == last_.size()) return end();
    return Pos{c, index_in(chunk(c), key)};
  }
  void insert(SizeAddr key, NodeId id);
  // Erases the entry at p (not end()). Positions after p in its chunk, and every later chunk's
  // positions, are invalidated; positions before p stay valid.
  void erase(Pos p);
  void erase(SizeAddr key);  // the key must be present
  // Files `key` in place of the entry at p when `key` sorts between the entries before and
  // after p (so the order holds): the erase of p and the insert of key in one write. False (and
  // nothing changed) otherwise.
  bool replace(Pos p, SizeAddr key, NodeId id) {
    if (p != begin()) {
      const Pos before = prev(p);
      if (!(chunk(before.chunk).keys[before.index] < key)) return false;
    }
    const Pos after = next(p);
    if (!is_end(after) && !(key < chunk(after.chunk).keys[after.index])) return false;
    Chunk& ch = chunk(p.chunk);
    ch.keys[p.index] = key;
    ch.ids[p.index] = id;
    if (p.index + 1 == ch.n) last_[p.chunk] = key;
    return true;
  }

  Pos begin() const { return Pos{0, 0}; }
  Pos end() const { return Pos{static_cast<std::uint32_t>(last_.size()), 0}; }
  bool is_end(Pos p) const { return p.chunk >= last_.size(); }
  Pos next(Pos p) const {
    if (++p.index >= chunk(p.chunk).n) return Pos{p.chunk + 1, 0};
    return p;
  }
  Pos prev(Pos p) const {  // p must not be begin()
    if (p.index > 0) return Pos{p.chunk, p.index - 1};
    return Pos{p.chunk - 1, chunk(p.chunk - 1).n - 1};
  }
  Bytes size_at(Pos p) const { return static_cast<Bytes>(chunk(p.chunk).keys[p.index] >> 64); }
  Addr addr_at(Pos p) const { return static_cast<Addr>(chunk(p.chunk).keys[p.index]); }
  NodeId id_at(Pos p) const { return chunk(p.chunk).ids[p.index]; }
  std::size_t size() const { return size_; }
  void copy_to(StreamId stream, std::vector<FreeEntry>& out) const;

 private:
  // Chunks of 8 keep the tail moves short (lm2.7b-ctx128, callgrind: 16 -> 8 cut the replay by
  // 5 %; 4 gained under 1 % more while every split moves a longer top-level array).
  static constexpr std::uint32_t kMaxChunk = 8;
  struct Chunk {
    SizeAddr keys[kMaxChunk];
    NodeId ids[kMaxChunk];
    std::uint32_t n = 0;
  };
  const Chunk& chunk(std::uint32_t c) const { return slots_[order_[c]]; }
  Chunk& chunk(std::uint32_t c) { return slots_[order_[c]]; }
  std::uint32_t chunk_for(SizeAddr key) const {  // the first chunk whose last key >= key
    const SizeAddr* last = last_.data();
    std::uint32_t lo = 0;
    auto n = static_cast<std::uint32_t>(last_.size());
    while (n > 0) {
      const std::uint32_t half = n / 2;
      if (last[lo + half] < key) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }
  static std::uint32_t index_in(const Chunk& ch, SizeAddr key) {
    std::uint32_t lo = 0;
    std::uint32_t n = ch.n;
    while (n > 0) {
      const std::uint32_t half = n / 2;
      if (ch.keys[lo + half] < key) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }
  std::uint32_t new_slot();

  std::vector<SizeAddr> last_;        // the last key of each chunk, in sequence order
  std::vector<std::uint32_t> order_;  // the slot of each chunk, in sequence order
  std::vector<Chunk> slots_;          // chunk storage; never holds an empty chunk in order_
  std::vector<std::uint32_t> free_slots_;
  std::size_t size_ = 0;
};

// A pool's free blocks, ordered by (stream, size, address): one StreamBlocks per stream, kept
// in stream order (streams are few). Every best-fit search stays inside one stream (§3.1), so
// callers take the stream's set and work on it.
class FreeBlockSet {
 public:
  // The stream's blocks, or nullptr when it never had any.
  const StreamBlocks* find(StreamId stream) const {
    for (const auto& [s, blocks] : streams_) {
      if (s == stream) return &blocks;
    }
    return nullptr;
  }
  StreamBlocks* find(StreamId stream) {
    return const_cast<StreamBlocks*>(static_cast<const FreeBlockSet*>(this)->find(stream));
  }
  void insert(const FreeEntry& entry) {
    StreamBlocks* blocks = find(entry.stream);
    (blocks != nullptr ? *blocks : of(entry.stream)).insert(size_addr(entry.size, entry.addr), entry.id);
  }
  void erase(const FreeKey& key) { find(key.stream)->erase(size_addr(key.size, key.addr)); }  // must be present
  // The id filed under `key`, or kNil.
  NodeId id_of(const FreeKey& key) const;
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& s : streams_) n += s.second.size();
    return n;
  }
  // Appends every entry, in (stream, size, address) order (callers walk a copy when the walk
  // frees blocks).
  void copy_to(std::vector<FreeEntry>& out) const {
    for (const auto& [s, blocks] : streams_) blocks.copy_to(s, out);
  }

 private:
  StreamBlocks& of(StreamId stream);                        // adds the stream (not yet present)
  std::vector<std::pair<StreamId, StreamBlocks>> streams_;  // sorted by stream
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
