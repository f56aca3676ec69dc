// Allocators for node-based containers (std::map, std::set, the nodes of std::unordered_map) that
// keep freed nodes for reuse instead of handing them back to malloc. Header-only, core layer.
//
// Why: a policy's ordered indexes and SimDevice's mapped runs insert (and erase) a node on nearly every
// event; malloc and free of that node (through the command's counting operator new,
// src/cli/memory_accounting.cpp) cost more instructions than the tree operation itself. Flat
// sorted arrays are not the answer for indexes that hold thousands of entries (gmlake's 2 MiB
// pBlocks), where the memmove of an insert costs more than the node. Nothing about a container's
// order or behaviour changes. Two kinds, both keeping free nodes on a FreeNodeList:
//
// NodePoolAllocator: stateless, the free lists per thread and per node type (every instance is
// equal, so containers copy, move and swap as with std::allocator). A node freed here is reused by
// the next node of the same type on the same thread. A thread's free nodes go back to the system
// when the thread ends; until then a list holds at most the most nodes of that type that were
// live at once on the thread. Allocations of more than one object (hash buckets) go straight to
// std::allocator.
//
// NodeArena and ArenaAllocator: the nodes of one container carved from slabs its owner holds.
// SimDevice's maps only grow while a policy keeps its segments (a PyTorch replay frees none):
// every node would come from the heap; a slab of nodes is one heap allocation (still counted
// against --max-memory). Nothing is per thread: the arena belongs to the container's owner, lives
// as long as it (declare it before the container), and frees its slabs when it goes. Freed nodes
// are reused by the same container. The arena serves one node size, the first it is asked for;
// other sizes and arrays go to std::allocator. An allocator is bound to its arena, so a container
// using one must not be copied to, or swapped with, another owner's.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <utility>
#include <vector>

namespace fraglab {

// Free nodes, each holding the link to the next one in its own bytes.
class FreeNodeList {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  // The most recently pushed node (the list must not be empty).
  void* pop() noexcept {
    Link* node = head_;
    head_ = node->next;
    return node;
  }
  // `node` must have room and alignment for a pointer.
  void push(void* node) noexcept { head_ = ::new (node) Link{head_}; }

 private:
  struct Link {
    Link* next;
  };
  Link* head_ = nullptr;
};

template <typename T>
class NodePoolAllocator {
 public:
  using value_type = T;

  NodePoolAllocator() noexcept = default;
  template <typename U>
  NodePoolAllocator(const NodePoolAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n == 1 && !pool_closed()) {
      FreeList& list = free_list();
      if (!list.nodes.empty()) return static_cast<T*>(list.nodes.pop());
    }
    return std::allocator<T>{}.allocate(n);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1 || pool_closed()) {  // (closed: a container outliving the thread's pool)
      std::allocator<T>{}.deallocate(p, n);
      return;
    }
    free_list().nodes.push(p);
  }

  friend bool operator==(const NodePoolAllocator& /*a*/, const NodePoolAllocator& /*b*/) noexcept { return true; }

 private:
  // A free node holds the link to the next one in its own bytes (FreeNodeList).
  // (T may be a pointer: the hash buckets' allocator, which never pools.)
  // NOLINTNEXTLINE(bugprone-sizeof-expression)
  static_assert(sizeof(T) >= sizeof(void*), "a node must hold a link");
  static_assert(alignof(T) >= alignof(void*), "a node must be aligned for a link");

  struct FreeList {
    FreeNodeList nodes;
    FreeList() = default;
    FreeList(const FreeList&) = delete;
    FreeList& operator=(const FreeList&) = delete;
    ~FreeList() {
      pool_closed() = true;
      while (!nodes.empty()) std::allocator<T>{}.deallocate(static_cast<T*>(nodes.pop()), 1);
    }
  };
  static FreeList& free_list() {
    thread_local FreeList list;
    return list;
  }
  // Set when the thread's free list is destroyed (at thread exit); a plain bool, so it stays
  // readable after that: nodes freed later go straight back to std::allocator.
  static bool& pool_closed() {
    thread_local bool closed = false;
    return closed;
  }
};

// std::map and std::set whose nodes come from NodePoolAllocator.
template <typename K, typename V, typename Less = std::less<K>>
using PooledMap = std::map<K, V, Less, NodePoolAllocator<std::pair<const K, V>>>;
template <typename K, typename Less = std::less<K>>
using PooledSet = std::set<K, Less, NodePoolAllocator<K>>;

class NodeArena {
 public:
  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  ~NodeArena() {
    for (void* slab : slabs_) ::operator delete(slab);
  }

  // A node of `size` bytes (aligned for any scalar), or nullptr when this arena serves another size.
  void* take(std::size_t size) {
    if (size != node_size_) {
      if (node_size_ != 0 || size < sizeof(void*)) return nullptr;  // a free node holds a link
      node_size_ = size;  // the first request fixes the size (nodes are whole max_align_t units)
      stride_ = (size + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    }
    if (!free_.empty()) return free_.pop();
    if (left_ == 0) {
      slabs_.reserve(slabs_.size() + 1);  // so the push below cannot throw after the allocation
      next_ = static_cast<std::byte*>(::operator new(kSlabNodes* stride_));
      slabs_.push_back(next_);
      left_ = kSlabNodes;
    }
    void* node = next_;
    next_ += stride_;
    --left_;
    return node;
  }
  // True when nodes of `size` bytes come from this arena (and go back with give()).
  bool serves(std::size_t size) const { return size == node_size_; }
  void give(void* node) noexcept { free_.push(node); }

 private:
  static constexpr std::size_t kSlabNodes = 64;
  std::size_t node_size_ = 0;
  std::size_t stride_ = 0;
  FreeNodeList free_;          // given back, reused first
  std::byte* next_ = nullptr;  // the next unused node of the newest slab
  std::size_t left_ = 0;       // unused nodes left in it
  std::vector<void*> slabs_;
};

template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;

  explicit ArenaAllocator(NodeArena& arena) noexcept : arena_(&arena) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept
      : arena_(other.arena()) {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n == 1 && alignof(T) <= alignof(std::max_align_t)) {
      if (void* p = arena_->take(sizeof(T))) return static_cast<T*>(p);
    }
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && alignof(T) <= alignof(std::max_align_t) && arena_->serves(sizeof(T))) {
      arena_->give(p);
      return;
    }
    std::allocator<T>{}.deallocate(p, n);
  }
  NodeArena* arena() const noexcept { return arena_; }

  friend bool operator==(const ArenaAllocator& a, const ArenaAllocator& b) noexcept { return a.arena_ == b.arena_; }

 private:
  NodeArena* arena_;
};

// A std::map whose nodes come from a NodeArena: make_arena_map<K, V>(arena) builds one.
template <typename K, typename V, typename Less = std::less<K>>
using ArenaMap = std::map<K, V, Less, ArenaAllocator<std::pair<const K, V>>>;

template <typename K, typename V, typename Less = std::less<K>>
ArenaMap<K, V, Less> make_arena_map(NodeArena& arena) {
  return ArenaMap<K, V, Less>(ArenaAllocator<std::pair<const K, V>>(arena));
}

}  // namespace fraglab
