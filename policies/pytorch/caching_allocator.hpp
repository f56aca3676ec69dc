// The emulated DeviceCachingAllocator: PyTorch's decisions, request by request (allocator-model §3-§7).
//
// Invariants (each file implementing a part cites the spec section it copies):
//  - total_ (PyTorch's total_allocated_memory) == bytes this allocator holds from the device ==
//    stats.reserved_bytes.all.current; it changes only at segment malloc/free and page map/unmap;
//  - every node reachable from a segment chain is live; the chains tile each cudaMalloc'd
//    segment exactly, and each expandable address range exactly (mapped and unmapped blocks);
//  - free blocks are maximal: two reusable neighbours with the same mapped state never coexist
//    (merge on free, §4.3), so a pending block (free requested, not completed) is never merged;
//  - a Block handed out carries cookie = serial << 32 | node id; a free whose serial does not
//    match the node (a stale or repeated free) is ignored.
// Files: caching_allocator.cpp (malloc ladder, free path), release.cpp (GC, release_*),
// expandable.cpp (§7), adopt.cpp (initial state), segments_view.cpp, oom_message.cpp.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/policy_kit.hpp"
#include "fraglab/start_state.hpp"
#include "fraglab/trace.hpp"
#include "pytorch/block_pool.hpp"
#include "pytorch/config.hpp"
#include "pytorch/decision_bounds.hpp"
#include "pytorch/start_evidence.hpp"
#include "pytorch/stats.hpp"

namespace fraglab::cca {

// One reserved virtual range of expandable segments (§7.1): one per (stream, pool) in practice.
struct ExpandableSegment {
  Addr base = 0;
  Bytes size = 0;
  Bytes page = 0;  // 2 MiB (small pool) or large_segment_size (large pool)
  StreamId stream = 0;
  PoolKind pool = PoolKind::Large;
  bool live = false;
};

class CachingAllocator {
 public:
  CachingAllocator(Config config, Device& device);

  // PyTorch's malloc: nullopt on OOM (then last_oom_message() has PyTorch's text).
  std::optional<Block> malloc(Bytes size, StreamId stream) {
    Block block;
    if (!malloc(size, stream, block)) return std::nullopt;
    return block;
  }
  // The same, the block written into `out` (false on OOM, `out` then unchanged): the replay's
  // hot path, which keeps the block in its live slot.
  bool malloc(Bytes size, StreamId stream, Block& out) {
    return keep_usage_stats_ ? malloc_keeping<true>(size, stream, out) : malloc_keeping<false>(size, stream, out);
  }
  void free_requested(const Block& block);  // user free: allocated bytes drop now (§6)
  void free_completed(const Block& block);  // the block returns to its pool (merges)
  void free(const Block& block) {           // both at once
    if (keep_usage_stats_) {
      free_keeping<true>(block);
    } else {
      free_keeping<false>(block);
    }
  }
  // Stops keeping the usage statistics (§8): allocation, active, inactive_split and their bytes,
  // requested_bytes, oversize_allocations. They are a quarter of the work of a request and no
  // decision reads them, so a run whose memory_stats() nobody reads (a replay without --stats, a
  // sweep) skips them. Segment and reserved statistics and the counters stay exact (decisions,
  // OOM messages and Metrics read them); stats() then has the usage statistics as adopt() left
  // them. Before the first request (adopt() included) only.
  void skip_usage_stats();
  bool keeps_usage_stats() const { return keep_usage_stats_; }
  void empty_cache() { release_cached_blocks(); }
  // Reads a cut-off trace's evidence on its start state (start_evidence.hpp, start_state.hpp)
  // for the adopt() that follows; without it adopt() guesses unrecorded block sizes by the gap.
  void prepare(const Trace& trace);
  std::vector<std::optional<Block>> adopt(const InitialState& initial);
  std::vector<StartBlock> start_blocks() const;

  const DeviceStats& stats() const {
    settle_active();
    return stats_;
  }
  const Config& config() const { return config_; }
  const std::string& last_oom_message() const { return last_oom_; }
  std::vector<SegmentView> segments() const;
  // anatomy.cpp: the free cached bytes split for the fragmentation anatomy (fraglab/anatomy.hpp).
  FreeAnatomy free_anatomy(std::optional<StreamId> stream) const;
  Bytes total_allocated_memory() const { return total_; }
  std::optional<Bytes> allowed_memory_maximum() const { return allowed_; }
  // audit.cpp: recomputes the invariants above from the nodes.
  void audit(kit::AuditLog& log) const;
  // The knob values under which every decision so far comes out the same (decision_bounds.hpp);
  // record_decisions() before the first request also keeps the request sizes.
  const DecisionBounds& decision_bounds() const { return bounds_; }
  void record_decisions() { bounds_.recording = true; }

 private:
  // PyTorch's AllocParams. malloc (its one maker) writes each field before any read, so only
  // found_in has an initial value: the others are not stored twice per request.
  struct Request {
    Bytes requested;
    Bytes rounded;
    Bytes alloc_size;  // written by malloc only on a miss (get_free_block found nothing): read past it
    StreamId stream;
    BlockPool* pool;
    NodeId block;  // written by get_free_block or alloc_block when they succeed: read after
    // get_free_block's best fit is still filed here until alloc_found_block takes it out (so a
    // split remainder can take its place); so is the free block below new expandable pages that
    // map_block or grow_free_tail grew into (its entry); nullptr for other blocks of alloc_block.
    StreamBlocks* found_in = nullptr;
    StreamBlocks::Pos found_at;  // read only while found_in is set (each writer sets both)
  };

  BlockPool& pool_of(PoolKind kind) { return pools_[static_cast<int>(kind)]; }
  bool gc_enabled() const { return gc_enabled_; }
  // The node of a block handed out, or nullptr; possibly a dead or free node when the block was
  // freed before (callers test allocated or pending, which neither has).
  Node* lookup(const Block& block);
  static std::uint64_t cookie_of(NodeId id, const Node& n) { return (std::uint64_t{n.serial} << 32) | id; }

  // §8: "active" counts allocated plus pending-free blocks, so until the first block goes
  // pending (a free request not yet completed) active and active_bytes move exactly as
  // allocation and allocated_bytes do (same amounts, same order, so the same peaks). Until then
  // only the allocation stats are updated and the active ones are copied from them when read;
  // split_active() copies them once, just before the first block goes pending, and from then on
  // both are updated (most traces never have a pending block: two stat updates less per call).
  void split_active() {
    if (active_split_) return;
    settle_active();
    active_split_ = true;
  }
  void settle_active() const {
    if (active_split_) return;
    stats_.active = stats_.allocation;
    stats_.active_bytes = stats_.allocated_bytes;
  }

  // caching_allocator.cpp
  [[gnu::always_inline]] inline bool get_free_block(Request& r);  // malloc is its one caller
  [[gnu::noinline]] StreamBlocks::Pos walk_unmapped_tails(const StreamBlocks& set, StreamBlocks::Pos it,
                                                          const Node& fit) const;
  bool alloc_block(Request& r, bool is_retry);
  [[gnu::noinline]] bool alloc_segment(Request& r);  // alloc_block's cudaMalloc
  bool should_split(const Node& block, Bytes rounded) const;
  // malloc() and free() for each setting of keep_usage_stats_ (one test per call, not per update).
  template <bool kUsageStats>
  bool malloc_keeping(Bytes size, StreamId stream, Block& out);
  template <bool kUsageStats>
  void free_keeping(const Block& block);
  template <bool kUsageStats>
  [[gnu::always_inline]] inline void alloc_found_block(Request& r, Block& out);  // malloc is its one caller
  void free_block(NodeId id);  // for release.cpp; free() and free_completed() inline the body
  template <bool kUsageStats>
  [[gnu::always_inline]] inline void free_block_body(NodeId id);
  // allocated_bytes.all.current for the OOM message when the usage statistics are not kept.
  Bytes allocated_block_bytes() const;
  // free_block's net inactive_split change (§4.4) and the neighbour left filed for refile().
  struct MergeState {
    std::int64_t d_count = 0;
    std::int64_t d_bytes = 0;
    StreamBlocks* kept_in = nullptr;
    StreamBlocks::Pos kept_at{};
  };
  template <bool kBelow>  // c is id's prev, else its next
  [[gnu::always_inline]] inline void merge_neighbour(NodeId id, NodeId c, BlockPool& pool, MergeState& ms);
  Bytes try_merge_blocks(NodeId dst, NodeId src, BlockPool& pool);
  template <bool kBelow>
  [[gnu::always_inline]] inline Bytes absorb_block(NodeId dst, NodeId src);  // free_block's merges, per free
  // In the header and always inlined: every free and split files a block through it.
  [[gnu::always_inline]] void insert_into_blocks(BlockPool& pool, NodeId id) {
    Node& n = nodes_[id];
    n.gc_base = pool.get_free_blocks_call_count;  // age restarts (§3.3)
    pool.blocks.insert(FreeEntry{n.stream, n.size, n.addr, id});
  }
  [[gnu::always_inline]] inline void take_found_block(Request& r, NodeId remainder);  // for alloc_found_block only
  [[gnu::always_inline]] inline void take_found_block(Request& r);                    // the same, no split
  void oom(const Request& r);

  // release.cpp
  void garbage_collect_cached_blocks();
  bool release_available_cached_blocks(const Request& r);
  bool release_cached_blocks();
  void synchronize_and_free_events();
  void release_blocks(BlockPool& pool);
  void release_block(NodeId id);

  // expandable.cpp
  // map_expandable_block is its one caller (in expandable.cpp).
  [[gnu::always_inline]] inline NodeId find_expandable_block(StreamId stream, BlockPool& pool, Bytes size,
                                                             BlockPool::UnmappedSet::iterator& at);
  NodeId create_expandable_segment(StreamId stream, BlockPool& pool, std::optional<Addr> at);
  NodeId map_block(NodeId id, BlockPool::UnmappedSet::iterator filed, Bytes size, Request& r);
  // The bookkeeping of `mapped` bytes of pages the device just mapped into a pool (§7.2).
  void count_mapped_pages(PoolKind pool, Bytes mapped) {
    total_ += mapped;
    stats_.reserved_bytes.increase(pool, mapped);
    ++stats_.num_device_alloc;  // per map call, not per page
  }
  bool alloc_expandable_block(Request& r);  // alloc_block's pages, into r.block
  // alloc_expandable_block but for the usual growth (grow_free_tail): out of line, so that the
  // usual growth keeps no registers for it.
  [[gnu::noinline]] NodeId map_expandable_block(Request& r);
  static constexpr NodeId kUnusual = kNil - 1;  // grow_free_tail: not its case, nothing done
  [[gnu::always_inline]] inline NodeId grow_free_tail(NodeId below, NodeId u, Request& r);
  void unmap_block(NodeId id);
  void release_expandable_segment(NodeId id);
  Bytes page_size(PoolKind pool) const;
  Bytes expandable_range_size(Bytes page) const;

  Config config_;
  Device& device_;
  bool expandable_active_;        // expandable_segments:True in a version that has them
  Bytes oversize_slack_;          // §3.2 step 4 R
  std::optional<Bytes> allowed_;  // allowed_memory_maximum (memory fraction), §5.6
  bool gc_enabled_ = false;       // §3.3: a memory fraction and a threshold > 0 (fixed at construction)
  bool plain_rounding_;           // §1.2: every request rounds up to a multiple of 512 (rounds_plainly)
  NodeArena nodes_;
  std::array<BlockPool, 2> pools_{BlockPool(PoolKind::Small), BlockPool(PoolKind::Large)};
  std::vector<ExpandableSegment> expandable_;
  // Blocks whose free was requested but not completed, FIFO; entries go stale when completed.
  std::vector<std::pair<NodeId, std::uint32_t>> pending_;
  std::size_t pending_live_ = 0;
  // mutable: settle_active() fills active/active_bytes in on read (see split_active()).
  mutable DeviceStats stats_;
  bool active_split_ = false;     // a block has gone pending: the active stats are updated on their own
  bool keep_usage_stats_ = true;  // skip_usage_stats()
  Bytes total_ = 0;
  std::uint32_t serial_ = 0;
  std::string last_oom_;
  std::vector<FreeEntry> scratch_;  // walks over a pool that free blocks as they go
  std::vector<NodeId> scratch_ids_;
  // From prepare(): evidence on the initial allocations of that trace, and its ranges' bases.
  std::vector<InitialAllocation> evidence_for_;
  StartEvidence evidence_;
  std::vector<ExpandableRangeStart> range_starts_;
  mutable DecisionBounds bounds_;  // recorded at the comparison sites (should_split is const)
};

// oom_message.cpp
std::string format_size(Bytes size);
struct OomFacts {
  Version version = Version::Newest;
  Bytes alloc_size = 0;
  Bytes device_total = 0;
  Bytes device_free = 0;
  std::optional<Bytes> allowed;
  Bytes allocated = 0;  // allocated_bytes.all.current
  Bytes reserved = 0;   // reserved_bytes.all.current
};
std::string oom_message(const OomFacts& facts);

}  // namespace fraglab::cca
