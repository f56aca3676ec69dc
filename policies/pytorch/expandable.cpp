// Expandable segments on the device's virtual-memory calls (allocator-model §7).
//
// Invariants:
//  - one ExpandableSegment = one reserved range of page * ceil(1.125 * capacity / page) bytes,
//    tiled by a chain of blocks, each either mapped (free or in use) or unmapped;
//  - unmapped blocks start and end on page boundaries and sit in their pool's unmapped set;
//  - pages are mapped only to grow (alloc_block) and unmapped only by release_cached_blocks,
//    whole pages inside free blocks only; `segment` stats never change here.
#include <algorithm>

#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

Bytes CachingAllocator::page_size(PoolKind pool) const {
  return pool == PoolKind::Small ? kSmallBuffer : config_.large_segment_size;
}

// "enough address space for 1 1/8 the total memory on the GPU", in whole pages (§7.1).
Bytes CachingAllocator::expandable_range_size(Bytes page) const {
  const Bytes cap = device_.capacity();
  const Bytes want = cap + cap / 8;
  return page * ((want + page - 1) / page);
}

NodeId CachingAllocator::create_expandable_segment(StreamId stream, BlockPool& pool, std::optional<Addr> at) {
  const Bytes page = page_size(pool.kind);
  const Bytes size = expandable_range_size(page);
  const std::optional<Addr> base = device_.reserve_range(size, at.value_or(Device::kAnyAddress));
  if (!base) return kNil;
  ExpandableSegment seg{*base, size, page, stream, pool.kind, true};
  auto slot = std::find_if(expandable_.begin(), expandable_.end(), [](const auto& s) { return !s.live; });
  std::int32_t index;
  if (slot != expandable_.end()) {
    *slot = seg;
    index = static_cast<std::int32_t>(slot - expandable_.begin());
  } else {
    index = static_cast<std::int32_t>(expandable_.size());
    expandable_.push_back(seg);
  }
  const NodeId id = nodes_.create();
  Node& n = nodes_[id];
  n.addr = *base;
  n.size = size;
  n.stream = stream;
  n.pool = pool.kind;
  n.segment = index;
  n.mapped = false;
  pool.unmapped.emplace(unmapped_key(n), id);
  return id;
}

// §7.2 step 1: the lowest address on this stream from which free-or-unmapped blocks add up to
// `size` (starting one block early when a free block precedes the unmapped one); else a new range.
// `at` is set to the unmapped set's entry of the unmapped block found (the block returned or the
// one after it), which map_block then needs not look up.
NodeId CachingAllocator::find_expandable_block(StreamId stream, BlockPool& pool, Bytes size,
                                               BlockPool::UnmappedSet::iterator& at) {
  auto allocatable = [this](NodeId b) { return b != kNil && nodes_[b].reusable(); };
  auto has_room = [&](NodeId b) {
    Bytes bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += nodes_[b].size;
      b = nodes_[b].next;
    }
    return bytes >= size;
  };
  // The stream's first entry: the set's first one unless a lower stream has entries (usually
  // there is one stream), so the search is made only then.
  auto it = pool.unmapped.begin();
  if (it != pool.unmapped.end() && it->first.first < stream) it = pool.unmapped.lower_bound({stream, 0});
  for (; it != pool.unmapped.end() && it->first.first == stream; ++it) {
    NodeId c = it->second;
    if (allocatable(nodes_[c].prev)) c = nodes_[c].prev;
    if (has_room(c)) {
      at = it;
      return c;
    }
  }
  const NodeId created = create_expandable_segment(stream, pool, std::nullopt);
  if (created != kNil) at = pool.unmapped.find(unmapped_key(nodes_[created]));
  return created;
}

// §7.2 step 2: map whole pages at the start of unmapped block `id` (its unmapped set entry
// `filed`) covering `size` bytes; the rest stays unmapped; the mapped part merges with free mapped
// neighbours. One device call. Returns the block that holds the new pages (kNil when the device
// refuses them). It is filed as free unless it has the request's rounded size: then the caller
// takes it (map_expandable_block). A free block below the pages keeps its entry in the
// pool: refiled when still too small, else handed to alloc_found_block in `r` (found_in), as
// get_free_block hands over a best fit, so that the split remainder takes that entry instead of
// an insert.
NodeId CachingAllocator::map_block(NodeId id, BlockPool::UnmappedSet::iterator filed, Bytes size, Request& r) {
  const ExpandableSegment& seg = expandable_[static_cast<std::size_t>(nodes_[id].segment)];
  const Bytes mapped = std::min(seg.page * ((size + seg.page - 1) / seg.page), nodes_[id].size);
  // One cuMemCreate per page of the segment's size (README "Device time").
  if (!device_.map(nodes_[id].addr, mapped, seg.page)) return kNil;  // a failed map leaves nothing behind
  BlockPool& pool = pool_of(nodes_[id].pool);
  count_mapped_pages(pool.kind, mapped);
  const bool whole = mapped == nodes_[id].size;
  const NodeId below = nodes_[id].prev;
  if (!whole && below != kNil && nodes_[below].reusable() && nodes_[below].mapped) {
    // The usual growth: pages mapped after the free tail block of the segment. The pages move
    // from the unmapped block's low end to the free block's high end, the same chain as a split
    // and a merge would leave, without either: the unmapped block keeps its key (stream, end).
    Node& grown = nodes_[below];
    Node& unmapped = nodes_[id];
    StreamBlocks& set = *pool.blocks.find(grown.stream);
    const StreamBlocks::Pos at = set.position_of(size_addr(grown.size, grown.addr));
    grown.size += mapped;
    unmapped.addr += mapped;
    unmapped.size -= mapped;
    if (grown.size < r.rounded) {
      grown.gc_base = pool.get_free_blocks_call_count;  // age restarts (§3.3), as insert_into_blocks
      set.refile(at, size_addr(grown.size, grown.addr), below);
    } else {
      r.found_in = &set;
      r.found_at = at;
    }
    return below;
  }
  nodes_[id].mapped = true;
  if (whole) {
    pool.unmapped.erase(filed);
  } else {
    const NodeId rest = nodes_.create();
    Node& n = nodes_[id];
    Node& u = nodes_[rest];
    u.addr = n.addr + mapped;
    u.size = n.size - mapped;
    u.stream = n.stream;
    u.pool = n.pool;
    u.segment = n.segment;
    u.mapped = false;
    u.prev = id;
    u.next = n.next;
    if (n.next != kNil) nodes_[n.next].prev = rest;
    n.next = rest;
    n.size = mapped;
    filed->second = rest;  // the unmapped rest ends where the block did: the same key
  }
  try_merge_blocks(id, below, pool);
  if (whole) try_merge_blocks(id, nodes_[id].next, pool);  // else next is the unmapped rest: no merge
  if (nodes_[id].size < r.rounded) insert_into_blocks(pool, id);
  return id;
}

// map_block's usual call from alloc_expandable_block (§7.2 step 2): free block `below`
// (mapped, filed, < r.rounded bytes) grows by the whole pages of unmapped block `u` after it that
// make up the request, as map_block does when they are not all of `u`; the grown block is handed
// to alloc_found_block in `r` at its entry. kNil when the device refuses the pages; kUnusual
// (nothing done) when they would be all of `u`.
NodeId CachingAllocator::grow_free_tail(NodeId below, NodeId u, Request& r) {
  Node& unmapped = nodes_[u];
  const Bytes page = expandable_[static_cast<std::size_t>(unmapped.segment)].page;
  const Bytes short_by = r.rounded - nodes_[below].size;
  const Bytes mapped = std::min(page * ((short_by + page - 1) / page), unmapped.size);
  if (mapped == unmapped.size) return kUnusual;
  if (!device_.map(unmapped.addr, mapped, page)) return kNil;
  BlockPool& pool = *r.pool;
  count_mapped_pages(pool.kind, mapped);
  Node& grown = nodes_[below];
  nodes_[u].addr += mapped;
  nodes_[u].size -= mapped;
  StreamBlocks& set = *pool.blocks.find(grown.stream);
  r.found_at = set.position_of(size_addr(grown.size, grown.addr));
  r.found_in = &set;
  grown.size += mapped;
  return below;
}

// §7.2: grow until one free block of >= rounded bytes exists; r.block is it, out of the pool. A
// failure after some pages were mapped leaves them mapped as free blocks (trap §14.8).
bool CachingAllocator::alloc_expandable_block(Request& r) {
  BlockPool& pool = *r.pool;
  // The usual growth: the stream's first unmapped block follows a free block too small for the
  // request, and the two together hold it. find_expandable_block would pick that free block (its
  // first candidate), and map_block would grow it by the pages short of the request (not the
  // whole unmapped block), leaving it large enough: done here without either's walk and frame.
  const auto first = pool.unmapped.begin();
  if (first != pool.unmapped.end() && first->first.first == r.stream) {
    const NodeId u = first->second;
    const NodeId below = nodes_[u].prev;
    if (below != kNil && nodes_[below].reusable() && nodes_[below].mapped && nodes_[below].size < r.rounded &&
        r.rounded - nodes_[below].size < nodes_[u].size) {
      const NodeId grown = grow_free_tail(below, u, r);
      if (grown != kUnusual) {
        r.block = grown;
        return grown != kNil;
      }
    }
  }
  r.block = map_expandable_block(r);
  return r.block != kNil;
}

NodeId CachingAllocator::map_expandable_block(Request& r) {
  BlockPool& pool = *r.pool;
  BlockPool::UnmappedSet::iterator at;  // the unmapped block found: c or the one after it
  NodeId c = find_expandable_block(r.stream, pool, r.rounded, at);
  if (c == kNil) return kNil;
  // A free mapped block found is filed; one map_block maps is filed only while it is too small
  // (see map_block): the one that is large enough never enters the pool.
  bool filed = nodes_[c].mapped;
  if (!filed) {
    c = map_block(c, at, std::min(nodes_[c].size, r.rounded), r);
    if (c == kNil) return kNil;
    at = pool.unmapped.end();  // used: the next unmapped block is looked up
    filed = nodes_[c].size < r.rounded;
  }
  while (nodes_[c].size < r.rounded) {
    // invariant: c is free, mapped and filed, followed by an unmapped block
    const Bytes remaining = r.rounded - nodes_[c].size;
    const NodeId next = nodes_[c].next;
    if (at == pool.unmapped.end()) at = pool.unmapped.find(unmapped_key(nodes_[next]));
    c = map_block(next, at, std::min(remaining, nodes_[next].size), r);  // c grew, or merged into next
    if (c == kNil) return kNil;
    at = pool.unmapped.end();
    filed = nodes_[c].size < r.rounded;
  }
  if (filed) pool.blocks.erase(key_of(nodes_[c]));
  return c;
}

// §7.5: unmap the whole pages inside free block `id`; partial pages at the edges stay mapped
// as small free blocks; the unmapped part merges with unmapped neighbours.
void CachingAllocator::unmap_block(NodeId id) {
  const ExpandableSegment& seg = expandable_[static_cast<std::size_t>(nodes_[id].segment)];
  const Bytes page = seg.page;
  const Bytes off_begin = nodes_[id].addr - seg.base;
  const Bytes off_end = off_begin + nodes_[id].size;
  const Bytes first = (off_begin + page - 1) / page;
  const Bytes last = off_end / page;
  if (first >= last) return;
  const Addr uaddr = seg.base + first * page;
  const Bytes usize = (last - first) * page;
  device_.unmap(uaddr, usize, page);
  BlockPool& pool = pool_of(nodes_[id].pool);
  pool.blocks.erase(key_of(nodes_[id]));

  auto make_free = [&](Addr addr, Bytes size) {
    const NodeId f = nodes_.create();
    Node& src = nodes_[id];
    Node& n = nodes_[f];
    n.addr = addr;
    n.size = size;
    n.stream = src.stream;
    n.pool = src.pool;
    n.segment = src.segment;
    return f;
  };
  const Bytes before = uaddr - nodes_[id].addr;
  if (before > 0) {  // prev? -> before -> id
    const NodeId f = make_free(nodes_[id].addr, before);
    nodes_[f].prev = nodes_[id].prev;
    nodes_[f].next = id;
    if (nodes_[id].prev != kNil) nodes_[nodes_[id].prev].next = f;
    nodes_[id].prev = f;
    insert_into_blocks(pool, f);
  }
  const Bytes after = nodes_[id].size - before - usize;
  if (after > 0) {  // id -> after -> next?
    const NodeId f = make_free(uaddr + usize, after);
    nodes_[f].prev = id;
    nodes_[f].next = nodes_[id].next;
    if (nodes_[id].next != kNil) nodes_[nodes_[id].next].prev = f;
    nodes_[id].next = f;
    insert_into_blocks(pool, f);
  }
  nodes_[id].addr = uaddr;
  nodes_[id].size = usize;
  nodes_[id].mapped = false;
  try_merge_blocks(id, nodes_[id].prev, pool);
  try_merge_blocks(id, nodes_[id].next, pool);
  pool.unmapped.emplace(unmapped_key(nodes_[id]), id);
  total_ -= usize;
  stats_.reserved_bytes.decrease(pool.kind, usize);
  ++stats_.num_device_free;
}

// A range that is one unmapped block again gives its address space back (no stats, §7.5).
void CachingAllocator::release_expandable_segment(NodeId id) {
  Node& n = nodes_[id];
  ExpandableSegment& seg = expandable_[static_cast<std::size_t>(n.segment)];
  pool_of(n.pool).unmapped.erase(unmapped_key(n));
  device_.release_range(seg.base);
  seg.live = false;
  nodes_.destroy(id);
}

}  // namespace fraglab::cca
