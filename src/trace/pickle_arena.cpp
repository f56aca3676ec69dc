// The pickle document's bump arena (pickle.hpp, class Arena): its chunks, big ones as huge
// pages, and the one spare chunk per thread kept for the next document.
#include <algorithm>
#include <cstddef>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without ASan
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#include "trace/pickle.hpp"

namespace fraglab::pickle {

namespace {

void free_chunk(const Arena::Chunk& chunk) { ::operator delete(chunk.data, chunk.align); }

// This thread's kept chunk (Arena::kMaxSpareChunk), freed when the thread ends. Under
// AddressSanitizer a kept chunk is poisoned, so a value read from a destroyed document is still
// reported as a use after free until the chunk serves another document.
class SpareChunk {
 public:
  SpareChunk() = default;
  SpareChunk(const SpareChunk&) = delete;
  SpareChunk& operator=(const SpareChunk&) = delete;
  ~SpareChunk() { release(); }

  std::size_t size() const { return chunk_.size; }
  void keep(const Arena::Chunk& chunk) {
    release();
    ASAN_POISON_MEMORY_REGION(chunk.data, chunk.size);
    chunk_ = chunk;
  }
  // The kept chunk if it has at least `size` bytes, else an empty Chunk.
  Arena::Chunk take(std::size_t size) {
    if (!chunk_.data || chunk_.size < size) return {};
    const Arena::Chunk taken = chunk_;
    chunk_ = {};
    ASAN_UNPOISON_MEMORY_REGION(taken.data, taken.size);
    return taken;
  }
  void release() {
    if (!chunk_.data) return;
    ASAN_UNPOISON_MEMORY_REGION(chunk_.data, chunk_.size);
    free_chunk(chunk_);
    chunk_ = {};
  }

 private:
  Arena::Chunk chunk_;
};
thread_local SpareChunk spare;

}  // namespace

void Arena::release_spare_chunk() { spare.release(); }

Arena::~Arena() {
  for (const Chunk& chunk : chunks_) {
    // Keep the biggest chunk that is not too big; a chunk is aligned to what its size asked for,
    // so any chunk at least as big fits any later request (see refill).
    if (shares_spare_ && chunk.size <= kMaxSpareChunk && chunk.size > spare.size()) {
      spare.keep(chunk);
    } else {
      free_chunk(chunk);
    }
  }
}

void Arena::refill(std::size_t bytes) {
  // Chunks double, so a document of any size needs only a few dozen of them. Big chunks are
  // aligned to and sized in 2 MiB and offered to the kernel as huge pages: a snapshot's values
  // fill hundreds of MiB, and 4 KiB page faults were a fifth of the ingest time.
  constexpr std::size_t kHuge = 2 * 1024 * 1024;
  chunks_.reserve(chunks_.size() + 1);  // first: push_back below must not throw and leak a chunk
  std::size_t size = std::max(bytes, next_chunk_);
  next_chunk_ = std::max(next_chunk_, size) * 2;
  const bool huge = size >= kHuge;
  if (huge) size = (size + kHuge - 1) / kHuge * kHuge;
  // The kept chunk's pages are most likely still mapped: no faults, no zeroing.
  Chunk chunk = shares_spare_ ? spare.take(size) : Chunk{};
  if (!chunk.data) {
    chunk.size = size;
    chunk.align = std::align_val_t{huge ? kHuge : alignof(std::max_align_t)};
    chunk.data = static_cast<std::byte*>(::operator new(size, chunk.align));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) ::madvise(chunk.data, size, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  }
  cur_ = chunk.data;
  end_ = cur_ + chunk.size;
  chunks_.push_back(chunk);
}

}  // namespace fraglab::pickle
