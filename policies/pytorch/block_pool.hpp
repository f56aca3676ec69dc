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
//  - the unmapped set is ordered by (stream, address) — BlockComparatorAddress (§7.1) — and keyed
//    by (stream, end address) (unmapped_key): the blocks of a stream are disjoint, so that is the
//    same order, and mapping pages at the low end of an unmapped block (§7.2) leaves its key as is;
//  - a node's `gc_base` is its pool's get_free_block clock when it last entered the free set;
//    its age is clock - gc_base (§3.3).
// Node storage is an arena of recycled slots, so steady-state replay allocates nothing.
#pragma once

#include <cassert>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/node_pool.hpp"
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
      slots_ = id + 1;
    }
    nodes_[id].live = true;
    return id;
  }
  // A slot for a node whose every field the caller writes (a split's remainder, §4.2): a
  // recycled slot is not filled with a fresh Node first.
  NodeId create_unfilled() {
    if (free_.empty()) return create();
    const NodeId id = free_.back();
    free_.pop_back();
    return id;
  }
  // Only a free node dies (lookup relies on it): neither allocated nor pending.
  void destroy(NodeId id) {
    assert(!nodes_[id].allocated && !nodes_[id].pending);
    nodes_[id].live = false;
    free_.push_back(id);
  }
  Node& operator[](NodeId id) { return nodes_[id]; }
  const Node& operator[](NodeId id) const { return nodes_[id]; }
  std::size_t slots() const { return slots_; }
  void reserve(std::size_t slots) { nodes_.reserve(slots); }

 private:
  std::vector<Node> nodes_;
  std::vector<NodeId> free_;
  // nodes_.size(), kept: a free checks its block's id against it (lookup), and one load is less
  // than the vector's end minus begin over the node size.
  std::uint32_t slots_ = 0;
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

// The free blocks of one stream, ordered by (size, address), indexed by size class (TLSF-like):
// class_of() maps sizes monotonically onto 8 classes per power of two, each class keeps its
// entries sorted by (size, address) in a small array, and a two-level occupancy bitmap finds the
// next non-empty class in a few instructions. The order over the whole set is the (size, address)
// order exactly: every size in a class is above every size in a lower class. So the best fit for
// a request (lower_bound on (rounded, 0), §3.1) is a search inside the request's class, or else
// the first entry of the next non-empty class; insert/erase move only the tail of one class.
class StreamBlocks {
 public:
  struct Pos {
    std::uint32_t cls;  // size class (kClasses = end)
    std::uint32_t index;
    bool operator==(const Pos&) const = default;
  };

  // The first entry not below `key` (end() if none).
  Pos lower_bound(SizeAddr key) const {
    const std::uint32_t c = class_of(static_cast<Bytes>(key >> 64));
    if (has(c)) {
      const Class& cl = classes_[c];
      const std::uint32_t i = index_in(cl, key);
      if (i < cl.size()) return Pos{c, i};
    }
    return Pos{next_nonempty(c + 1), 0};
  }
  // The position of `key`, which must be filed: its class holds it, so neither the class's
  // occupancy nor a later class is looked at (a free block's entry, found to merge or grow it).
  [[gnu::always_inline]] Pos position_of(SizeAddr key) const {
    const std::uint32_t c = class_of(static_cast<Bytes>(key >> 64));
    assert(has(c));
    return Pos{c, index_of(classes_[c], key)};
  }
  // Inline: every free and most splits file a block (no call, no spill of the 128-bit key).
  void insert(SizeAddr key, NodeId id) {
    const std::uint32_t c = class_of(static_cast<Bytes>(key >> 64));
    Class& cl = classes_[c];
    if (cl.empty()) {  // a class that was empty: no search
      mark(c);
      if (cl.capacity() == 0) [[unlikely]]
        cl.take_first_buffer(first_buffer());
      cl.insert(0, Entry{key, id});
      return;
    }
    cl.insert(insert_index(cl, key), Entry{key, id});
  }
  // Erases the entry at p (not end()). Positions after p in its class are invalidated; every
  // other position stays valid.
  void erase(Pos p) {
    assert(!is_end(p) && p.index < classes_[p.cls].size());
    Class& cl = classes_[p.cls];
    cl.erase(p.index);
    if (cl.empty()) unmark(p.cls);
  }
  void erase(SizeAddr key) {  // the key must be present
    const Pos p = position_of(key);
    assert(!is_end(p) && classes_[p.cls][p.index].key == key);
    erase(p);
  }
  // Takes the entry at p out and files `key` (a split's remainder or a merged block): the erase
  // and the insert in one, done in place when `key` stays in p's class (entries of other classes
  // sort below/above every key of this class, so only the class's own order needs restoring).
  // Inline, as insert and erase(Pos): a split or a merge with a free neighbour refiles a block.
  [[gnu::always_inline]] void refile(Pos p, SizeAddr key, NodeId id) {
    const std::uint32_t c = class_of(static_cast<Bytes>(key >> 64));
    if (c != p.cls) {
      Class& from = classes_[p.cls];
      Class& to = classes_[c];
      from.erase(p.index);
      if (from.empty() && to.empty() && (c >> 6) == (p.cls >> 6)) {
        // The block moves from a class it was alone in to an empty one beside it (a split's
        // remainder usually does): both occupancy bits flip in one word, which stays non-empty.
        words_[c >> 6] ^= (std::uint64_t{1} << (c & 63)) | (std::uint64_t{1} << (p.cls & 63));
        if (to.capacity() == 0) [[unlikely]]
          to.take_first_buffer(first_buffer());
        to.insert(0, Entry{key, id});
        return;
      }
      if (from.empty()) unmark(p.cls);
      insert(key, id);
      return;
    }
    Class& cl = classes_[p.cls];
    const bool above_before = p.index == 0 || cl[p.index - 1].key < key;
    const bool below_after = p.index + 1 == cl.size() || key < cl[p.index + 1].key;
    if (above_before && below_after) {  // it stays where it is
      cl[p.index] = Entry{key, id};
      return;
    }
    cl.erase(p.index);
    cl.insert(insert_index(cl, key), Entry{key, id});
  }

  Pos begin() const { return Pos{next_nonempty(0), 0}; }
  Pos end() const { return Pos{kClasses, 0}; }
  bool is_end(Pos p) const { return p.cls >= kClasses; }
  Pos next(Pos p) const {
    if (p.index + 1 < classes_[p.cls].size()) return Pos{p.cls, p.index + 1};
    return Pos{next_nonempty(p.cls + 1), 0};
  }
  // is_end(next(p)) without finding the next class: p is its class's last entry and no class
  // above it holds one. p must not be end().
  bool is_last(Pos p) const {
    if (p.index + 1 < classes_[p.cls].size()) return false;
    const std::uint32_t w = p.cls >> 6;
    return (words_[w] >> (p.cls & 63) >> 1) == 0 && (summary_ >> w >> 1) == 0;
  }
  Pos prev(Pos p) const {  // p must not be begin()
    if (p.index > 0) return Pos{p.cls, p.index - 1};
    const std::uint32_t c = prev_nonempty(p.cls);
    return Pos{c, static_cast<std::uint32_t>(classes_[c].size() - 1)};
  }
  Bytes size_at(Pos p) const { return static_cast<Bytes>(classes_[p.cls][p.index].key >> 64); }
  Addr addr_at(Pos p) const { return static_cast<Addr>(classes_[p.cls][p.index].key); }
  NodeId id_at(Pos p) const { return classes_[p.cls][p.index].id; }
  // Counted when asked (audits only): a count kept up to date cost every insert and erase.
  std::size_t size() const;
  void copy_to(StreamId stream, std::vector<FreeEntry>& out) const;

  // 8 classes per power of two: sizes below 8 have a class each; a larger size s with highest
  // bit f falls in class 8 + 8 (f - 3) + the 3 bits below f. Monotonic in s; 2^64 - 1 maps to
  // 495. (lm2.7b-ctx128, callgrind: 8 per power of two 1 % below 16 or 32; 4 gained 0.5 % more
  // with twice as wide classes, i.e. longer in-class shifts on other traces.)
  static constexpr unsigned kSubBits = 3;
  static constexpr std::uint32_t kClasses = 512;  // a multiple of 64 above the largest class
  static std::uint32_t class_of(Bytes s) {
    constexpr Bytes kLinear = Bytes{1} << kSubBits;
    if (s < kLinear) return static_cast<std::uint32_t>(s);
    const auto f = static_cast<unsigned>(63 - __builtin_clzll(s));
    const auto sub = static_cast<std::uint32_t>((s >> (f - kSubBits)) & (kLinear - 1));
    return static_cast<std::uint32_t>(kLinear) + ((f - kSubBits) << kSubBits) + sub;
  }

 private:
  struct Entry {
    SizeAddr key;
    NodeId id;
  };
  // One class's entries in (size, address) order, in a ring buffer: the best fit is usually a
  // class's first entry and a freed block usually sorts last (the replay of lm2.7b-ctx128 fills
  // classes of ~300 equal-size blocks in address order and takes them from the front), so both
  // ends change without moving the rest; a change in the middle moves the shorter side.
  class Class {
   public:
    // A class's first kFirstCapacity slots come from its StreamBlocks' chunks (first_buffer());
    // a larger buffer is its own.
    static constexpr std::uint32_t kFirstCapacity = 4;
    Class() = default;
    Class(const Class&) = delete;
    Class& operator=(const Class&) = delete;
    Class(Class&& other) noexcept
        : buf_(std::exchange(other.buf_, nullptr)),
          head_(other.head_),
          n_(std::exchange(other.n_, 0)),
          mask_(other.mask_),
          cap_(std::exchange(other.cap_, 0)) {}
    Class& operator=(Class&&) = delete;
    ~Class() {
      if (cap_ > kFirstCapacity) delete[] buf_;
    }
    std::uint32_t capacity() const { return cap_; }
    void take_first_buffer(Entry* slots) {  // an empty class without a buffer
      buf_ = slots;
      mask_ = kFirstCapacity - 1;
      cap_ = kFirstCapacity;
    }
    std::uint32_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    Entry& operator[](std::uint32_t i) { return buf_[(head_ + i) & mask_]; }
    const Entry& operator[](std::uint32_t i) const { return buf_[(head_ + i) & mask_]; }
    // The ends inline (the common cases above), the middle out of line. A freed block sorts
    // first about as often as last (lm2.7b-ctx128: its class's best fits were taken from the front,
    // and it lies below them), so both ends have a path here.
    void insert(std::uint32_t i, const Entry& e) {
      if (n_ < cap_) {  // room (an empty buffer has none)
        if (i == n_) {  // append
          buf_[(head_ + n_) & mask_] = e;
          ++n_;
          return;
        }
        if (i == 0) {  // prepend
          head_ = (head_ - 1) & mask_;
          buf_[head_] = e;
          ++n_;
          return;
        }
      }
      insert_slow(i, e);
    }
    void erase(std::uint32_t i) {
      if (i == 0) {  // the first entry
        head_ = (head_ + 1) & mask_;
        --n_;
        return;
      }
      erase_slow(i);
    }

   private:
    void insert_slow(std::uint32_t i, const Entry& e);
    void erase_slow(std::uint32_t i);
    void grow();
    Entry* buf_ = nullptr;    // capacity: a power of two (mask_ + 1) or nothing
    std::uint32_t head_ = 0;  // the slot of entry 0
    std::uint32_t n_ = 0;
    std::uint32_t mask_ = 0;
    std::uint32_t cap_ = 0;  // mask_ + 1, or 0 before the first buffer
  };
  // kFirstCapacity slots for a class's first buffer, cut from a chunk: most classes that ever
  // hold a block get one (lm2.7b-ctx128: ~100 per run, few grow further), and a heap allocation
  // each cost more than the rest of the growth.
  [[gnu::noinline]] Entry* first_buffer();
  static constexpr std::uint32_t kWords = kClasses / 64;

  bool has(std::uint32_t c) const { return (words_[c >> 6] >> (c & 63)) & 1; }
  // The first non-empty class >= c, or kClasses.
  std::uint32_t next_nonempty(std::uint32_t c) const {
    if (c >= kClasses) return kClasses;
    const std::uint32_t w = c >> 6;
    const std::uint64_t bits = words_[w] & (~std::uint64_t{0} << (c & 63));
    if (bits != 0) return (w << 6) + static_cast<std::uint32_t>(__builtin_ctzll(bits));
    const std::uint64_t rest = summary_ & (~std::uint64_t{0} << w << 1);
    if (rest == 0) return kClasses;
    const auto w2 = static_cast<std::uint32_t>(__builtin_ctzll(rest));
    return (w2 << 6) + static_cast<std::uint32_t>(__builtin_ctzll(words_[w2]));
  }
  // The last non-empty class < c (one must exist).
  std::uint32_t prev_nonempty(std::uint32_t c) const {
    if (c > 0) {
      const std::uint32_t b = c - 1;
      const std::uint32_t w = b >> 6;
      const std::uint64_t bits = words_[w] & (~std::uint64_t{0} >> (63 - (b & 63)));
      if (bits != 0) return (w << 6) + 63 - static_cast<std::uint32_t>(__builtin_clzll(bits));
      const std::uint64_t below = summary_ & ((std::uint64_t{1} << w) - 1);
      const auto w2 = static_cast<std::uint32_t>(63 - __builtin_clzll(below));
      return (w2 << 6) + 63 - static_cast<std::uint32_t>(__builtin_clzll(words_[w2]));
    }
    return kClasses;  // unreachable for a p other than begin()
  }
  void mark(std::uint32_t c) {
    words_[c >> 6] |= std::uint64_t{1} << (c & 63);
    summary_ |= std::uint64_t{1} << (c >> 6);
  }
  void unmark(std::uint32_t c) {
    words_[c >> 6] &= ~(std::uint64_t{1} << (c & 63));
    if (words_[c >> 6] == 0) summary_ &= ~(std::uint64_t{1} << (c >> 6));
  }
  // The first entry >= key. The ends are tried first: a best fit is usually the first entry
  // of its class and a freed block usually sorts last (see Class).
  static std::uint32_t index_in(const Class& cl, SizeAddr key) {
    const std::uint32_t size = cl.size();
    if (size == 0 || !(cl[0].key < key)) return 0;
    if (cl[size - 1].key < key) return size;
    std::uint32_t lo = 1;  // entries 1 .. size - 2 are left; entry size - 1 is >= key
    std::uint32_t n = size - 2;
    while (n > 0) {
      const std::uint32_t half = n / 2;
      if (cl[lo + half].key < key) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }

  // index_in for a key the class holds: the class is not empty and its last entry is not below
  // the key, so only the first entry is tried before the search (a free block's entry is usually
  // its class's first, see Class).
  static std::uint32_t index_of(const Class& cl, SizeAddr key) {
    if (!(cl[0].key < key)) return 0;
    std::uint32_t lo = 1;  // entries 1 .. size - 1 are left; one of them is the key
    std::uint32_t n = cl.size() - 1;
    while (n > 1) {
      const std::uint32_t half = n / 2;
      if (cl[lo + half - 1].key < key) {
        lo += half;
        n -= half;
      } else {
        n = half;
      }
    }
    return lo;
  }

  // index_in for a key to be filed: the last entry is tried first, as a freed block usually
  // sorts last (see Class) while a best fit is usually first. The same position as index_in. The
  // class must not be empty: insert files into an empty class directly, and refile re-inserts
  // only when an entry beside the one it took out is out of order with the key, so that one stays.
  static std::uint32_t insert_index(const Class& cl, SizeAddr key) {
    const std::uint32_t size = cl.size();
    assert(size > 0);
    if (cl[size - 1].key < key) return size;
    return index_in(cl, key);
  }

  std::vector<Class> classes_ = std::vector<Class>(kClasses);
  std::vector<std::unique_ptr<Entry[]>> first_chunks_;  // the first buffers' slots
  Entry* first_next_ = nullptr;                         // the next unused slot of the last chunk
  Entry* first_end_ = nullptr;
  std::uint64_t words_[kWords] = {};
  std::uint64_t summary_ = 0;  // bit w: words_[w] != 0
};

// A pool's free blocks, ordered by (stream, size, address): one StreamBlocks per stream, kept
// in stream order (streams are few). Every best-fit search stays inside one stream (§3.1), so
// callers take the stream's set and work on it.
class FreeBlockSet {
 public:
  // The stream's blocks, or nullptr when it never had any. The first stream's are tested first
  // from a copy of its id and address (a run has one stream, usually): one compare.
  const StreamBlocks* find(StreamId stream) const {
    if (stream == first_stream_) return first_blocks_;
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
  // streams_.front(), set by of(); before any stream, a stream 0 whose blocks are none.
  StreamId first_stream_ = 0;
  StreamBlocks* first_blocks_ = nullptr;
};

// One of PyTorch's BlockPools: the small or the large pool. Aligned to a power of two so that
// pool_of(kind) is a shift (a free finds its block's pool by kind), not a multiply by 88.
struct alignas(128) BlockPool {
  explicit BlockPool(PoolKind k) : kind(k) {}
  PoolKind kind;
  FreeBlockSet blocks;  // free mapped blocks
  // Expandable address space, no pages, under unmapped_key(). Its nodes are reused (PooledMap):
  // with expandable segments a merge and each unmap of pages files or drops an entry, and a heap
  // allocation per entry cost more than the tree operation.
  using UnmappedSet = PooledMap<std::pair<StreamId, Addr>, NodeId>;
  UnmappedSet unmapped;
  std::uint64_t get_free_blocks_call_count = 0;  // the GC clock (§3.3)
};

inline FreeKey key_of(const Node& n) { return FreeKey{n.stream, n.size, n.addr}; }
// An unmapped block's key in BlockPool::unmapped: (stream, end address), see the invariants above.
inline std::pair<StreamId, Addr> unmapped_key(const Node& n) { return {n.stream, n.addr + n.size}; }

}  // namespace fraglab::cca
