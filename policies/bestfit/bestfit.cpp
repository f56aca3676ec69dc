// bestfit: one growing arena in a reserved virtual address range, carved by global best fit,
// backed by physical pages mapped on demand and unmapped when free runs get large.
//
// What it models: the classic general-purpose heap (dlmalloc's best-fit large bins, XLA's
// BestFit heap simulator, TensorFlow's BFC allocator without its bins) placed on CUDA VMM the way
// expandable segments are (anchors.md §1.2, §5 gap 3: "buddy/TLSF/best-fit" on identical traces):
//  - the arena is one address range reserved on first use (reserve_range of twice the device
//    capacity, so a fragmented arena can still grow past its holes; physical memory, not address
//    space, is what runs out);
//  - requests are rounded up to 512 bytes; a block is carved from the low end of the smallest
//    free range that holds it, the lowest address among equal sizes (global best fit);
//  - when no free range fits, the arena grows at its top by whole pages; the free range at the
//    top (if any) merges with the new pages, so the block starts there;
//  - a freed block merges at once with the free ranges on either side;
//  - pages (device.granularity(), 2 MiB) are mapped when a block needs them, only the ones not
//    mapped yet; when a freed block leaves a coalesced free run of at least
//    release_threshold_mb, the whole pages inside that run are unmapped (0 = every whole free
//    page at once, never = kept until empty_cache or an out-of-memory flush);
//  - on a refused map (or a full address range): unmap every whole free page (a flush, counted
//    in num_alloc_retries) and try once more, then report out of memory.
//
// Invariants:
//  - [base_, top_) is page aligned and is partitioned exactly into live blocks (live_) and the
//    free ranges of free_; nothing above top_ is mapped;
//  - a page is mapped iff a live block overlaps it, or it lies wholly inside a free range whose
//    pages have not been released (a page shared by a block and a free range stays mapped);
//  - a failed allocation leaves no trace: the arena does not grow and pages mapped for it are
//    unmapped again.
//
// Simplified / guessed: streams share the arena (a block is reusable once its free completes;
// pending frees are not reclaimed by a flush); no per-block header; the release rule looks at
// the coalesced run a free creates, not at time (no garbage-collection clock); the placement is
// blind to which free range has pages mapped already.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <unordered_map>

#include "common/free_ranges.hpp"
#include "common/mapped_pages.hpp"
#include "common/node_pool.hpp"
#include "fraglab/policy_kit.hpp"
#include "fraglab/seeded_hash.hpp"

namespace fraglab::bestfit {
namespace {

constexpr Bytes kAlignment = 512;  // block sizes and offsets, as cudaMalloc's granularity
constexpr Bytes kNever = std::numeric_limits<Bytes>::max();
using kit::align_down;
using kit::align_up;

struct Options {
  Bytes release_threshold;  // kNever = keep free pages mapped
};

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("bestfit", text);
  return Options{reader.get<Bytes>("release_threshold_mb", "a whole number of MiB >= 0 or 'never'",
                                   [](std::string_view v) -> std::optional<Bytes> {
                                     return v == "never" ? kNever : kit::parse_whole_units(v, MiB);
                                   })};
}

class BestFitPolicy final : public kit::DirectDefaults<BestFitPolicy, kit::RetryingPolicy> {
 public:
  BestFitPolicy(Options options, Device& device)
      : device_(device), options_(options), page_(device.granularity()), mapped_(device) {}

  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    const Bytes rounded = kit::round_request(size, kAlignment);
    address_space_full_ = false;
    // The cache flush: give back every cached page, then one more try.
    const std::optional<Addr> addr = with_flush_and_retry<Addr>(
        [&] { return try_allocate(rounded); },
        [&] {
          device_.synchronize();  // a flush waits for the device (README "Device time")
          release_free_pages();
        },
        [&] {
          return fmt::format(
              "bestfit: out of memory allocating {} bytes ({} rounded): {} of {} bytes reserved, arena {} bytes, "
              "{} bytes free in it, largest free range {} bytes{}",
              size, rounded, device_.reserved(), device_.capacity(), top_ - base_, free_.total(), free_.largest(),
              address_space_full_ ? fmt::format("; the reserved address range ({} bytes) is used up", va_end_ - base_)
                                  : "");
        });
    if (!addr) return std::nullopt;
    return Block{*addr, rounded, size, stream, 0};
  }

  void free_requested(const Block& /*block*/) override {}  // reusable only once the free completes

  void free_completed(const Block& block) override {
    live_.erase(block.addr);
    allocated_ -= block.size;
    const FreeRanges::Range run = free_.insert(block.addr, block.size);
    if (run.size < options_.release_threshold) return;
    const Addr lo = align_up(run.addr, page_);
    const Addr hi = align_down(run.end(), page_);
    if (lo < hi) released_bytes_ += mapped_.unmap_within(lo, hi);
  }

  void empty_cache() override { release_free_pages(); }

  std::vector<std::string> audit() const override {
    kit::AuditLog log("bestfit");
    audit_arena(log, base_, top_, {live_.begin(), live_.end()}, free_, mapped_, page_);
    Bytes live_bytes = 0;
    for (const auto& [addr, size] : live_) live_bytes += size;
    log.require(live_bytes == allocated_,
                [&] { return fmt::format("live blocks hold {} bytes, allocated says {}", live_bytes, allocated_); });
    return log.take();
  }

  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    Bytes cached = 0;  // mapped bytes inside free ranges
    for (const auto& [addr, size] : free_.by_address()) cached += mapped_.mapped_within(addr, addr + size);
    auto i64 = [](Bytes b) { return static_cast<std::int64_t>(b); };
    return {
        {"arena_bytes", i64(top_ - base_)},
        {"address_space_bytes", i64(va_end_ - base_)},
        {"mapped_bytes", i64(mapped_.mapped_bytes())},
        {"mapped_runs", i64(mapped_.runs().size())},
        {"allocated_bytes", i64(allocated_)},
        {"live_blocks", i64(live_.size())},
        {"free_bytes", i64(free_.total())},
        {"free_ranges", i64(free_.count())},
        {"largest_free_range", i64(free_.largest())},
        {"cached_mapped_free_bytes", i64(cached)},
        {"arena_growths", i64(growths_)},
        {"released_bytes", i64(released_bytes_)},
        {"release_threshold", options_.release_threshold == kNever ? -1 : i64(options_.release_threshold)},
    };
  }

  // One segment per mapped run (as PyTorch lists an expandable segment), its pieces being the
  // blocks and free ranges that lie in it; the segment sizes add up to the reserved bytes.
  std::vector<SegmentView> segments() const override {
    std::vector<SegmentView::Piece> blocks;
    blocks.reserve(live_.size() + free_.count());
    for (const auto& [addr, size] : live_) blocks.push_back({addr, size, true});
    return mapped_.segments(std::move(blocks), free_, "arena");
  }

 private:
  // Places a block of `size` (rounded) bytes and maps its pages. nullopt when the device refuses
  // a page or the address space is used up; the arena is then unchanged.
  std::optional<Addr> try_allocate(Bytes size) {
    if (va_end_ == base_ && !reserve_arena()) return std::nullopt;
    if (size > va_end_ - base_) {
      address_space_full_ = true;
      return std::nullopt;
    }
    Addr start = 0;
    Addr new_top = top_;
    if (std::optional<FreeRanges::Range> fit = free_.best_fit(size)) {
      start = fit->addr;
    } else {
      // Grow: the block starts at the free range touching the top, or at the top itself.
      start = top_;
      if (top_ > base_) {
        if (std::optional<FreeRanges::Range> tail = free_.containing(top_ - 1)) start = tail->addr;
      }
      new_top = align_up(start + size, page_);
      if (new_top > va_end_) {
        address_space_full_ = true;
        return std::nullopt;
      }
    }
    if (!mapped_.map_missing(align_down(start, page_), align_up(start + size, page_))) return std::nullopt;
    if (new_top > top_) {
      free_.insert(top_, new_top - top_);
      top_ = new_top;
      ++growths_;
    }
    free_.erase(start, size);
    live_.emplace(start, size);
    allocated_ += size;
    return start;
  }

  bool reserve_arena() {
    const Bytes size = align_up(2 * device_.capacity(), page_);
    std::optional<Addr> base = device_.reserve_range(size);
    if (!base) return false;
    base_ = top_ = *base;
    va_end_ = *base + size;
    return true;
  }

  // Unmaps the whole pages of every free range (the flush, and empty_cache).
  void release_free_pages() {
    std::vector<std::pair<Addr, Addr>> spans;  // collected first: unmapping does not touch free_
    for (const auto& [addr, size] : free_.by_address()) {
      const Addr lo = align_up(addr, page_);
      const Addr hi = align_down(addr + size, page_);
      if (lo < hi) spans.emplace_back(lo, hi);
    }
    for (const auto& [lo, hi] : spans) released_bytes_ += mapped_.unmap_within(lo, hi);
  }

  Device& device_;
  const Options options_;
  const Bytes page_;
  Addr base_ = 0;    // start of the reserved range (0 until the first allocation)
  Addr top_ = 0;     // end of the arena: everything above is untouched address space
  Addr va_end_ = 0;  // end of the reserved range
  FreeRanges free_;
  MappedPages mapped_;
  // Live blocks by address, for segments(); hashed because only lookups by address happen on
  // the replay path (segments() sorts, so iteration order never shows).
  // seeded: an adopted start state names addresses; pooled nodes (common/node_pool.hpp): one is
  // made and dropped per block.
  std::unordered_map<Addr, Bytes, SeededHash, std::equal_to<>, NodePoolAllocator<std::pair<const Addr, Bytes>>> live_;
  Bytes allocated_ = 0;
  std::uint64_t growths_ = 0;
  Bytes released_bytes_ = 0;
  bool address_space_full_ = false;  // why the last attempt failed, for the message
};

const PolicyRegistration registration{PolicyInfo{
    "bestfit",
    "one growing VMM arena carved by global best fit, pages mapped on demand and released from large free runs",
    "Textbook best fit with immediate coalescing (dlmalloc's large bins, XLA's BestFit heap simulator, TF's BFC "
    "without bins), placed on CUDA VMM like expandable segments (docs/allocator-model.md §7): one reserved address "
    "range "
    "(twice the capacity), 512-byte rounding, smallest free range that fits (lowest address on ties), growth at "
    "the top in whole pages. Physical memory is handled at page granularity (2 MiB): mapped when a block needs a "
    "page, unmapped when a coalesced free run reaches release_threshold_mb, all whole free pages on empty_cache "
    "and on the out-of-memory flush. Simplified: streams share one arena, no block headers, no time-based "
    "release, placement ignores which free pages are still mapped.",
    {
        {"release_threshold_mb", "64",
         "unmap the whole free pages of a coalesced free run this large (MiB); 0 = every whole free page at once, "
         "never = only on empty_cache / out-of-memory flush"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<BestFitPolicy>(parse_options(options), device);
    }}};

}  // namespace
}  // namespace fraglab::bestfit
