// Every heap allocation of the command counted against the memory budget (--max-memory,
// fraglab/memory_budget.hpp, README "Reliability").
//
// The readers and generators check their estimates before they build anything large; this is the
// backstop for whatever an estimate misses: the replaceable global operator new counts the bytes
// it hands out, and an allocation that would take the process past the budget throws
// std::bad_alloc, which the readers turn into a one-line error naming the input (and main into
// one naming the command), exit 2, before the machine starts to swap or the kernel kills the
// process.
//
// Why here and not setrlimit: an address-space or data limit also counts thread stacks, glibc's
// per-thread arenas and, under AddressSanitizer, the shadow memory, so it cannot be set to what a
// user means by "memory" and breaks the sanitizer build the tests run in. Counting live bytes
// with malloc_usable_size on both sides keeps the sum exact whatever the allocator rounds to.
//
// Only the command links this file: the library leaves operator new alone for the programs that
// link it.
#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "fraglab/memory_budget.hpp"

namespace {

std::atomic<std::size_t> live_bytes{0};

// Counts the block `p` (from malloc or aligned_alloc) in; false, with the block freed and not
// counted, when it takes the process past the budget.
bool admit(void* p) {
  const std::size_t size = ::malloc_usable_size(p);
  const std::size_t after = live_bytes.fetch_add(size, std::memory_order_relaxed) + size;
  if (after <= fraglab::memory_budget()) return true;
  live_bytes.fetch_sub(size, std::memory_order_relaxed);
  std::free(p);
  return false;
}

void* counted_alloc(std::size_t size, std::size_t alignment) {
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else if (::posix_memalign(&p, alignment, size) != 0) {
    p = nullptr;
  }
  if (p == nullptr) return nullptr;
  return admit(p) ? p : nullptr;
}

void* counted_alloc_or_throw(std::size_t size, std::size_t alignment) {
  void* p = counted_alloc(size, alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  live_bytes.fetch_sub(::malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}

constexpr std::size_t kDefault = alignof(std::max_align_t);
std::size_t to_size(std::align_val_t a) { return static_cast<std::size_t>(a); }

}  // namespace

// NOLINTBEGIN(misc-new-delete-overloads): every replaceable form is defined, in pairs below.
void* operator new(std::size_t size) { return counted_alloc_or_throw(size, kDefault); }
void* operator new[](std::size_t size) { return counted_alloc_or_throw(size, kDefault); }
void* operator new(std::size_t size, std::align_val_t align) { return counted_alloc_or_throw(size, to_size(align)); }
void* operator new[](std::size_t size, std::align_val_t align) { return counted_alloc_or_throw(size, to_size(align)); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, kDefault); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, kDefault); }
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return counted_alloc(size, to_size(align));
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return counted_alloc(size, to_size(align));
}

void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
// NOLINTEND(misc-new-delete-overloads)
