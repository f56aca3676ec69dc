// cuda_async: PyTorch's `backend:cudaMallocAsync` — every request is cudaMallocAsync(n, stream)
// on the device's default memory pool, every free cudaFreeAsync (anchors.md §1.3, allocator-model §9).
//
// What is documented, and modelled as documented:
//  - PyTorch (c10/cuda/CUDAMallocAsyncAllocator.cpp): no rounding, pools or splitting of its own;
//    the default pool gets ReleaseThreshold = UINT64_MAX and the three reuse policies switched on;
//    a tensor is freed on its creation stream, or, after record_stream, on a "unifying" stream
//    made to wait on every usage stream (the trace's free_requested ... free_completed);
//    empty_cache() = cudaDeviceSynchronize() + cudaMemPoolTrimTo(pool, 0); the statistics are the
//    pool attributes ReservedMemCurrent/High and UsedMemCurrent/High.
//  - The driver (CUDA Programming Guide, "Stream-Ordered Memory Allocator": Memory Reuse Policies,
//    Physical Page Caching Behavior, Synchronization API Actions; cuMemPoolSetAttribute and
//    cudaMemPoolTrimTo in the driver/runtime API): memory freed on a stream is reusable at once by
//    later allocations on that stream; once a synchronisation shows the free is done, by every
//    stream; with ReuseAllowOpportunistic, as soon as the free's stream has passed it; with
//    ReuseAllowInternalDependencies, when no more physical memory can be had, memory still pending
//    on another stream is reused (the allocating stream is made to wait); at a synchronisation the
//    pool releases memory above its release threshold; TrimTo releases unused memory.
//
// What the driver does not document, and this policy guesses (change here if you know better):
//  - the pool reserves one address range (twice the device capacity) at the first request and
//    maps physical memory into it in pages of the device's granularity (2 MiB) on demand;
//  - requests are rounded up to 512 bytes (0 bytes to 512) and carved by best fit with immediate
//    coalescing of free neighbours (smallest fitting free range, lowest address on ties); when
//    nothing fits, the pool grows at the top of the range, starting in the free run touching it;
//  - a plain free on stream S: other streams reuse it only after the next synchronisation point
//    (when S's GPU work passes the free is not in a trace, so opportunistic reuse of it is not
//    assumed); a deferred free is reusable by every stream at its free_completed (that is when
//    the usage streams are known done: opportunistic reuse); with opportunistic:False only at the
//    next synchronisation point after it;
//  - synchronisation points in a trace: empty_cache, the out-of-memory flush, and the `mark`
//    events named by sync_on_mark (default: "step" marks, as a training loop synchronises once a
//    step — loss.item(), optimizer bookkeeping; phase marks are not synchronisations);
//  - trimming releases the whole free pages, highest addresses first, until reserved bytes are at
//    most the release threshold;
//  - the out-of-memory path: PyTorch's backend raises at once when cudaMallocAsync fails. Here, as
//    for every fraglab policy, the device refusal first costs a flush — a device synchronisation
//    (which also completes every deferred free still awaiting free_completed) and TrimTo(0),
//    counted in num_alloc_retries — and one more try; only then out of memory.
// Not modelled: the memory-fraction limit, CUDA graphs, IPC pools, the driver's own placement
// heuristics beyond best fit, the cost of map/unmap.
//
// Invariants:
//  - [base_, top_) is partitioned into the blocks handed out and not yet returned (slots_ in
//    state Live or FreeRequested) and the free bytes of space_; nothing above top_ is mapped;
//  - a page is mapped iff a block overlaps it or it was mapped and not trimmed since;
//  - used_ = Σ sizes of slots in state Live or FreeRequested;
//  - a failed placement leaves no trace: pages mapped for it are unmapped again.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/mapped_pages.hpp"
#include "cuda_async/stream_free_space.hpp"
#include "fraglab/policy_kit.hpp"

namespace fraglab::cuda_async {
namespace {

constexpr Bytes kRounding = 512;
constexpr Bytes kNoTrim = std::numeric_limits<Bytes>::max();  // ReleaseThreshold UINT64_MAX
using kit::align_down;
using kit::align_up;

// Which `mark` events of the trace stand for a device synchronisation.
enum class SyncOnMark { Step, All, None };  // in the order parse_options names them

// The options, named as the pool attributes they set (their defaults: the registration below).
struct Options {
  Bytes release_threshold;     // cudaMemPoolAttrReleaseThreshold; PyTorch sets UINT64_MAX (never trim)
  bool opportunistic;          // cudaMemPoolReuseAllowOpportunistic
  bool internal_dependencies;  // cudaMemPoolReuseAllowInternalDependencies
  SyncOnMark sync_on_mark;
};

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("cuda_async", text);
  return Options{
      reader.get<Bytes>("release_threshold", "a byte size (e.g. 0, 512MiB, 4GiB) or 'max'",
                        [](std::string_view v) { return v == "max" ? kNoTrim : kit::parse_bytes(v); }),
      reader.flag("opportunistic"),
      reader.flag("internal_dependencies"),
      static_cast<SyncOnMark>(reader.choice("sync_on_mark", {"step", "all", "none"})),
  };
}

class CudaAsyncPolicy final : public kit::DirectDefaults<CudaAsyncPolicy, kit::RetryingPolicy> {
 public:
  CudaAsyncPolicy(Options options, Device& device)
      : device_(device), options_(options), page_(device.granularity()), pages_(device) {
    device.set_vmm_calls_inside_pool_calls();  // charged as cudaMallocAsync / cudaMemPoolTrimTo
  }

  // Inlined into allocate_into (kit::DirectDefaults), the call the Replayer makes at every alloc.
  [[gnu::always_inline]] std::optional<Block> allocate(Bytes size, StreamId stream) override {
    // A request beyond any address range (a corrupt size) must not wrap the arithmetic below.
    const Bytes rounded = kit::round_request(size, kRounding);
    const Bytes mapped_before = pages_.mapped_bytes();
    const std::optional<Addr> addr = with_flush_and_retry<Addr>(
        [&] {
          std::optional<Addr> placed = place(rounded, stream, Reuse::StreamOrder);
          if (!placed && options_.internal_dependencies) placed = place(rounded, stream, Reuse::WaitOnOtherStreams);
          return placed;
        },
        [&] {  // the flush: a device synchronisation and TrimTo(0), then one more try
          device_.synchronize();
          synchronize(/*complete_deferred_frees=*/true);
          trim_to_zero_call();
        },
        [&] { return place(rounded, stream, Reuse::StreamOrder); },
        [&] {
          return fmt::format(
              "cuda_async: allocation of {} bytes ({} rounded) on stream 0x{:x} would exceed allowed memory (out "
              "of memory): pool reserved {} bytes, {} in use, device capacity {} bytes; {} bytes free in the pool's "
              "address range, largest free range {} bytes",
              size, rounded, stream, pages_.mapped_bytes(), used_, device_.capacity(), space_.all().total(),
              space_.all().largest());
        });
    // README "Device time": a request served from the pool's mapped memory is a hit; one that
    // made the pool map memory (or failed to) a miss.
    device_.charge(
        addr && pages_.mapped_bytes() <= mapped_before ? ApiCall::CudaMallocAsyncHit : ApiCall::CudaMallocAsyncMiss,
        rounded);
    if (!addr) return std::nullopt;
    used_ += rounded;
    used_high_ = std::max(used_high_, used_);
    return Block{*addr, rounded, size, stream, new_slot(*addr, rounded, stream)};
  }

  // The program freed it; the unifying stream still waits on its usage streams.
  void free_requested(const Block& block) override {
    Slot& slot = slots_[block.cookie];
    if (slot.state != SlotState::Live) return;
    slot.state = SlotState::FreeRequested;
    slot.awaiting_index = awaiting_completion_.size();
    awaiting_completion_.push_back(block.cookie);
  }

  void free_completed(const Block& block) override {
    Slot& slot = slots_[block.cookie];
    if (slot.state == SlotState::FreeRequested) forget_awaiting(slot);
    // A block the flush already returned (SlotState::ReturnedByFlush) has nothing left to do.
    if (slot.state != SlotState::ReturnedByFlush) {
      return_to_pool(slot, options_.opportunistic ? FreeKind::Shared : FreeKind::AwaitingSync);
    }
    release_slot(block.cookie);
  }

  // cudaFreeAsync on the creation stream.
  void free(const Block& block) override {
    Slot& slot = slots_[block.cookie];
    if (slot.state == SlotState::Live) {
      return_to_pool(slot, FreeKind::PendingOnStream);
      release_slot(block.cookie);
    } else {
      free_completed(block);  // a plain free after free_requested completes it
    }
  }

  // torch.cuda.empty_cache(): cudaDeviceSynchronize() + cudaMemPoolTrimTo(pool, 0).
  void empty_cache() override {
    synchronize(/*complete_deferred_frees=*/false);  // the Replayer charges the cudaDeviceSynchronize
    trim_to_zero_call();
  }

  void mark(std::string_view label, std::string_view /*value*/) override {
    const bool is_sync =
        options_.sync_on_mark == SyncOnMark::All || (options_.sync_on_mark == SyncOnMark::Step && label == "step");
    if (!is_sync) return;
    synchronize(/*complete_deferred_frees=*/false);
    trim_to(options_.release_threshold);
  }

  std::vector<std::string> audit() const override {
    kit::AuditLog log("cuda_async");
    std::vector<std::pair<Addr, Bytes>> blocks;
    Bytes used = 0;
    for (const Slot& s : slots_) {
      if (s.state != SlotState::Live && s.state != SlotState::FreeRequested) continue;
      blocks.emplace_back(s.addr, s.size);
      used += s.size;
    }
    space_.audit(log);
    audit_arena(log, base_, top_, std::move(blocks), space_.all(), pages_, page_);
    log.require(used == used_, [&] { return fmt::format("blocks in use hold {} bytes, used says {}", used, used_); });
    for (std::size_t i = 0; i < awaiting_completion_.size(); ++i) {
      const Slot& s = slots_[awaiting_completion_[i]];
      log.require(s.state == SlotState::FreeRequested && s.awaiting_index == i,
                  [&] { return fmt::format("awaiting-completion entry {} is stale", i); });
    }
    return log.take();
  }

  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    auto i64 = [](Bytes b) { return static_cast<std::int64_t>(b); };
    return {
        {"ReservedMemCurrent", i64(pages_.mapped_bytes())},
        {"ReservedMemHigh", i64(reserved_high_)},
        {"UsedMemCurrent", i64(used_)},
        {"UsedMemHigh", i64(used_high_)},
        {"address_range_used_bytes", i64(top_ - base_)},
        {"free_bytes", i64(space_.all().total())},
        {"free_ranges", i64(space_.all().count())},
        {"largest_free_range", i64(space_.all().largest())},
        {"pending_on_stream_bytes", i64(space_.pending_bytes())},
        {"awaiting_sync_bytes", i64(space_.awaiting_sync_bytes())},
        {"sync_points", i64(sync_points_)},
        {"trimmed_bytes", i64(trimmed_bytes_)},
        {"internal_dependency_reuses", i64(internal_dependency_reuses_)},
        {"release_threshold", options_.release_threshold == kNoTrim ? -1 : i64(options_.release_threshold)},
    };
  }

  // One segment per mapped run of pages; its pieces are the blocks and free ranges lying in it.
  std::vector<SegmentView> segments() const override {
    std::vector<SegmentView::Piece> blocks;
    blocks.reserve(slots_.size() + space_.all().count());
    for (const Slot& s : slots_) {
      if (s.state == SlotState::Live || s.state == SlotState::FreeRequested) blocks.push_back({s.addr, s.size, true});
    }
    return pages_.segments(std::move(blocks), space_.all(), "async_pool");
  }
  // Free mapped bytes the latest request's stream may reuse now are usable; those it may not before
  // the next synchronisation point (another stream's plain frees, completed deferred frees awaiting
  // a sync: stream_free_space.hpp) are stream-bound.
  FreeAnatomy free_anatomy(std::optional<StreamId> stream) const override {
    FreeAnatomy out = classify_free_pieces(segments());
    if (!stream) return out;
    for (const FreeRanges* ranges : space_.restricted_for(*stream)) {
      const FreeAnatomy bound = classify_free_pieces(pages_.segments({}, *ranges, "async_pool"));
      out.usable -= bound.usable;
      out.stream_bound += bound.usable;
      out.pieces += bound.pieces;
    }
    return out;
  }

 private:
  enum class Reuse { StreamOrder, WaitOnOtherStreams };
  enum class FreeKind { PendingOnStream, Shared, AwaitingSync };
  enum class SlotState : std::uint8_t { Unused, Live, FreeRequested, ReturnedByFlush };

  struct Slot {
    Addr addr = 0;
    Bytes size = 0;
    StreamId stream = 0;
    SlotState state = SlotState::Unused;
    std::size_t awaiting_index = 0;  // position in awaiting_completion_ while FreeRequested
  };

  // Places `size` bytes for `stream` and maps the pages under them. nullopt when nothing fits
  // that `reuse` allows and the pool cannot grow (address range used up, or the device refuses
  // a page); the pool is then unchanged.
  std::optional<Addr> place(Bytes size, StreamId stream, Reuse reuse) {
    if (base_ == 0 && !reserve_address_range()) return std::nullopt;
    if (size > va_end_ - base_) return std::nullopt;  // cannot fit the address range at all
    std::optional<StreamFreeSpace::Fit> fit =
        reuse == Reuse::StreamOrder ? space_.best_fit(size, stream) : space_.best_fit_any(size);
    if (fit) {
      if (!pages_.map_missing(align_down(fit->addr, page_), align_up(fit->addr + size, page_))) return std::nullopt;
      note_reserved();
      if (space_.take(fit->addr, size, stream, fit->source)) ++internal_dependency_reuses_;
      return fit->addr;
    }
    // Waiting on other streams only looks at freed memory: the pool already failed to grow.
    if (reuse == Reuse::WaitOnOtherStreams) return std::nullopt;
    const Addr start = space_.growth_start(top_, stream);
    const Addr new_top = align_up(start + size, page_);
    if (new_top > va_end_) return std::nullopt;
    if (!pages_.map_missing(align_down(start, page_), new_top)) return std::nullopt;
    note_reserved();
    if (new_top > top_) {
      space_.add_shared(top_, new_top - top_);  // fresh pages: nobody has used them yet
      top_ = new_top;
    }
    space_.take(start, size, stream);
    return start;
  }

  bool reserve_address_range() {
    const Bytes size = align_up(2 * device_.capacity(), page_);
    std::optional<Addr> base = device_.reserve_range(size);
    if (!base) return false;
    base_ = top_ = *base;
    va_end_ = *base + size;
    return true;
  }

  void return_to_pool(const Slot& slot, FreeKind kind) {
    used_ -= slot.size;
    switch (kind) {
      case FreeKind::PendingOnStream:
        space_.add_pending(slot.addr, slot.size, slot.stream);
        break;
      case FreeKind::Shared:
        space_.add_shared(slot.addr, slot.size);
        break;
      case FreeKind::AwaitingSync:
        space_.add_awaiting_sync(slot.addr, slot.size);
        break;
    }
  }

  // Every stream has caught up: every free byte is reusable by every stream. The flush also
  // ends the wait of deferred frees (the device synchronisation completes their usage streams);
  // empty_cache and marks leave them to their free_completed, which the trace places.
  void synchronize(bool complete_deferred_frees) {
    ++sync_points_;
    if (complete_deferred_frees) {
      for (std::uint64_t cookie : awaiting_completion_) {
        Slot& slot = slots_[cookie];
        return_to_pool(slot, FreeKind::Shared);
        slot.state = SlotState::ReturnedByFlush;
      }
      awaiting_completion_.clear();
    }
    space_.synchronize();
  }

  // An explicit cudaMemPoolTrimTo(pool, 0), charged with the bytes it releases (README "Device
  // time"; the driver's own trims to the release threshold at synchronisation points are not API
  // calls of the program and are not charged).
  void trim_to_zero_call() {
    const Bytes before = pages_.mapped_bytes();
    trim_to(0);
    device_.charge(ApiCall::CudaMemPoolTrimTo, before - pages_.mapped_bytes());
  }

  // Unmaps whole free pages, highest addresses first, until at most `limit` bytes are mapped.
  void trim_to(Bytes limit) {
    if (pages_.mapped_bytes() <= limit) return;
    const Bytes budget = pages_.mapped_bytes() - limit;
    Bytes released = 0;
    const auto& ranges = space_.all().by_address();
    for (auto it = ranges.rbegin(); it != ranges.rend() && released < budget; ++it) {
      const Addr lo = align_up(it->addr, page_);
      const Addr hi = align_down(it->end(), page_);
      if (lo < hi) released += pages_.unmap_from_top(lo, hi, budget - released, page_);
    }
    trimmed_bytes_ += released;
  }

  void note_reserved() { reserved_high_ = std::max(reserved_high_, pages_.mapped_bytes()); }

  std::uint64_t new_slot(Addr addr, Bytes size, StreamId stream) {
    std::uint64_t index = 0;
    if (!unused_slots_.empty()) {
      index = unused_slots_.back();
      unused_slots_.pop_back();
    } else {
      index = slots_.size();
      slots_.emplace_back();
    }
    slots_[index] = Slot{addr, size, stream, SlotState::Live, 0};
    return index;
  }

  void release_slot(std::uint64_t index) {
    slots_[index].state = SlotState::Unused;
    unused_slots_.push_back(index);
  }

  void forget_awaiting(const Slot& slot) {
    const std::uint64_t moved = awaiting_completion_.back();
    awaiting_completion_[slot.awaiting_index] = moved;
    slots_[moved].awaiting_index = slot.awaiting_index;
    awaiting_completion_.pop_back();
  }

  Device& device_;
  const Options options_;
  const Bytes page_;
  Addr base_ = 0;    // start of the reserved address range (0 until the first request)
  Addr top_ = 0;     // everything above is untouched address space
  Addr va_end_ = 0;  // end of the reserved range
  StreamFreeSpace space_;
  MappedPages pages_;
  std::vector<Slot> slots_;  // Block::cookie indexes it
  std::vector<std::uint64_t> unused_slots_;
  std::vector<std::uint64_t> awaiting_completion_;  // slots in state FreeRequested
  Bytes used_ = 0;
  Bytes used_high_ = 0;
  Bytes reserved_high_ = 0;
  std::uint64_t sync_points_ = 0;
  Bytes trimmed_bytes_ = 0;
  std::uint64_t internal_dependency_reuses_ = 0;
};

const PolicyRegistration registration{PolicyInfo{
    "cuda_async",
    "PyTorch's backend:cudaMallocAsync: the driver's stream-ordered memory pool (cudaMallocAsync/cudaFreeAsync)",
    "Modelled from PyTorch's CUDAMallocAsyncAllocator.cpp and the CUDA programming guide (allocator-model "
    "§9): per-stream reuse order (a stream reuses its own frees at once, other streams after a "
    "synchronisation; a deferred free is reusable by all at its completion with opportunistic reuse), "
    "internal dependencies when the pool cannot grow, ReleaseThreshold trimming at synchronisation points, "
    "empty_cache = device sync + TrimTo(0), ReservedMem/UsedMem statistics. The driver's placement is "
    "undocumented; GUESSED: one address range of twice the capacity mapped in 2 MiB pages on demand, "
    "512-byte rounding, best fit with coalescing, growth at the top, trimming highest pages first, `step` "
    "marks as synchronisation points. PyTorch raises OOM at once; here a device sync + TrimTo(0) and one "
    "retry come first (num_alloc_retries). Not modelled: memory fraction, CUDA graphs, IPC.",
    {
        {"release_threshold", "max",
         "bytes the pool keeps at a synchronisation point (e.g. 0, 512MiB); max = UINT64_MAX as PyTorch sets it "
         "(never trims except empty_cache and the OOM flush)"},
        {"opportunistic", "True",
         "ReuseAllowOpportunistic: a completed deferred (record_stream) free is reusable by every stream at once; "
         "False: after the next synchronisation point"},
        {"internal_dependencies", "True",
         "ReuseAllowInternalDependencies: when the pool cannot grow, reuse memory still pending on another stream"},
        {"sync_on_mark", "step", "trace marks that synchronise the device: step (label \"step\"), all, none"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<CudaAsyncPolicy>(parse_options(options), device);
    }}};

}  // namespace
}  // namespace fraglab::cuda_async
