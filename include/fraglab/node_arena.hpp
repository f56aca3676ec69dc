// NodeArena and ArenaAllocator: the nodes of one node-based container (a std::map) carved from
// slabs its owner holds, instead of one heap allocation per node.
//
// Why: SimDevice inserts a node per device malloc, and its maps only grow while a policy keeps
// its segments (a PyTorch replay frees none): every node then comes from the heap, through the
// command's counting operator new (src/cli/memory_accounting.cpp), at several times the cost of
// the tree insert. A slab of nodes is one heap allocation (still counted against --max-memory).
//
// Unlike NodePoolAllocator (node_pool.hpp) nothing is per thread: the arena belongs to the
// container's owner, lives as long as it (declare it before the container), and frees its slabs
// when it goes. Freed nodes are reused by the same container. The arena serves one node size,
// the first it is asked for; other sizes and arrays go to std::allocator. An allocator is bound
// to its arena, so a container using one must not be copied to, or swapped with, another owner's.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace fraglab {

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
      if (node_size_ != 0 || size < sizeof(FreeNode)) return nullptr;
      node_size_ = size;  // the first request fixes the size (nodes are whole max_align_t units)
      stride_ = (size + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    }
    if (free_ != nullptr) {
      FreeNode* node = free_;
      free_ = node->next;
      return node;
    }
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
  void give(void* node) noexcept { free_ = ::new (node) FreeNode{free_}; }

 private:
  struct FreeNode {
    FreeNode* next;
  };
  static constexpr std::size_t kSlabNodes = 64;
  std::size_t node_size_ = 0;
  std::size_t stride_ = 0;
  FreeNode* free_ = nullptr;   // given back, reused first
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
