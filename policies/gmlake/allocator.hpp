// GMLake: GPU memory defragmentation by virtual memory stitching (Guo et al., ASPLOS'24;
// anchors.md §1.1). Behaviour follows the public code, intelligent-machine-learning/glake
// GMLake/src/CUDACachingAllocator.cpp and GMLake/include/cuda_vmm_allocator.h (PyTorch 2.0
// CachingAllocator patched; read at commits 392d840a / e16f31d8), decision by decision where the
// simulated device can express it. Names in [brackets] are the code's. Files: allocator.cpp (the
// ladder, frees, flushes, reports), pblocks.cpp (segments and block chains), stitching.cpp
// (sBlocks), audit.cpp (the invariants below, re-derived; option self_check), options.hpp,
// policy.cpp (option parsing, registration).
//
// The model
//  - Small requests (<= 1 MiB) go to PyTorch's small pool unchanged: an inner pytorch-policy
//    CachingAllocator (PyTorch 2.0, the base GMLake patches) that only ever sees small requests.
//  - Large requests are rounded up to 2 MiB [round_size: kGranularity]. A new pBlock segment is
//    20 MiB for requests under 10 MiB, else the rounded size [get_allocation_size]; it is one
//    virtual range (reserve_range) with all its pages mapped (map) [VmmSegment of 2 MiB
//    PhyBlocks]. Blocks of a segment form an address-ordered chain, as PyTorch's large pool:
//    best fit on (stream, size, address), split at 2 MiB boundaries, merged with free neighbours
//    on free, only whole (unsplit) segments are released [get_free_block, should_split,
//    free_block, release_blocks].
//  - Stitching [get_fused_fragmented_blocks]: for a request of at least frag_limit, take the
//    stream's free pBlocks from the largest down until they cover the request (at least two free
//    blocks, and they must cover it: otherwise no stitch); the smallest taken one is split so the
//    sum is exact; a new virtual range of the request's size gets one map_alias per piece, in that
//    order. No new memory: the Device does not count aliases. The pieces become "held": in use,
//    not handed out.
//  - The malloc ladder [malloc]: free pBlock best fit -> cached sBlock (only when no pBlock fits)
//    -> stitch (time 0) -> new pBlock segment -> stitch (time 1) -> flush: complete pending frees,
//    release every unsplit free pBlock and the small pool's cache, retry the new segment
//    (num_alloc_retries) -> stitch (time 2) -> out of memory. A stitch runs only when
//    time >= defrag_level.
//  - sBlock cache [free_fused_blocks, fragmented_free_fused_blocks]: a freed sBlock keeps its
//    range and aliases. It is "clean" (reusable) while all its pages are free, "fragmented" while
//    some page is used by another block (it is then skipped, and becomes clean again when those
//    pages are freed). A clean sBlock serves a request no pBlock fits when its size <= request *
//    reuse_limit (best fit); only the request's prefix of pages is taken, the tail pages stay free
//    pBlock memory [keep_blocks]. The handed-out Block is that prefix.
//  - GC [garbage_collect_fused_blocks(2, 0)]: when the bytes of sBlocks created and not collected
//    [total_fuse_size] exceed auto_gc GiB after a stitch, and at empty_cache, every cached sBlock
//    (fragmented first, then clean, each in release order) is torn down: unmap_alias per piece,
//    release_range. Releasing a pBlock segment first tears down the cached sBlocks that show it,
//    and unmaps the (unused-tail) aliases of live ones, which are then torn down when freed
//    [release_block, active_fused_blocks_to_gc].
//
// Invariants
//  - every pBlock is Free (in free_pblocks_), Allocated (handed out) or Held (by one live sBlock);
//    a Free block never has a Free neighbour (merge on free), so a run of free pages of a segment
//    is one Free block;
//  - an sBlock's busy_pages = number of its mapped pages that are in use (Allocated or Held),
//    kept by mark_range() on every Free <-> used change; a cached sBlock is clean iff busy_pages
//    is 0 and then sits in clean_sblocks_, otherwise in fragmented_;
//  - every mapped alias piece is listed in its source segment's `pieces`; a segment is unmapped
//    only after every alias of it is unmapped (SimDevice throws otherwise);
//  - a live sBlock's handed-out prefix [addr, addr + used) is backed by aliases of pages it holds.
//
// Simplified or guessed (also in the policy's `source` line)
//  - one map / map_alias per contiguous piece instead of one cuMemMap per 2 MiB PhyBlock (memory
//    is identical; device-call counts are lower than the real driver calls);
//  - GMLake's reaction to cuMemAddressReserve / cuMemMap failures (GC and retry up to 3 times) is
//    not modelled: the simulated device never runs out of address space or mappings;
//  - re_alloc (reAlloc, default off) is applied only to requests that may be stitched: the code
//    also applies it below fragLimit, where its stitch refuses and the new block is left cached;
//  - the small pool's OOM ladder is the inner allocator's; when it fails we release the large
//    pool's cache and ask once more, and count one retry and at most one OOM, as GMLake's single
//    ladder (which flushes both pools) would;
//  - PYTORCH_CUDA_ALLOC_CONF knobs (max_split_size_mb, roundup_power2_divisions,
//    garbage_collection_threshold), memory fractions and CUDA graphs are not modelled;
//  - kept as the code does it: a fragmented sBlock stays mapped (not torn down when another block
//    takes one of its pages) until GC or the release of a pBlock it shows; total_fuse_size only
//    drops when GC collects an sBlock, not when an sBlock is torn down because its pBlock was
//    released or because it was doomed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/node_pool.hpp"
#include "fraglab/device.hpp"
#include "fraglab/policy_kit.hpp"
#include "gmlake/options.hpp"
#include "pytorch/caching_allocator.hpp"

namespace fraglab::gmlake {

inline constexpr Bytes kPage = 2 * MiB;          // [kGranularity]: PhyBlock size, large rounding
inline constexpr Bytes kSmallSize = 1 * MiB;     // largest request of the small pool
inline constexpr Bytes kLargeBuffer = 20 * MiB;  // segment size for requests under kMinLargeAlloc
inline constexpr Bytes kMinLargeAlloc = 10 * MiB;
inline constexpr Bytes kMaxRequest = kit::kImpossibleRequest;  // ">= 1 EB" fails up front, as PyTorch

using Id = std::uint32_t;
inline constexpr Id kNone = 0xffffffffu;

// A pBlock: a contiguous run of pages of one segment.
enum class Use : std::uint8_t { Free, Allocated, Held };
struct PBlock {
  Addr addr = 0;
  Bytes size = 0;
  Bytes requested = 0;
  StreamId stream = 0;
  Id prev = kNone;  // address-ordered chain within the segment
  Id next = kNone;
  Id segment = kNone;
  Id holder = kNone;  // the live sBlock holding it (Use::Held)
  std::uint32_t serial = 0;
  Use use = Use::Free;
  bool pending = false;  // free requested, not completed (still Allocated)
  bool live = false;
  bool is_split() const { return prev != kNone || next != kNone; }
};

// One pBlock segment: a reserved range with all pages mapped (or a cudaMalloc range when
// vmm_defragment is off).
struct Segment {
  Addr addr = 0;
  Bytes size = 0;
  StreamId stream = 0;
  Id head = kNone;
  bool vmm = true;
  bool live = false;
  std::vector<std::pair<Id, std::uint32_t>> pieces;  // (sBlock, piece index) aliasing this segment
};

// One alias of an sBlock: [sblock.addr + offset, + size) shows the pages at [source, + size).
struct Piece {
  Bytes offset = 0;
  Addr source = 0;
  Bytes size = 0;
  Id segment = kNone;
  bool mapped = true;  // false once detached because its segment was released
};

enum class SState : std::uint8_t { Live, Clean, Fragmented };
struct SBlock {
  Addr addr = 0;
  Bytes size = 0;
  Bytes used = 0;  // while live: the prefix handed out
  Bytes requested = 0;
  StreamId stream = 0;
  std::vector<Piece> pieces;  // offset order
  std::vector<Id> held;       // pBlocks it holds while live
  std::uint64_t busy_pages = 0;
  std::uint64_t released_at = 0;  // release order (LRU) for GC
  std::uint32_t serial = 0;
  SState state = SState::Live;
  bool pending = false;
  bool doomed = false;  // a piece was detached: torn down when freed
  bool live = false;
};

// (stream, size, address): best fit is lower_bound(stream, size, 0).
struct SizeKey {
  StreamId stream;
  Bytes size;
  Addr addr;
  Id id;
  auto operator<=>(const SizeKey&) const = default;
};

class Allocator {
 public:
  Allocator(Options options, Device& device);

  std::optional<Block> malloc(Bytes size, StreamId stream);
  void free_requested(const Block& block);
  void free_completed(const Block& block);
  void free(const Block& block);
  void empty_cache();

  PolicyCounters counters() const;
  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const;
  std::vector<SegmentView> segments() const;
  const std::string& last_oom_message() const { return last_oom_; }
  const Options& options() const { return options_; }
  // audit.cpp: recomputes the invariants above; throws std::logic_error naming the first broken.
  void audit() const;

 private:
  struct Request {
    Bytes requested;
    Bytes rounded;
    Bytes alloc_size;
    StreamId stream;
  };
  enum class Handle : std::uint8_t { None, PBlock, SBlock };

  // allocator.cpp: the ladder, frees, flushes
  std::optional<Block> malloc_small(Bytes size, StreamId stream);
  std::optional<Block> malloc_large(const Request& r);
  std::optional<Block> allocate_new_segment(const Request& r);
  Handle resolve(const Block& block, Id& id) const;  // a handed-out large block, or None if stale
  void complete_free(Handle kind, Id id);
  void complete_pending_frees();
  void release_cached_pblocks();
  bool has_releasable_large_memory() const;
  std::optional<Block> out_of_memory(Bytes size, StreamId stream, const char* pool);
  std::string oom_text(Bytes size, StreamId stream, const char* pool) const;
  std::uint64_t cookie(Handle kind, Id id, std::uint32_t serial) const;

  // pblocks.cpp: segments, chains, the free set
  Id create_segment(Bytes size, StreamId stream);
  void release_segment(Id segment);
  Id new_pblock();
  Id split_tail(Id block, Bytes keep);  // block keeps its first `keep` bytes; returns the tail
  Id carve(Addr addr, Bytes size);      // cuts [addr, + size) out of the Free block holding it
  void insert_free(Id block);
  void erase_free(Id block);
  void make_free(Id block);  // mark Free, merge with Free neighbours, insert
  Block hand_out_pblock(Id block, const Request& r);
  void mark_range(Id segment, Addr addr, Bytes size, bool used);

  // stitching.cpp: sBlocks
  bool may_stitch(const Request& r, int time) const;
  std::optional<Block> stitch(const Request& r, int time);
  std::optional<Block> reuse_cached_sblock(const Request& r);
  void free_sblock(Id sblock);
  void tear_down(Id sblock);
  void detach_piece(Id sblock, std::uint32_t piece);
  void collect_garbage();
  void set_state(Id sblock, SState state);
  Id new_sblock();

  Options options_;
  Device& device_;
  cca::CachingAllocator small_;

  std::vector<PBlock> pblocks_;
  std::vector<Id> spare_pblocks_;
  std::vector<Segment> segments_;
  std::vector<Id> spare_segments_;
  // Pooled nodes (common/node_pool.hpp): these trees change on nearly every large request.
  PooledMap<Addr, Id> pblock_at_;  // every live pBlock by address
  PooledSet<SizeKey> free_pblocks_;

  std::vector<SBlock> sblocks_;
  std::vector<Id> spare_sblocks_;
  PooledSet<SizeKey> clean_sblocks_;                               // reusable, best fit
  PooledSet<std::pair<std::uint64_t, Id>> clean_by_release_;       // GC order
  PooledSet<std::pair<std::uint64_t, Id>> fragmented_by_release_;  // GC order

  // Large blocks whose free was requested, not completed: (kind, id, serial); stale entries are
  // skipped.
  struct PendingFree {
    Handle kind;
    Id id;
    std::uint32_t serial;
  };
  std::vector<PendingFree> pending_;
  std::size_t pending_compact_at_ = 1024;  // amortises the sweep of stale entries

  std::uint32_t serial_ = 0;
  std::uint64_t release_clock_ = 0;
  Bytes fused_bytes_ = 0;  // [total_fuse_size]
  std::vector<Id> scratch_;

  // counters
  std::uint64_t retries_ = 0;
  std::uint64_t ooms_ = 0;
  std::uint64_t hidden_small_retries_ = 0;  // inner-ladder counts folded into one GMLake ladder
  std::uint64_t hidden_small_ooms_ = 0;
  std::uint64_t stitches_ = 0;
  std::uint64_t stitched_bytes_ = 0;
  std::uint64_t sblock_reuses_ = 0;
  std::uint64_t teardowns_ = 0;
  std::uint64_t gc_runs_ = 0;
  std::string last_oom_;
};

}  // namespace fraglab::gmlake
