// DefaultInitAllocator: std::allocator whose value-less construct() default-initializes, so that
// resizing a vector of a trivial type leaves the new elements unwritten.
//
// For arrays that are filled later anyway: a zero-fill first costs a pass over the array (under
// callgrind, glibc's memset of a large block counts about one instruction per byte).
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace fraglab::offline {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  template <class U>
  void construct(U* at) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(at)) U;  // default-initialized: a trivial U is left unwritten
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), at,
                                                        std::forward<Args>(args)...);
  }
};

}  // namespace fraglab::offline
