// buddy: the binary buddy system (Knuth, TAOCP vol. 1, §2.5, Algorithms R and S; Knowlton
// 1965) over device mallocs, one of the classic designs anchors.md §5 (gap 3) asks to compare on
// the same traces as the caching allocator.
//
// What it models:
//  - a block of order k is min_block << k bytes and starts at a multiple of its size from the
//    start of its top-level block; its buddy is the other half of the order-(k+1) block that
//    holds it: offset XOR (min_block << k);
//  - top-level blocks of order max_order (min_block << max_order bytes, 1 GiB by default) are
//    device mallocs, taken one at a time when no free block is large enough;
//  - a request is served by a block of the smallest order whose size holds it (the size rounded
//    up to a power of two, at least min_block); if no block of that order is free, the smallest
//    larger free block is split in halves, keeping the lower half and freeing the upper one, until
//    the order fits (Algorithm R);
//  - a freed block merges with its buddy while the buddy is free, order by order (Algorithm S);
//  - a request larger than a top-level block gets a device malloc of its own, of the request
//    rounded up to a power of two, which goes straight back to the device when freed;
//  - a top-level block whose halves have all merged back stays cached, free, until empty_cache or
//    the out-of-memory flush returns it (device free), before one retry.
//
// Invariants:
//  - free_by_order_[k] holds the addresses of the free blocks of order k; no free block has its
//    buddy free in the same order (merging is immediate), so a fully free top-level block is
//    exactly one entry of free_by_order_[max_order];
//  - every top-level block is partitioned into live blocks (live_) and free blocks;
//  - a Block's cookie is the base of the top-level block it came from (kOwnMalloc for a request
//    with its own device malloc), so a free needs no lookup to find its buddy.
//
// Choices the textbook leaves open: Knuth's AVAIL lists are LIFO; here each order's free list
// is kept in address order and the lowest address is taken (deterministic, and it packs live
// blocks into the oldest top-level blocks so the others can become wholly free). Streams share
// the blocks; a block is reusable once its free completes. No block headers or tag bits cost
// memory (the bookkeeping lives off the device).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <unordered_map>

#include "fraglab/policy_kit.hpp"
#include "fraglab/seeded_hash.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::buddy {
namespace {

constexpr Bytes kDefaultTopBlock = 1 * GiB;
constexpr unsigned kMaxOrderLimit = 40;
constexpr Bytes kTopBlockLimit = Bytes{1} << 40;  // 1 TiB: far beyond any device
constexpr std::uint64_t kOwnMalloc = 0;           // cookie of a block with its own device malloc

struct Options {
  Bytes min_block;     // 512 by default
  unsigned max_order;  // 21 by default: 512 << 21 = 1 GiB
};

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("buddy", text);
  Options options{
      reader.get<Bytes>("min_block", "a power of two number of bytes (e.g. 512, 4KiB)",
                        [](std::string_view v) -> std::optional<Bytes> {
                          const std::optional<Bytes> b = kit::parse_bytes(v);
                          if (!b || *b == 0 || !std::has_single_bit(*b) || *b > kTopBlockLimit) return std::nullopt;
                          return b;
                        }),
      static_cast<unsigned>(
          reader.get<std::uint64_t>("max_order", fmt::format("a whole number from 0 to {}", kMaxOrderLimit),
                                    [](std::string_view v) { return kit::parse_whole(v, kMaxOrderLimit); })),
  };
  if (!reader.given("max_order")) {
    // Keep the top-level block at 1 GiB whatever the minimum block.
    options.max_order = options.min_block >= kDefaultTopBlock
                            ? 0
                            : static_cast<unsigned>(std::countr_zero(kDefaultTopBlock / options.min_block));
  }
  if (options.max_order > kMaxOrderLimit || (options.min_block << options.max_order) > kTopBlockLimit) {
    throw InputError(fmt::format("buddy: max_order: min_block << max_order = {} << {} exceeds 1 TiB", options.min_block,
                                 options.max_order));
  }
  return options;
}

class BuddyPolicy final : public kit::DirectDefaults<BuddyPolicy, kit::RetryingPolicy> {
 public:
  BuddyPolicy(Options options, Device& device)
      : device_(device),
        min_block_(options.min_block),
        max_order_(options.max_order),
        top_size_(options.min_block << options.max_order),
        free_by_order_(options.max_order + 1) {}

  // Inlined into allocate_into (kit::DirectDefaults), the call the Replayer makes at every alloc.
  [[gnu::always_inline]] std::optional<Block> allocate(Bytes size, StreamId stream) override {
    // The cache flush: return every wholly free top-level block, then one more try.
    std::optional<Block> block = with_flush_and_retry<Block>(
        [&] { return try_allocate(size, stream); },
        [&] {
          device_.synchronize();  // a flush waits for the device (README "Device time")
          release_free_top_blocks();
        },
        [&] {
          return fmt::format(
              "buddy: out of memory allocating {} bytes ({} as a power of two): {} of {} bytes reserved, {} "
              "top-level blocks of {} bytes, {} bytes free in them, largest free block {} bytes",
              size, block_size_for(size), device_.reserved(), device_.capacity(), top_blocks_.size(), top_size_,
              free_bytes_, largest_free_block());
        });
    if (!block) return std::nullopt;
    allocated_ += block->size;
    requested_ += size;
    return block;
  }

  void free_requested(const Block& /*block*/) override {}  // reusable only once the free completes

  void free_completed(const Block& block) override {
    allocated_ -= block.size;
    requested_ -= block.requested;
    if (block.cookie == kOwnMalloc) {
      own_mallocs_.erase(block.addr);
      device_.free(block.addr);
      return;
    }
    live_.erase(block.addr);
    // Algorithm S: merge with the buddy while it is free.
    const Addr base = block.cookie;
    Addr addr = block.addr;
    unsigned order = order_of(block.size);
    while (order < max_order_) {
      const Addr buddy = base + ((addr - base) ^ (min_block_ << order));
      auto it = free_by_order_[order].find(buddy);
      if (it == free_by_order_[order].end()) break;
      free_by_order_[order].erase(it);
      addr = std::min(addr, buddy);
      ++order;
      ++merges_;
    }
    free_by_order_[order].insert(addr);
    free_bytes_ += block.size;
  }

  void empty_cache() override { release_free_top_blocks(); }

  // Every top-level block is tiled by live and free blocks, each aligned to its size, no free
  // block's buddy free in the same order; the byte counters match the blocks.
  std::vector<std::string> audit() const override {
    kit::AuditLog log("buddy");
    const std::vector<SegmentView> views = segments();
    kit::audit_segments(log, views);
    Bytes free_seen = 0, allocated_seen = 0;
    for (const SegmentView& s : views) {
      for (const SegmentView::Piece& p : s.blocks) {
        (p.allocated ? allocated_seen : free_seen) += p.size;
        log.require((p.addr - s.addr) % p.size == 0, [&] { return fmt::format("block 0x{:x} misaligned", p.addr); });
      }
    }
    for (unsigned k = 0; k < max_order_; ++k) {
      for (Addr addr : free_by_order_[k]) {
        if (top_blocks_.upper_bound(addr) == top_blocks_.begin()) continue;  // audit_segments flags it
        const Addr base = top_block_of(addr);
        log.require(!free_by_order_[k].contains(base + ((addr - base) ^ (min_block_ << k))),
                    [&] { return fmt::format("free block 0x{:x} of order {} has its buddy free", addr, k); });
      }
    }
    log.require(free_seen == free_bytes_ && allocated_seen == allocated_, [&] {
      return fmt::format("counters say {} free and {} allocated bytes, the blocks {} and {}", free_bytes_, allocated_,
                         free_seen, allocated_seen);
    });
    return log.take();
  }

  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    Bytes own_bytes = 0;
    for (const auto& [addr, size] : own_mallocs_) own_bytes += size;
    auto i64 = [](Bytes b) { return static_cast<std::int64_t>(b); };
    std::vector<std::pair<std::string, std::int64_t>> stats{
        {"min_block", i64(min_block_)},
        {"max_order", i64(max_order_)},
        {"top_block_bytes", i64(top_size_)},
        {"top_blocks", i64(top_blocks_.size())},
        {"cached_free_top_blocks", i64(free_by_order_[max_order_].size())},
        {"own_malloc_blocks", i64(own_mallocs_.size())},
        {"own_malloc_bytes", i64(own_bytes)},
        {"allocated_bytes", i64(allocated_)},
        {"rounding_waste_bytes", i64(allocated_ - requested_)},  // power-of-two rounding of live blocks
        {"free_bytes", i64(free_bytes_)},
        {"largest_free_block", i64(largest_free_block())},
        {"splits", i64(splits_)},
        {"merges", i64(merges_)},
    };
    for (unsigned k = 0; k <= max_order_; ++k) {
      if (free_by_order_[k].empty()) continue;
      stats.emplace_back(fmt::format("free_blocks_order_{}", k), free_by_order_[k].size());
    }
    return stats;
  }

  // One segment per top-level block (pool "buddy") with its live and free blocks, and one per
  // request that has its own device malloc (pool "own_malloc"), in address order.
  std::vector<SegmentView> segments() const override {
    std::vector<SegmentView::Piece> pieces;  // every buddy block, live or free
    for (const auto& [addr, size] : live_) pieces.push_back({addr, size, true});
    for (unsigned k = 0; k <= max_order_; ++k) {
      for (Addr addr : free_by_order_[k]) pieces.push_back({addr, min_block_ << k, false});
    }
    std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
    std::vector<SegmentView> out;
    auto piece = pieces.begin();
    for (Addr base : top_blocks_) {
      SegmentView view{base, top_size_, 0, "buddy", false, {}};
      for (; piece != pieces.end() && piece->addr < base + top_size_; ++piece) view.blocks.push_back(*piece);
      out.push_back(std::move(view));
    }
    for (const auto& [addr, size] : own_mallocs_) {
      out.push_back(SegmentView{addr, size, 0, "own_malloc", false, {{addr, size, true}}});
    }
    std::sort(out.begin(), out.end(), [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
    return out;
  }

 private:
  // The block size a request is served with: a power of two, at least min_block.
  Bytes block_size_for(Bytes size) const {
    if (kit::impossible_request(size)) return 0;  // fails as out of memory, unrounded
    return std::max(std::bit_ceil(std::max<Bytes>(size, 1)), min_block_);
  }
  unsigned order_of(Bytes block_size) const {
    return static_cast<unsigned>(std::countr_zero(block_size) - std::countr_zero(min_block_));
  }
  Bytes largest_free_block() const {
    for (unsigned k = max_order_ + 1; k-- > 0;) {
      if (!free_by_order_[k].empty()) return min_block_ << k;
    }
    return 0;
  }

  std::optional<Block> try_allocate(Bytes size, StreamId stream) {
    const Bytes block_size = block_size_for(size);
    if (block_size == 0) return std::nullopt;
    if (block_size > top_size_) {
      std::optional<Addr> addr = device_.malloc(block_size);
      if (!addr) return std::nullopt;
      own_mallocs_.emplace(*addr, block_size);
      return Block{*addr, block_size, size, stream, kOwnMalloc};
    }
    // Algorithm R: the smallest order >= the request's that has a free block.
    const unsigned want = order_of(block_size);
    unsigned order = want;
    while (order <= max_order_ && free_by_order_[order].empty()) ++order;
    if (order > max_order_) {
      std::optional<Addr> base = device_.malloc(top_size_);
      if (!base) return std::nullopt;
      top_blocks_.insert(*base);
      free_by_order_[max_order_].insert(*base);
      free_bytes_ += top_size_;
      order = max_order_;
    }
    const Addr addr = *free_by_order_[order].begin();
    free_by_order_[order].erase(free_by_order_[order].begin());
    while (order > want) {  // split: keep the lower half, free the upper one
      --order;
      free_by_order_[order].insert(addr + (min_block_ << order));
      ++splits_;
    }
    free_bytes_ -= block_size;
    live_.emplace(addr, block_size);
    return Block{addr, block_size, size, stream, top_block_of(addr)};
  }

  Addr top_block_of(Addr addr) const { return *std::prev(top_blocks_.upper_bound(addr)); }

  // Device-frees every wholly free top-level block, lowest address first.
  void release_free_top_blocks() {
    std::set<Addr>& whole = free_by_order_[max_order_];
    for (Addr base : whole) {
      device_.free(base);
      top_blocks_.erase(base);
      free_bytes_ -= top_size_;
    }
    whole.clear();
  }

  Device& device_;
  const Bytes min_block_;
  const unsigned max_order_;
  const Bytes top_size_;
  std::vector<std::set<Addr>> free_by_order_;  // [order] -> free block addresses, ascending
  std::set<Addr> top_blocks_;                  // bases of the top-level blocks held
  std::map<Addr, Bytes> own_mallocs_;          // requests larger than a top-level block
  // Live buddy blocks by address, for segments(); hashed because the replay path only looks
  // them up (segments() sorts, so iteration order never shows).
  std::unordered_map<Addr, Bytes, SeededHash> live_;  // seeded: an adopted start state names addresses
  Bytes allocated_ = 0;
  Bytes requested_ = 0;
  Bytes free_bytes_ = 0;  // free bytes inside top-level blocks
  std::uint64_t splits_ = 0;
  std::uint64_t merges_ = 0;
};

const PolicyRegistration registration{PolicyInfo{
    "buddy",
    "binary buddy system: power-of-two blocks split from 1 GiB device mallocs, merged with their buddy on free",
    "Knuth's binary buddy system (TAOCP vol. 1 §2.5, Algorithms R and S): requests rounded up to a power of two "
    ">= min_block, the smallest free order split in halves (lower half kept), a freed block merged with its buddy "
    "order by order. Top-level blocks (min_block << max_order, 1 GiB by default) are device mallocs taken as "
    "needed; wholly free ones stay cached until empty_cache or the out-of-memory flush (then one retry). A request "
    "larger than a top-level block gets its own device malloc of its power-of-two size, freed at once. Choices: "
    "free lists in address order (lowest address first) instead of LIFO; streams share blocks; no block headers.",
    {
        {"min_block", "512", "smallest block, bytes (a power of two; 4KiB style sizes accepted)"},
        {"max_order", "21",
         "top-level block = min_block << max_order (0-40); default keeps the top-level block at 1 GiB"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      const Options parsed = parse_options(options);
      return std::make_unique<BuddyPolicy>(parsed, device);
    }}};

}  // namespace
}  // namespace fraglab::buddy
