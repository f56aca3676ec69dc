// NodePoolAllocator: an allocator for node-based containers (std::map, std::set, the nodes of
// std::unordered_map) that keeps freed nodes for reuse instead of handing them back to malloc.
//
// Why: a policy's ordered indexes (and SimDevice's ranges) insert and erase a node on nearly every
// event; malloc and free of that node (through the command's counting operator new) cost more
// instructions than the tree operation itself. Flat sorted arrays are not
// the answer for indexes that hold thousands of entries (gmlake's 2 MiB pBlocks), where the
// memmove of an insert costs more than the node. A node freed here is reused by the next node of
// the same type on the same thread; nothing about the container's order or behaviour changes.
//
// The free lists are per thread and per node type (stateless allocator: every instance is equal,
// so containers copy, move and swap as with std::allocator). A thread's free nodes go back to the
// system when the thread ends; until then a list holds at most the most nodes of that type that
// were live at once on the thread. Allocations of more than one object (hash buckets) go straight
// to std::allocator.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace fraglab {

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
      if (list.head != nullptr) {
        FreeNode* node = list.head;
        list.head = node->next;
        return reinterpret_cast<T*>(node);
      }
    }
    return std::allocator<T>{}.allocate(n);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1 || pool_closed()) {  // (closed: a container outliving the thread's pool)
      std::allocator<T>{}.deallocate(p, n);
      return;
    }
    FreeList& list = free_list();
    list.head = ::new (static_cast<void*>(p)) FreeNode{list.head};
  }

  friend bool operator==(const NodePoolAllocator& /*a*/, const NodePoolAllocator& /*b*/) noexcept { return true; }

 private:
  struct FreeNode {
    FreeNode* next;
  };
  // A free node holds the link to the next one in its own bytes.
  // (T may be a pointer: the hash buckets' allocator, which never pools.)
  // NOLINTNEXTLINE(bugprone-sizeof-expression)
  static_assert(sizeof(T) >= sizeof(void*), "a node must hold a link");
  static_assert(alignof(T) >= alignof(void*), "a node must be aligned for a link");

  struct FreeList {
    FreeNode* head = nullptr;
    FreeList() = default;
    FreeList(const FreeList&) = delete;
    FreeList& operator=(const FreeList&) = delete;
    ~FreeList() {
      pool_closed() = true;
      while (head != nullptr) {
        FreeNode* node = head;
        head = node->next;
        std::allocator<T>{}.deallocate(reinterpret_cast<T*>(node), 1);
      }
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

}  // namespace fraglab
