// The malloc ladder, the free paths and the flushes [DeviceCachingAllocator::malloc, free,
// release_cached_blocks, emptyCache]; the reports (stats, segments). Invariants: allocator.hpp.
#include "gmlake/allocator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "pytorch/config.hpp"

namespace fraglab::gmlake {
namespace {

Bytes round_large(Bytes size) { return (size + kPage - 1) / kPage * kPage; }

// [get_allocation_size]
Bytes segment_size_for(Bytes rounded) { return rounded < kMinLargeAlloc ? kLargeBuffer : rounded; }

}  // namespace

Allocator::Allocator(Options options, Device& device)
    : options_(options), device_(device), small_(cca::parse_config("version:2.0"), device) {}

std::uint64_t Allocator::cookie(Handle kind, Id id, std::uint32_t serial) const {
  return (std::uint64_t{serial} << 32) | (kind == Handle::SBlock ? 0x80000000u : 0u) | id;
}

// ---- malloc -----------------------------------------------------------------------------------

std::optional<Block> Allocator::malloc(Bytes size, StreamId stream) {
  if (size <= kSmallSize) return malloc_small(size, stream);
  if (size >= kMaxRequest) return out_of_memory(size, stream, "large");
  const Bytes rounded = round_large(size);
  return malloc_large(Request{size, rounded, segment_size_for(rounded), stream});
}

// PyTorch's small pool, untouched by GMLake. Its own ladder flushes only the small pool; GMLake's
// single ladder also flushes the large one, so on failure we do that and ask once more, folding
// the second attempt's counts into the first (one retry, at most one OOM).
std::optional<Block> Allocator::malloc_small(Bytes size, StreamId stream) {
  std::optional<Block> block = small_.malloc(size, stream);
  if (block || !has_releasable_large_memory()) {
    if (!block) last_oom_ = oom_text(size, stream, "small");
    return block;
  }
  complete_pending_frees();
  release_cached_pblocks();
  const std::int64_t retries_before = small_.stats().num_alloc_retries;
  ++hidden_small_ooms_;
  block = small_.malloc(size, stream);
  hidden_small_retries_ += static_cast<std::uint64_t>(small_.stats().num_alloc_retries - retries_before);
  if (!block) last_oom_ = oom_text(size, stream, "small");
  return block;
}

// [malloc] The ladder for the large pool.
std::optional<Block> Allocator::malloc_large(const Request& r) {
  // [get_free_block]: a free pBlock, else (no pBlock fits) a cached sBlock.
  auto best = free_pblocks_.lower_bound(SizeKey{r.stream, r.rounded, 0, 0});
  if (best != free_pblocks_.end() && best->stream == r.stream) {
    const Id block = best->id;
    free_pblocks_.erase(best);
    return hand_out_pblock(block, r);
  }
  if (auto b = reuse_cached_sblock(r)) return b;
  if (auto b = stitch(r, 0)) return b;
  if (auto b = allocate_new_segment(r)) return b;
  // release_available_cached_blocks is a no-op: max_split_size is unlimited.
  if (auto b = stitch(r, 1)) return b;
  // [release_cached_blocks() && realloc_block(p, true)]
  complete_pending_frees();
  release_cached_pblocks();
  small_.empty_cache();
  ++retries_;
  device_.synchronize();  // the flush waited for the device (README "Device time")
  if (auto b = allocate_new_segment(r)) return b;
  if (auto b = stitch(r, 2)) return b;
  return out_of_memory(r.requested, r.stream, "large");
}

// [realloc_block] A new segment of alloc_size. With re_alloc, only what the stream's free pBlocks
// lack is allocated, and the request is then stitched from them and the new block.
std::optional<Block> Allocator::allocate_new_segment(const Request& r) {
  Bytes size = r.alloc_size;
  if (options_.re_alloc && may_stitch(r, 4)) {
    Bytes free_total = 0;
    for (auto it = free_pblocks_.lower_bound(SizeKey{r.stream, 0, 0, 0});
         it != free_pblocks_.end() && it->stream == r.stream; ++it) {
      free_total += it->size;
    }
    if (free_total >= r.rounded) return std::nullopt;  // the code gives up here ("something weird")
    if (free_total > 0) size = segment_size_for(r.rounded - free_total);
  }
  const Id block = create_segment(size, r.stream);
  if (block == kNone) return std::nullopt;
  if (pblocks_[block].size >= r.rounded) return hand_out_pblock(block, r);
  insert_free(block);
  return stitch(r, 4);
}

std::string Allocator::oom_text(Bytes size, StreamId stream, const char* pool) const {
  return fmt::format(
      "gmlake: out of memory: tried to allocate {} bytes ({} pool, stream {}); {} of {} bytes reserved, {} free "
      "on the device",
      size, pool, stream, device_.reserved(), device_.capacity(), device_.free_memory());
}

std::optional<Block> Allocator::out_of_memory(Bytes size, StreamId stream, const char* pool) {
  ++ooms_;
  last_oom_ = oom_text(size, stream, pool);
  return std::nullopt;
}

// ---- free -------------------------------------------------------------------------------------

// The block a large cookie names, if it is still handed out (stale or repeated frees are ignored).
Allocator::Handle Allocator::resolve(const Block& block, Id& id) const {
  const auto serial = static_cast<std::uint32_t>(block.cookie >> 32);
  id = static_cast<Id>(block.cookie & 0x7fffffffu);
  if (block.cookie & 0x80000000u) {
    if (id < sblocks_.size() && sblocks_[id].live && sblocks_[id].state == SState::Live &&
        sblocks_[id].serial == serial) {
      return Handle::SBlock;
    }
  } else if (id < pblocks_.size() && pblocks_[id].live && pblocks_[id].use == Use::Allocated &&
             pblocks_[id].serial == serial) {
    return Handle::PBlock;
  }
  return Handle::None;
}

void Allocator::complete_free(Handle kind, Id id) {
  if (kind == Handle::SBlock) {
    free_sblock(id);
  } else {
    const PBlock& b = pblocks_[id];
    mark_range(b.segment, b.addr, b.size, false);
    make_free(id);
  }
}

void Allocator::free_requested(const Block& block) {
  if (block.size <= kSmallSize) return small_.free_requested(block);
  Id id = 0;
  const Handle kind = resolve(block, id);
  if (kind == Handle::None) return;
  if (kind == Handle::SBlock) {
    sblocks_[id].pending = true;
    pending_.push_back(PendingFree{kind, id, sblocks_[id].serial});
  } else {
    pblocks_[id].pending = true;
    pending_.push_back(PendingFree{kind, id, pblocks_[id].serial});
  }
}

void Allocator::free_completed(const Block& block) {
  if (block.size <= kSmallSize) return small_.free_completed(block);
  Id id = 0;
  const Handle kind = resolve(block, id);
  if (kind != Handle::None) complete_free(kind, id);
  if (pending_.size() > pending_compact_at_) {  // drop entries of frees that completed on their own
    std::erase_if(pending_, [this](const PendingFree& p) {
      Id ignored = 0;
      Block key{};
      key.cookie = cookie(p.kind, p.id, p.serial);
      return resolve(key, ignored) == Handle::None;
    });
    pending_compact_at_ = std::max<std::size_t>(1024, 2 * pending_.size());
  }
}

void Allocator::free(const Block& block) {
  if (block.size <= kSmallSize) return small_.free(block);
  Id id = 0;
  const Handle kind = resolve(block, id);
  if (kind != Handle::None) complete_free(kind, id);
}

// [synchronize_and_free_events] A flush waits for every stream, so pending frees complete.
void Allocator::complete_pending_frees() {
  std::vector<PendingFree> pending;
  pending.swap(pending_);
  for (const PendingFree& p : pending) {
    Id id = 0;
    Block key{};
    key.cookie = cookie(p.kind, p.id, p.serial);
    const Handle kind = resolve(key, id);
    if (kind != Handle::None) complete_free(kind, id);
  }
}

// [release_blocks(large_blocks)] Every free pBlock that is a whole segment, in the pool's order.
void Allocator::release_cached_pblocks() {
  std::vector<Id> whole;
  for (const SizeKey& k : free_pblocks_) {
    if (!pblocks_[k.id].is_split()) whole.push_back(pblocks_[k.id].segment);
  }
  for (Id seg : whole) release_segment(seg);
}

bool Allocator::has_releasable_large_memory() const {
  for (const PendingFree& p : pending_) {
    Id id = 0;
    Block key{};
    key.cookie = cookie(p.kind, p.id, p.serial);
    if (resolve(key, id) != Handle::None) return true;
  }
  for (const SizeKey& k : free_pblocks_) {
    if (!pblocks_[k.id].is_split()) return true;
  }
  return false;
}

// [emptyCache] release_cached_blocks(), then garbage_collect_fused_blocks(2, 0).
void Allocator::empty_cache() {
  complete_pending_frees();
  release_cached_pblocks();
  small_.empty_cache();
  collect_garbage();
}

// ---- reports ----------------------------------------------------------------------------------

PolicyCounters Allocator::counters() const {
  const cca::DeviceStats& s = small_.stats();
  return PolicyCounters{static_cast<std::uint64_t>(s.num_alloc_retries) - hidden_small_retries_ + retries_,
                        static_cast<std::uint64_t>(s.num_ooms) - hidden_small_ooms_ + ooms_};
}

std::vector<std::pair<std::string, std::int64_t>> Allocator::detailed_stats() const {
  std::int64_t segments = 0, segment_bytes = 0, free_bytes = 0, held_bytes = 0;
  for (const Segment& s : segments_) {
    if (!s.live) continue;
    ++segments;
    segment_bytes += static_cast<std::int64_t>(s.size);
  }
  for (const SizeKey& k : free_pblocks_) free_bytes += static_cast<std::int64_t>(k.size);
  std::int64_t live = 0, clean = 0, fragmented = 0, cached_bytes = 0, aliases = 0;
  for (const SBlock& s : sblocks_) {
    if (!s.live) continue;
    for (const Piece& p : s.pieces) aliases += p.mapped ? 1 : 0;
    if (s.state == SState::Live) {
      ++live;
      held_bytes += static_cast<std::int64_t>(s.used);
    } else {
      ++(s.state == SState::Clean ? clean : fragmented);
      cached_bytes += static_cast<std::int64_t>(s.size);
    }
  }
  const cca::DeviceStats& small = small_.stats();
  auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  return {
      {"pblock_segments", segments},
      {"pblock_reserved_bytes", segment_bytes},
      {"pblock_free_bytes", free_bytes},
      {"sblock_held_bytes", held_bytes},
      {"sblocks_live", live},
      {"sblocks_cached_clean", clean},
      {"sblocks_cached_fragmented", fragmented},
      {"sblock_cached_bytes", cached_bytes},
      {"sblock_aliases_mapped", aliases},
      {"total_fuse_size", n(fused_bytes_)},
      {"stitches", n(stitches_)},
      {"stitched_bytes", n(stitched_bytes_)},
      {"sblock_reuses", n(sblock_reuses_)},
      {"sblock_teardowns", n(teardowns_)},
      {"sblock_gc_runs", n(gc_runs_)},
      {"small_pool_reserved_bytes", small.reserved_bytes.all().current},
      {"small_pool_allocated_bytes", small.allocated_bytes.all().current},
  };
}

// The pBlock segments (a piece is allocated when handed out, held by a live sBlock or pending)
// and the small pool's segments, in address order. sBlocks own no memory and are not listed.
std::vector<SegmentView> Allocator::segments() const {
  std::vector<SegmentView> out = small_.segments();
  for (const Segment& s : segments_) {
    if (!s.live) continue;
    SegmentView view{s.addr, s.size, s.stream, "large", false, {}};
    for (Id b = s.head; b != kNone; b = pblocks_[b].next) {
      const PBlock& p = pblocks_[b];
      view.blocks.push_back(SegmentView::Piece{p.addr, p.size, p.use != Use::Free});
    }
    out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(), [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
  return out;
}

}  // namespace fraglab::gmlake
