// Giving memory back to the device: garbage collection (allocator-model §3.3), the oversize-release
// rung (§5.2), release_cached_blocks / empty_cache (§5.3, §5.5) and cudaFree of one segment.
//
// Walks that free blocks iterate a copy of the pool: releasing a block removes only that block
// from the pool, so the copy visits exactly what PyTorch's `++it` before release visits.
#include <algorithm>
#include <cassert>

#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

// §3.3: free whole (unsplit, non-expandable) large-pool blocks at least as old as the average,
// pass after pass, until `target` is reclaimed or a pass frees nothing.
void CachingAllocator::garbage_collect_cached_blocks() {
  const Bytes gc_threshold = static_cast<Bytes>(config_.garbage_collection_threshold * static_cast<double>(*allowed_));
  if (bounds_.gc_idle(total_, gc_threshold)) return;
  const Bytes target = total_ - gc_threshold;
  BlockPool& large = pool_of(PoolKind::Large);
  const std::uint64_t clock = large.get_free_blocks_call_count;

  std::uint64_t total_age = 0;
  std::int64_t freeable = 0;
  scratch_.clear();
  large.blocks.copy_to(scratch_);
  for (const FreeEntry& e : scratch_) {
    const Node& n = nodes_[e.id];
    if (!n.is_split()) {  // (PyTorch counts whole expandable blocks here but never frees them)
      total_age += clock - n.gc_base;
      ++freeable;
    }
  }
  if (freeable == 0) return;

  Bytes reclaimed = 0;
  bool freed = true;
  while (bounds_.gc_short(reclaimed, target, gc_threshold) && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    scratch_.clear();
    large.blocks.copy_to(scratch_);
    for (const FreeEntry& e : scratch_) {
      const Node& n = nodes_[e.id];
      const std::uint64_t age = clock - n.gc_base;
      if (!n.is_split() && !n.expandable() && static_cast<double>(age) >= age_threshold) {
        freed = true;
        reclaimed += n.size;
        total_age -= age;
        --freeable;
        release_block(e.id);
      }
    }
  }
  bounds_.gc_end(reclaimed);
}

// §5.2: with max_split_size set, cudaFree the smallest oversize block >= max(rounded, MS) on
// this stream, or else the largest ones below it until that much is freed (those stay freed
// even when the rung fails). Never touches expandable blocks.
bool CachingAllocator::release_available_cached_blocks(const Request& r) {
  const Bytes ms = config_.max_split_size;
  if (bounds_.ms_unlimited(ms)) return false;
  if (bounds_.below_ms(r.rounded, ms)) bounds_.pin_ms(ms);  // ms is the search key: only it finds the same
  StreamBlocks* blocks = r.pool->blocks.find(r.stream);     // the rung never leaves the stream
  if (blocks == nullptr) return false;
  StreamBlocks& set = *blocks;
  const Bytes key_size = std::max(r.rounded, ms);
  StreamBlocks::Pos it = set.lower_bound(size_addr(key_size, 0));
  if (set.is_end(it) || nodes_[set.id_at(it)].expandable()) {
    if (it == set.begin()) return false;
    Bytes released = 0;
    it = set.prev(it);  // the largest block below the key
    while (released < key_size && bounds_.at_least_ms(set.size_at(it), ms)) {
      const StreamBlocks::Pos cur = it;
      const bool is_first = cur == set.begin();
      if (!is_first) it = set.prev(it);  // positions before `cur` survive its removal
      const NodeId id = set.id_at(cur);
      // Only whole cudaMalloc'd segments can be returned (a free block >= MS always is one).
      if (!nodes_[id].expandable() && !nodes_[id].is_split()) {
        released += nodes_[id].size;
        release_block(id);
      }
      if (is_first) break;
    }
    return released >= key_size;
  }
  const NodeId id = set.id_at(it);
  if (nodes_[id].is_split()) return false;
  release_block(id);
  return true;
}

// §5.3: complete every pending free, then cudaFree every whole free segment (large pool first,
// then small, each in set order) and unmap the whole pages of free expandable blocks.
bool CachingAllocator::release_cached_blocks() {
  synchronize_and_free_events();
  release_blocks(pool_of(PoolKind::Large));
  release_blocks(pool_of(PoolKind::Small));
  return true;
}

void CachingAllocator::synchronize_and_free_events() {
  ++stats_.num_sync_all_streams;
  for (const auto& [id, serial] : pending_) {
    Node& n = nodes_[id];
    if (!n.live || !n.pending || n.serial != serial) continue;  // completed meanwhile
    n.pending = false;
    --pending_live_;
    free_block(id);
  }
  pending_.clear();
}

void CachingAllocator::release_blocks(BlockPool& pool) {
  scratch_.clear();
  pool.blocks.copy_to(scratch_);
  scratch_ids_.clear();
  for (const FreeEntry& e : scratch_) {
    const Node& n = nodes_[e.id];
    if (n.expandable()) {
      scratch_ids_.push_back(e.id);  // unmapping changes the pool: do it after the walk
    } else if (!n.is_split()) {
      release_block(e.id);
    }
  }
  for (NodeId id : scratch_ids_) {
    unmap_block(id);
    const Node& n = nodes_[id];
    if (!n.mapped && n.prev == kNil && n.next == kNil) release_expandable_segment(id);
  }
}

// cudaFree of a whole free segment: segment_free, num_device_free (§5.3 step 2).
void CachingAllocator::release_block(NodeId id) {
  Node& n = nodes_[id];
  assert(!n.expandable() && !n.is_split());
  BlockPool& pool = pool_of(n.pool);
  ++stats_.num_device_free;
  device_.free(n.addr);
  total_ -= n.size;
  stats_.segment.decrease(n.pool, 1);
  stats_.reserved_bytes.decrease(n.pool, n.size);
  if (n.size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  pool.blocks.erase(key_of(n));
  nodes_.destroy(id);
}

}  // namespace fraglab::cca
