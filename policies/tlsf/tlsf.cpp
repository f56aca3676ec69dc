// tlsf: Two-Level Segregated Fit (Masmano, Ripoll, Crespo, Real, "TLSF: a New Dynamic Memory
// Allocator for Real-Time Systems", ECRTS 2004) over pools of device memory; one of the classic
// designs anchors.md §5 (gap 3) asks to compare with the caching allocator on identical traces.
//
// What it models (the algorithm itself is in tlsf_heap.hpp, the size classes in
// size_classes.hpp):
//  - requests are rounded up to 512 bytes (cudaMalloc's granularity);
//  - O(1) good fit: the request's class rounded up to the next class boundary, then two bit
//    scans find the first non-empty free list; its head is split to the request's size;
//  - a freed block merges at once with free physical neighbours;
//  - when no list has a block, a pool is taken from the device: device malloc of
//    max(pool_mb, the rounded request rounded up to 2 MiB); the new pool's block serves the
//    request that caused it (taken directly: the good-fit lookup may skip a pool whose size is
//    not a class floor) and the rest of the pool becomes one free block;
//  - a pool that becomes wholly free stays cached; empty_cache gives every such pool back
//    (device free, lowest address first), and so does the out-of-memory flush before one retry.
//
// Simplified / guessed: the paper's TLSF manages one memory area and adds areas on demand; here
// every pool is a separate device malloc and blocks never span pools (the paper's areas do not
// merge either). No block header costs memory (the bookkeeping lives off the device), so the
// minimum block is 512 bytes and no small-block special case is needed. Streams share the pools;
// a block is reusable once its free completes.
#include <fmt/format.h>

#include "fraglab/policy_kit.hpp"
#include "tlsf/tlsf_heap.hpp"

namespace fraglab::tlsf {
namespace {

constexpr Bytes kAlignment = 512;
constexpr Bytes kPoolRounding = 2 * MiB;

struct Options {
  unsigned sl_bits;  // 5 by default: 32 second-level classes per power of two, as the paper's SLI = 5
  Bytes pool_bytes;
};

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("tlsf", text);
  const auto whole = [](std::uint64_t max) { return [max](std::string_view v) { return kit::parse_whole(v, max); }; };
  return Options{
      static_cast<unsigned>(reader.get<std::uint64_t>("sl_bits", fmt::format("a whole number from 0 to {}", kMaxSlBits),
                                                      whole(kMaxSlBits))),
      reader.get<std::uint64_t>("pool_mb", "a whole number of MiB from 0 to 1048576", whole(1u << 20)) * MiB,
  };
}

class TlsfPolicy final : public kit::DirectDefaults<TlsfPolicy, kit::RetryingPolicy> {
 public:
  TlsfPolicy(Options options, Device& device)
      : device_(device), pool_bytes_(options.pool_bytes), heap_(options.sl_bits) {}

  // Inlined into allocate_into (kit::DirectDefaults), the call the Replayer makes at every alloc.
  [[gnu::always_inline]] std::optional<Block> allocate(Bytes size, StreamId stream) override {
    const Bytes rounded = kit::round_request(size, kAlignment);
    const auto attempt = [&]() -> std::optional<TlsfHeap::Index> {
      const TlsfHeap::Index index = try_allocate(rounded);
      return index == TlsfHeap::kNil ? std::nullopt : std::optional(index);
    };
    // The cache flush: give back every wholly free pool, then one more try.
    const std::optional<TlsfHeap::Index> index = with_flush_and_retry<TlsfHeap::Index>(
        attempt,
        [&] {
          device_.synchronize();  // a flush waits for the device (README "Device time")
          release_free_pools();
        },
        [&] {
          return fmt::format(
              "tlsf: out of memory allocating {} bytes ({} rounded): {} of {} bytes reserved, {} pools, {} bytes "
              "free in them, largest free block {} bytes",
              size, rounded, device_.reserved(), device_.capacity(), heap_.pools().size(), heap_.free_bytes(),
              heap_.largest_free_block());
        });
    if (!index) return std::nullopt;
    allocated_ += rounded;
    return Block{heap_.block(*index).addr, rounded, size, stream, *index};
  }

  void free_requested(const Block& /*block*/) override {}  // reusable only once the free completes

  void free_completed(const Block& block) override {
    allocated_ -= block.size;
    heap_.free(static_cast<TlsfHeap::Index>(block.cookie));
  }

  void empty_cache() override { release_free_pools(); }

  std::vector<std::string> audit() const override {
    kit::AuditLog log("tlsf");
    heap_.audit(log);
    Bytes used = 0;
    for (const auto& [base, pool] : heap_.pools()) used += pool.size;
    log.require(used == heap_.free_bytes() + allocated_, [&] {
      return fmt::format("pools hold {} bytes but {} are free and {} allocated", used, heap_.free_bytes(), allocated_);
    });
    return log.take();
  }

  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    Bytes pool_total = 0;
    for (const auto& [base, pool] : heap_.pools()) pool_total += pool.size;
    auto i64 = [](Bytes b) { return static_cast<std::int64_t>(b); };
    return {
        {"sl_bits", i64(heap_.sl_bits())},
        {"pool_bytes_option", i64(pool_bytes_)},
        {"pools", i64(heap_.pools().size())},
        {"pool_bytes", i64(pool_total)},
        {"cached_free_pools", i64(heap_.wholly_free_pools().size())},
        {"allocated_bytes", i64(allocated_)},
        {"free_bytes", i64(heap_.free_bytes())},
        {"free_blocks", i64(heap_.free_blocks())},
        {"largest_free_block", i64(heap_.largest_free_block())},
        {"splits", i64(heap_.splits())},
        {"merges", i64(heap_.merges())},
        {"pools_taken", i64(pools_taken_)},
        {"pools_released", i64(pools_released_)},
    };
  }

  // One segment per pool (address order), its blocks in physical order.
  std::vector<SegmentView> segments() const override {
    std::vector<SegmentView> out;
    for (const auto& [base, pool] : heap_.pools()) {
      SegmentView view{base, pool.size, 0, "tlsf", false, {}};
      for (TlsfHeap::Index i = pool.first; i != TlsfHeap::kNil; i = heap_.block(i).next_phys) {
        const TlsfHeap::BlockRecord& b = heap_.block(i);
        view.blocks.push_back(SegmentView::Piece{b.addr, b.size, !b.free});
      }
      out.push_back(std::move(view));
    }
    return out;
  }

 private:
  TlsfHeap::Index try_allocate(Bytes rounded) {
    const TlsfHeap::Index found = heap_.allocate(rounded);
    if (found != TlsfHeap::kNil || kit::impossible_request(rounded)) return found;
    const Bytes pool_size = std::max(pool_bytes_, kit::align_up(rounded, kPoolRounding));
    std::optional<Addr> base = device_.malloc(pool_size);
    if (!base) return TlsfHeap::kNil;
    ++pools_taken_;
    return heap_.take(heap_.add_pool(*base, pool_size), rounded);
  }

  void release_free_pools() {
    for (Addr base : heap_.wholly_free_pools()) {
      heap_.remove_pool(base);
      device_.free(base);
      ++pools_released_;
    }
  }

  Device& device_;
  const Bytes pool_bytes_;
  TlsfHeap heap_;
  Bytes allocated_ = 0;
  std::uint64_t pools_taken_ = 0;
  std::uint64_t pools_released_ = 0;
};

const PolicyRegistration registration{PolicyInfo{
    "tlsf",
    "Two-Level Segregated Fit: O(1) good fit over 64 MiB device pools, immediate coalescing",
    "TLSF as in Masmano et al., ECRTS 2004: first level floor(log2 size), 2^sl_bits second-level classes, "
    "bitmaps for O(1) lookup from the request's class rounded up to the next class (good fit, never a list walk), "
    "LIFO free lists, immediate merging with physical neighbours. Requests rounded to 512 B. Pools are device "
    "mallocs of max(pool_mb, request rounded up to 2 MiB); blocks never span pools; a wholly free pool stays "
    "cached until empty_cache or the out-of-memory flush (then one retry). Simplified: no block headers (no "
    "per-block overhead, no small-block classes); streams share the pools.",
    {
        {"sl_bits", "5", "second-level classes per power of two = 2^sl_bits (0-6)"},
        {"pool_mb", "64", "smallest pool taken from the device (MiB); 0 = each pool just fits its request"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<TlsfPolicy>(parse_options(options), device);
    }}};

}  // namespace
}  // namespace fraglab::tlsf
