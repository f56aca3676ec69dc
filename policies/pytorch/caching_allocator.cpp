// The malloc ladder (allocator-model §5), best-fit search (§3), split (§4.1/§4.2/§4.4) and the free
// path (§6, merge §4.3). Release rungs live in release.cpp, page mapping in expandable.cpp.
#include "pytorch/caching_allocator.hpp"

#include <algorithm>

#include "pytorch/rounding.hpp"

namespace fraglab::cca {
namespace {
constexpr std::uint64_t kZeroCookie = ~std::uint64_t{0};  // the size-0 "null pointer" block
static_assert(static_cast<NodeId>(kZeroCookie & 0xffffffffu) == kNil, "lookup turns the size-0 block away by its id");
Bytes saturating_add(Bytes a, Bytes b) { return a > kUnlimited - b ? kUnlimited : a + b; }
}  // namespace

CachingAllocator::CachingAllocator(Config config, Device& device)
    : config_(std::move(config)),
      device_(device),
      expandable_active_(config_.expandable_segments && has_expandable_segments(config_.version)),
      oversize_slack_(config_.oversize_slack()),
      plain_rounding_(rounds_plainly(config_.rounding)) {
  if (config_.memory_fraction) {
    const double f = *config_.memory_fraction;
    if (!(fraction_one_means_unset(config_.version) && f >= 1.0)) {
      allowed_ = static_cast<Bytes>(f * static_cast<double>(device_.capacity()));
    }
  }
  gc_enabled_ = allowed_.has_value() && config_.garbage_collection_threshold > 0.0;
  stats_.max_split_size = config_.max_split_size == kUnlimited ? -1 : static_cast<std::int64_t>(config_.max_split_size);
  scratch_.reserve(256);
}

// ---- malloc (§5) ------------------------------------------------------------------------------

void CachingAllocator::skip_usage_stats() {
  if (total_ != 0 || serial_ != 0) throw std::logic_error("skip_usage_stats() after the first request");
  keep_usage_stats_ = false;
}

template <bool kUsageStats>
bool CachingAllocator::malloc_keeping(Bytes size, StreamId stream, Block& out) {
  // Both ends in one compare: size - 1 wraps for a size of 0.
  if (size - 1 >= kMaxRequest - 1) [[unlikely]] {
    if (size == 0) {
      out = Block{0, 0, 0, stream, kZeroCookie};  // PyTorch returns a null pointer
      return true;
    }
    last_oom_ = "CUDA out of memory. Tried to allocate more than 1EB memory.";  // not in num_ooms
    return false;
  }
  Request r;
  r.requested = size;
  bounds_.saw_request(size);
  // size < kMaxRequest: round_up_512 cannot overflow.
  r.rounded = plain_rounding_ ? round_up_512(size) : round_size(size, config_.rounding);
  r.stream = stream;
  r.pool = &pool_of(pool_for(r.rounded));

  // Step 3: search (free-memory callbacks are a no-op here, §3.2). Steps 4-5: GC, then the ladder.
  bool found = get_free_block(r);
  if (!found) {
    // The segment size (§1.5) is needed only past the search: by the ladder and the OOM text.
    r.alloc_size = get_allocation_size(r.rounded, config_.large_segment_size);
    if (gc_enabled()) {
      garbage_collect_cached_blocks();
    } else {
      bounds_.gc_off_at_miss(total_);
    }
    found = alloc_block(r, false) || (release_available_cached_blocks(r) && alloc_block(r, false)) ||
            (release_cached_blocks() && alloc_block(r, true));
  }
  if (!found) {
    oom(r);
    return false;
  }
  alloc_found_block<kUsageStats>(r, out);
  return true;
}

// §3.2: best fit on (stream, size, address), expandable tweak (§7.4), max_split_size rules.
bool CachingAllocator::get_free_block(Request& r) {
  BlockPool& pool = *r.pool;
  if (gc_enabled()) ++pool.get_free_blocks_call_count;
  StreamBlocks* blocks = pool.blocks.find(r.stream);  // the search never leaves the stream
  if (blocks == nullptr) return false;
  StreamBlocks& set = *blocks;
  StreamBlocks::Pos it = set.lower_bound(size_addr(r.rounded, 0));
  if (set.is_end(it)) return false;

  if (expandable_active_) {
    // A best fit with no unmapped space after it stays, and so does the stream's largest block
    // (see walk_unmapped_tails); both are tested here so that the common cases make no call
    // (lm2.7b-ctx128: the block before the unmapped tail is the largest in 1,287 of the 1,802
    // best fits with unmapped space after them). Only an expandable block has unmapped space
    // after it, so the block's kind needs no test of its own.
    const Node& fit = nodes_[set.id_at(it)];
    if (fit.next != kNil && !nodes_[fit.next].mapped && !set.is_last(it)) it = walk_unmapped_tails(set, it, fit);
  } else if (nodes_[set.id_at(it)].expandable()) {
    // Expandable segments were switched off: such blocks are skipped entirely.
    do {
      it = set.next(it);
    } while (!set.is_end(it) && nodes_[set.id_at(it)].expandable());
    if (set.is_end(it)) return false;
  }

  const Bytes ms = config_.max_split_size;
  const Bytes candidate = set.size_at(it);
  const bool normal = bounds_.below_ms(r.rounded, ms);             // not an oversize request
  if (normal && bounds_.at_least_ms(candidate, ms)) return false;  // no oversize block for it
  if (!normal && candidate >= saturating_add(r.rounded, oversize_slack_)) return false;
  r.block = set.id_at(it);
  r.found_in = &set;  // alloc_found_block takes it out at this position: no second search
  r.found_at = it;
  return true;
}

// §7.4: counts the unmapped space after a block as part of its size, so a block touching the
// unmapped tail is passed over for the next larger interior block. Out of line: only expandable
// segments get here, and the loop kept in malloc cost every request registers. The block at `it`
// is `fit`, expandable with unmapped space after it and not the stream's largest
// (get_free_block tested both); each step's counted size is carried to the next instead of
// computed again.
StreamBlocks::Pos CachingAllocator::walk_unmapped_tails(const StreamBlocks& set, StreamBlocks::Pos it,
                                                        const Node& fit) const {
  auto expandable_size = [this](const Node& n) {
    return n.size + (n.next != kNil && !nodes_[n.next].mapped ? nodes_[n.next].size : 0);
  };
  Bytes counted = fit.size + nodes_[fit.next].size;
  for (;;) {
    const StreamBlocks::Pos next = set.next(it);
    if (set.is_end(next)) break;
    const Node& n = nodes_[set.id_at(next)];
    const Bytes next_counted = expandable_size(n);
    if (!(next_counted < counted)) break;
    it = next;
    // A block not expandable, or without unmapped space after it, ends the walk: every later
    // block is at least as large (the set's order), so none counts smaller.
    if (!n.expandable() || next_counted == n.size) break;
    counted = next_counted;
  }
  return it;
}

// §5.1: a new segment (cudaMalloc) or new pages (expandable).
bool CachingAllocator::alloc_block(Request& r, bool is_retry) {
  if (is_retry) {
    ++stats_.num_alloc_retries;  // counted on entering the last rung (§14.4)
    device_.synchronize();       // the flush waited for the device (README "Device time")
  }
  if (allowed_ && total_ + r.alloc_size > *allowed_) return false;  // uses alloc_size even if expandable
  // Each kind in a function of its own, called last: this one keeps no registers for them.
  return expandable_active_ ? alloc_expandable_block(r) : alloc_segment(r);
}

bool CachingAllocator::alloc_segment(Request& r) {
  const std::optional<Addr> addr = device_.malloc(r.alloc_size);
  if (!addr) return false;
  total_ += r.alloc_size;
  const NodeId id = nodes_.create();
  Node& n = nodes_[id];
  n.addr = *addr;
  n.size = r.alloc_size;
  n.stream = r.stream;
  n.pool = r.pool->kind;
  stats_.segment.increase(n.pool, 1);
  stats_.reserved_bytes.increase(n.pool, n.size);
  if (n.size >= config_.max_split_size) stats_.oversize_segments.increase(1);
  ++stats_.num_device_alloc;
  r.block = id;
  return true;
}

// §4.1: small pool or expandable mode: remainder >= 512; large pool: request below
// max_split_size and remainder strictly above 1 MiB.
bool CachingAllocator::should_split(const Node& block, Bytes rounded) const {
  const Bytes remaining = block.size - rounded;
  // The mode first: with expandable segments every block takes this rule (one test).
  if (expandable_active_ || block.pool == PoolKind::Small) return remaining >= kMinBlockSize;
  return bounds_.below_ms(rounded, config_.max_split_size) && remaining > kSmallSize;
}

// §5 step 7 / §4.2 / §4.4: carve from the low end, account inactive splits, mark allocated.
template <bool kUsageStats>
void CachingAllocator::alloc_found_block(Request& r, Block& out) {
  const PoolKind pool = r.pool->kind;
  const bool split = should_split(nodes_[r.block], r.rounded);
  const bool already_split = nodes_[r.block].is_split();
  if (split) {
    const NodeId rest = nodes_.create_unfilled();  // may move the arena: take references afterwards
    Node& b = nodes_[r.block];
    Node& rem = nodes_[rest];
    // Every field that a free block's reader uses, as a fresh Node would have them but for the
    // carved range and its links (gc_base is set where the remainder is filed, take_found_block).
    // requested and serial are left as the recycled slot had them: both are read only for an
    // allocated or pending block (lookup's serial test is followed by one of those flags, and a
    // serial is set on allocation, from a counter above every serial before it).
    rem.addr = b.addr + r.rounded;
    rem.size = b.size - r.rounded;
    rem.stream = b.stream;
    rem.prev = r.block;
    rem.next = b.next;
    rem.segment = b.segment;
    rem.pool = b.pool;
    rem.allocated = false;
    rem.pending = false;
    rem.mapped = true;  // b is mapped: it was found free or just allocated/mapped
    rem.live = true;
    if (b.next != kNil) nodes_[b.next].prev = rest;
    b.next = rest;
    b.size = r.rounded;
    take_found_block(r, rest);
    if (kUsageStats && !b.expandable()) {
      if (already_split) {
        stats_.inactive_split_bytes.decrease(pool, r.rounded);  // an inactive split block shrinks
      } else {
        stats_.inactive_split_bytes.increase(pool, rem.size);  // a new inactive split block
        stats_.inactive_split.increase(pool, 1);
      }
    }
  } else {
    take_found_block(r);
    if (kUsageStats && already_split && !nodes_[r.block].expandable()) {
      stats_.inactive_split_bytes.decrease(pool, nodes_[r.block].size);
      stats_.inactive_split.decrease(pool, 1);
    }
  }
  Node& b = nodes_[r.block];
  b.allocated = true;
  b.requested = r.requested;
  b.serial = ++serial_;
  if constexpr (kUsageStats) {
    stats_.allocation.increase(pool, 1);
    stats_.allocated_bytes.increase(pool, b.size);
    if (active_split_) {  // else they are the allocation stats (split_active())
      stats_.active.increase(pool, 1);
      stats_.active_bytes.increase(pool, b.size);
    }
    stats_.requested_bytes.increase(pool, b.requested);
    if (b.size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
  }
  out = Block{b.addr, b.size, b.requested, b.stream, cookie_of(r.block, b)};
}

// The best fit leaves its pool and a split's remainder enters it (§4.2). The remainder sorts
// just below the block it was cut from, often in the same size class: then it takes the
// block's place there (StreamBlocks::refile) instead of an erase and an insert.
// Two overloads, with and without a remainder: a split tests for none no more.
void CachingAllocator::take_found_block(Request& r, NodeId remainder) {
  if (r.found_in == nullptr) {  // a new segment or pages: not in the pool
    insert_into_blocks(*r.pool, remainder);
    return;
  }
  StreamBlocks& set = *r.found_in;  // left set: malloc reads r no more
  Node& n = nodes_[remainder];
  // Age restarts (§3.3), as insert_into_blocks. Without GC the clock stays 0 and so does every
  // gc_base (a slot's last value was that 0 too): the store is left out.
  if (gc_enabled()) n.gc_base = r.pool->get_free_blocks_call_count;
  set.refile(r.found_at, size_addr(n.size, n.addr), remainder);
}

void CachingAllocator::take_found_block(Request& r) {
  if (r.found_in != nullptr) r.found_in->erase(r.found_at);
}

void CachingAllocator::oom(const Request& r) {
  ++stats_.num_ooms;
  OomFacts facts;
  facts.version = config_.version;
  facts.alloc_size = r.alloc_size;  // "Tried to allocate" shows the segment size (§14.7)
  facts.device_total = device_.capacity();
  // cudaMemGetInfo's free bytes (memory outside the allocator counts as used).
  facts.device_free = device_.free_memory();
  facts.allowed = allowed_;
  facts.allocated =
      keep_usage_stats_ ? static_cast<Bytes>(stats_.allocated_bytes.all().current) : allocated_block_bytes();
  facts.reserved = static_cast<Bytes>(stats_.reserved_bytes.all().current);
  last_oom_ = oom_message(facts);
}

// ---- free path (§6) ---------------------------------------------------------------------------

Node* CachingAllocator::lookup(const Block& block) {
  // The size-0 block's cookie (kZeroCookie) carries id kNil, which no slot has (the arena stays
  // far below 2^32 - 1 slots): the range test turns it away, so it needs no test of its own.
  const NodeId id = static_cast<NodeId>(block.cookie & 0xffffffffu);
  if (id >= nodes_.slots()) return nullptr;
  // A dead slot (live false) is not tested for: a node dies free, neither allocated nor pending
  // (NodeArena::destroy), and every caller acts only on a block that is one of the two.
  Node& n = nodes_[id];
  if (n.serial != static_cast<std::uint32_t>(block.cookie >> 32)) return nullptr;
  return &n;
}

void CachingAllocator::free_requested(const Block& block) {
  Node* n = lookup(block);
  if (n == nullptr || !n->allocated) return;
  split_active();  // before allocation drops: active keeps counting the pending block
  n->allocated = false;
  if (keep_usage_stats_) {
    stats_.allocation.decrease(n->pool, 1);
    stats_.allocated_bytes.decrease(n->pool, n->size);
    if (n->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
  }
  n->pending = true;  // still active, not reusable until completed (§6 step 2)
  const NodeId id = static_cast<NodeId>(block.cookie & 0xffffffffu);
  pending_.emplace_back(id, n->serial);
  ++pending_live_;
}

void CachingAllocator::free_completed(const Block& block) {
  Node* n = lookup(block);
  if (n == nullptr || !n->pending) return;  // e.g. already completed by empty_cache (§5.3 step 1)
  n->pending = false;
  --pending_live_;
  const NodeId id = static_cast<NodeId>(block.cookie & 0xffffffffu);
  if (keep_usage_stats_) {
    free_block_body<true>(id);
  } else {
    free_block_body<false>(id);
  }
  if (pending_.size() > 64 && pending_.size() > 2 * pending_live_) {
    std::erase_if(pending_, [this](const auto& p) {
      const Node& m = nodes_[p.first];
      return !(m.live && m.pending && m.serial == p.second);
    });
  }
}

template <bool kUsageStats>
void CachingAllocator::free_keeping(const Block& block) {
  Node* n = lookup(block);
  if (n == nullptr) return;
  if (n->allocated) {
    n->allocated = false;
    if constexpr (kUsageStats) {
      stats_.allocation.decrease(n->pool, 1);
      stats_.allocated_bytes.decrease(n->pool, n->size);
      if (n->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
    }
  } else if (n->pending) {
    n->pending = false;
    --pending_live_;
  } else {
    return;
  }
  free_block_body<kUsageStats>(static_cast<NodeId>(block.cookie & 0xffffffffu));
}

// free() and free_completed() are the per-event callers: they get free_block's body inlined
// (no call, no spills across it); release.cpp's synchronize_and_free_events calls this copy.
void CachingAllocator::free_block(NodeId id) {
  if (keep_usage_stats_) {
    free_block_body<true>(id);
  } else {
    free_block_body<false>(id);
  }
}

// §6 step 3 / §4.3 / §4.4: merge with free neighbours, back into the pool, net inactive_split.
template <bool kUsageStats>
void CachingAllocator::free_block_body(NodeId id) {
  Node& n = nodes_[id];
  const Bytes original_size = n.size;
  const Bytes requested = n.requested;
  const PoolKind kind = n.pool;
  BlockPool& pool = pool_of(kind);
  MergeState ms;
  // Both neighbours are read before either merge (absorbing prev leaves next as it was), and
  // tried in PyTorch's order: prev, then next.
  const NodeId next = n.next;
  merge_neighbour<true>(id, n.prev, pool, ms);
  merge_neighbour<false>(id, next, pool, ms);
  if (ms.kept_in == nullptr) {
    insert_into_blocks(pool, id);
  } else {
    Node& merged = nodes_[id];
    if (gc_enabled()) merged.gc_base = pool.get_free_blocks_call_count;  // as take_found_block
    ms.kept_in->refile(ms.kept_at, size_addr(merged.size, merged.addr), id);
  }
  if constexpr (kUsageStats) {
    const Node& m = nodes_[id];
    if (m.is_split()) {
      ms.d_count += 1;
      ms.d_bytes += static_cast<std::int64_t>(m.size);
    }
    if (!m.expandable()) {
      stats_.inactive_split.apply(kind, ms.d_count);
      stats_.inactive_split_bytes.apply(kind, ms.d_bytes);
    }
    // Without a pending block ever, free() has just taken the same amounts off allocation (split_active()).
    if (active_split_) {
      stats_.active.decrease(kind, 1);
      stats_.active_bytes.decrease(kind, original_size);
    }
    stats_.requested_bytes.decrease(kind, requested);
  }
}

// One neighbour `c` of the block being freed (§4.3). The last free mapped neighbour absorbed
// stays filed until free_block ends: the merged block sorts above it (it is larger), often in
// the same size class, and then takes its place there. The freed block is mapped (it was handed
// out, and only free blocks are unmapped), so try_merge_blocks' test of the same mapped state
// comes down to the neighbour's: an unmapped neighbour never merges.
template <bool kBelow>
void CachingAllocator::merge_neighbour(NodeId id, NodeId c, BlockPool& pool, MergeState& ms) {
  if (c == kNil || !nodes_[c].reusable() || !nodes_[c].mapped) return;
  assert(nodes_[id].mapped);
  if (ms.kept_in != nullptr) ms.kept_in->erase(ms.kept_at);  // the first neighbour leaves after all
  const Node& s = nodes_[c];
  ms.kept_in = pool.blocks.find(s.stream);
  ms.kept_at = ms.kept_in->position_of(size_addr(s.size, s.addr));
  const Bytes subsumed = absorb_block<kBelow>(id, c);  // > 0: no block is empty
  ms.d_count -= 1;
  ms.d_bytes -= static_cast<std::int64_t>(subsumed);
}

// Absorbs `src` into `dst` if src is a reusable neighbour in the same mapped state; returns
// the bytes absorbed. dst must not be in a set (its key changes).
Bytes CachingAllocator::try_merge_blocks(NodeId dst, NodeId src, BlockPool& pool) {
  if (src == kNil) return 0;
  Node& s = nodes_[src];
  Node& d = nodes_[dst];
  if (!s.reusable() || s.mapped != d.mapped) return 0;
  if (s.mapped) {
    pool.blocks.erase(key_of(s));
  } else {
    pool.unmapped.erase(unmapped_key(s));
  }
  return nodes_[dst].prev == src ? absorb_block<true>(dst, src) : absorb_block<false>(dst, src);
}

// Joins neighbour `src` (already out of every set) into `dst` and destroys it; returns its bytes.
// kBelow: src is dst's prev, else its next (free_block knows which, with no test).
template <bool kBelow>
Bytes CachingAllocator::absorb_block(NodeId dst, NodeId src) {
  Node& s = nodes_[src];
  Node& d = nodes_[dst];
  if constexpr (kBelow) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNil) nodes_[d.prev].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNil) nodes_[d.next].prev = dst;
  }
  const Bytes subsumed = s.size;
  d.size += subsumed;
  nodes_.destroy(src);
  return subsumed;
}

// The two copies of the per-request paths that the inline malloc() and free() choose between.
template bool CachingAllocator::malloc_keeping<true>(Bytes size, StreamId stream, Block& out);
template bool CachingAllocator::malloc_keeping<false>(Bytes size, StreamId stream, Block& out);
template void CachingAllocator::free_keeping<true>(const Block& block);
template void CachingAllocator::free_keeping<false>(const Block& block);

}  // namespace fraglab::cca
