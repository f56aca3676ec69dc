// SimDevice: a deterministic simulated GPU.
//
// Model:
//  - capacity bytes of physical memory, of which `external` bytes are held outside the allocator
//    (the CUDA context, NCCL buffers, another process); what is left is what malloc and map use;
//  - cudaMalloc reserves its size rounded up to kMallocAlignment (the driver packs small
//    allocations into shared pages; we do not model the driver's own fragmentation), and fails
//    when that would exceed the memory left, like cudaMalloc's cudaErrorMemoryAllocation;
//  - VMM pages are granularity() = 2 MiB; map/unmap sizes must be whole pages; an alias maps
//    already-mapped pages a second time and costs no memory;
//  - addresses: a request for a specific address is honoured when the range is free; otherwise
//    ranges are placed by a bump pointer from kBaseAddress (2 MiB aligned for ranges of at
//    least a page), so the same calls always give the same addresses.
//
// A Device spec string is "sim", "sim:40GiB" or "sim:80GiB,external:1GiB" (parse_sim_device).
#pragma once

#include <deque>
#include <memory>
#include <string_view>

#include "fraglab/address_ranges.hpp"
#include "fraglab/device.hpp"
#include "fraglab/node_pool.hpp"

namespace fraglab {

struct SimDeviceConfig {
  Bytes capacity = 80 * GiB;
  Bytes external = 0;  // bytes held outside the allocator
};

class SimDevice final : public Device {
 public:
  static constexpr Bytes kPage = 2 * MiB;
  static constexpr Bytes kMallocAlignment = 512;
  static constexpr Addr kBaseAddress = 0x7f0000000000ull;
  static constexpr Bytes kMaxRange = Bytes{1} << 47;  // the largest address range reserve_range gives

  explicit SimDevice(SimDeviceConfig config = {});
  SimDevice(const SimDevice&) = delete;  // its maps' nodes live in its own arenas
  SimDevice& operator=(const SimDevice&) = delete;

  std::string kind() const override;
  Bytes capacity() const override { return config_.capacity; }
  Bytes granularity() const override { return kPage; }
  Bytes external() const { return config_.external; }
  Bytes free_memory() const override { return config_.capacity - config_.external - physical_in_use_; }
  // Physical bytes in use by malloc ranges and mapped pages (what capacity limits).
  Bytes physical_in_use() const { return physical_in_use_; }
  bool is_backed(Addr addr, Bytes size) const override;

  // Validation replays hand out the addresses a recorded run got: the next malloc (or
  // reserve_range) that asks for no particular address is placed at the hinted one when that
  // range is free. Hints are used once, in order; clear_hints() drops unused ones.
  void hint_next_malloc(Addr addr) { malloc_hints_.push_back(addr); }
  void hint_next_range(Addr addr) { range_hints_.push_back(addr); }
  void clear_hints() {
    malloc_hints_.clear();
    range_hints_.clear();
  }

 protected:
  std::optional<Addr> do_malloc(Bytes size, Addr at) override;
  Bytes do_free(Addr addr) override;
  std::optional<Addr> do_reserve_range(Bytes size, Addr at) override;
  void do_release_range(Addr addr) override;
  bool do_map(Addr addr, Bytes size) override;
  void do_unmap(Addr addr, Bytes size) override;
  void do_map_alias(Addr addr, Bytes size, Addr source) override;
  void do_unmap_alias(Addr addr, Bytes size) override;
  Bytes malloc_footprint(Bytes size) const override;

 private:
  bool range_is_free(Addr addr, Bytes size) const;
  Addr place(Bytes size, Addr at);
  Addr place_after_search(Bytes size, Addr addr, Bytes alignment);  // place()'s slow path
  bool in_vmm_range(Addr addr, Bytes size) const;                   // [addr, addr + size) inside one reserved range
  // Inside the range in_vmm_range() found last (without wrapping around): what its search would find.
  bool in_last_vmm_range(Addr addr, Bytes size) const {
    return addr - last_vmm_range_.addr < last_vmm_range_.size() && size <= last_vmm_range_.end() - addr;
  }
  [[gnu::noinline]] bool map_after_search(Addr addr, Bytes size);  // do_map() but for its usual call
  bool overlaps_mapping(Addr addr, Bytes size) const;              // mapped pages or aliases
  bool aliased(Addr addr, Bytes size) const;                       // some alias's source overlaps

  SimDeviceConfig config_;
  Bytes physical_in_use_ = 0;
  Addr next_address_ = kBaseAddress;
  // Address space in use, by start: malloc ranges and reserved (VMM) ranges. A sorted array with
  // a gap where the last call was (fraglab/address_ranges.hpp): a policy's malloc inserts where
  // the previous one did, nearly always.
  AddressRanges ranges_;
  // Nodes from arenas of this device (fraglab/node_pool.hpp): a node from the heap costs more
  // than the tree operation. Each arena is declared before its map, so it outlives the map's nodes.
  NodeArena page_nodes_;
  NodeArena alias_nodes_;
  ArenaMap<Addr, Bytes> mapped_pages_ = make_arena_map<Addr, Bytes>(page_nodes_);  // mapped runs (page multiples)
  // The run the last map made or grew: a policy maps page after page upward, so the next map
  // usually starts where it ends (`end`) and ends at or below `max_end`: below the next run and
  // inside the reserved range that holds the run's last page. Kept only while there is no alias;
  // an unmap or a new alias forgets it (end 0: no map starts at address 0).
  struct GrowingRun {
    ArenaMap<Addr, Bytes>::iterator run{};
    Addr end = 0;
    Addr max_end = 0;
  };
  GrowingRun growing_;
  struct Alias {
    Bytes size;
    Addr source;
  };
  ArenaMap<Addr, Alias> aliases_ = make_arena_map<Addr, Alias>(alias_nodes_);  // mapped aliases (never merged)
  std::deque<Addr> malloc_hints_;
  std::deque<Addr> range_hints_;
  // The bump pointer's free window (place()): when valid, no range overlaps [next_address_,
  // window_end_), and window_end_ is the start of the first range at or above next_address_ (or
  // ~0: none). Any insert into the window or erase of the range at window_end_ invalidates it;
  // the next placement by the bump pointer then searches and sets it again.
  bool window_valid_ = false;
  Addr window_end_ = ~Addr{0};
  // The reserved range in_vmm_range() last found (size 0: none): a policy maps page after page
  // of the same range, and a live range never changes (do_release_range forgets it).
  mutable AddressRanges::Entry last_vmm_range_{0, 0};
};

// Parses "sim", "sim:40GiB", "sim:40GiB,external:1GiB", "sim:capacity:40GiB,external:512MiB".
// Sizes need a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; case-insensitive; only 0 may go
// without): "sim:40" is an error showing 40GiB, 40GB and 42949672960B, not 40 bytes.
// Throws InputError naming the spec on anything else.
SimDeviceConfig parse_sim_device(std::string_view spec);
// The spec sets the capacity ("sim:40GiB", "sim:capacity:40GiB"); "sim" and
// "sim:external:1GiB" leave the default 80 GiB. Does not validate the spec.
bool names_capacity(std::string_view spec);

// "80GiB", "512MiB", "1.5GB", "4096" (bytes) -> bytes. Throws InputError on garbage.
Bytes parse_byte_size(std::string_view text, std::string_view what);

}  // namespace fraglab
