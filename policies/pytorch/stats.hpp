// PyTorch's memory statistics (allocator-model §8), kept exactly as DeviceStats keeps them.
//
// Invariants:
//  - a Stat only moves through increase()/decrease(): current += / -= amount, peak = max(peak,
//    current) on increase, allocated += amount on increase, freed += amount on decrease;
//  - every per-pool array is updated for "all" and for the pool of the block (small/large);
//  - listing() returns the flattened torch.cuda.memory_stats() keys sorted as Python sorts them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pytorch/constants.hpp"

namespace fraglab::cca {

struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::uint64_t amount) {
    current += static_cast<std::int64_t>(amount);
    if (current > peak) peak = current;
    allocated += static_cast<std::int64_t>(amount);
  }
  void decrease(std::uint64_t amount) {
    current -= static_cast<std::int64_t>(amount);
    freed += static_cast<std::int64_t>(amount);
  }
};

// One statistic for "all", "small_pool" and "large_pool" (StatType order), kept as PyTorch's
// StatArray keeps it (every update goes to "all" and to the block's pool) but stored for fewer
// writes per update (every request updates several of them):
//  - per pool, only allocated, freed and peak are stored: current = allocated - freed, since
//    every update moves current and one of the two by the same amount and all start at 0 (no
//    reset of accumulated stats is modelled);
//  - "all" is the sum of the pools (both move together in PyTorch), except its peak, which is the
//    highest sum seen after an increase: all_current is kept for it.
struct StatArray {
  struct PoolStat {
    std::int64_t allocated = 0;
    std::int64_t freed = 0;
    std::int64_t peak = 0;
  };
  std::array<PoolStat, 2> pools;  // [0] = small_pool, [1] = large_pool (PoolKind order)
  std::int64_t all_current = 0;
  std::int64_t all_peak = 0;

  void increase(PoolKind pool, std::uint64_t amount) {
    PoolStat& p = pools[static_cast<int>(pool)];
    p.allocated += static_cast<std::int64_t>(amount);
    // max() as a test: a new peak is rare, so the store is skipped (fewer instructions per update).
    if (const std::int64_t current = p.allocated - p.freed; current > p.peak) p.peak = current;
    all_current += static_cast<std::int64_t>(amount);
    if (all_current > all_peak) all_peak = all_current;
  }
  void decrease(PoolKind pool, std::uint64_t amount) {
    pools[static_cast<int>(pool)].freed += static_cast<std::int64_t>(amount);
    all_current -= static_cast<std::int64_t>(amount);
  }
  // A signed net change applied as one increase or decrease (free_block's inactive_split, §4.4).
  void apply(PoolKind pool, std::int64_t delta) {
    if (delta > 0) increase(pool, static_cast<std::uint64_t>(delta));
    if (delta < 0) decrease(pool, static_cast<std::uint64_t>(-delta));
  }
  // The Stat PyTorch keeps for the pool / for "all".
  Stat of(PoolKind pool) const {
    const PoolStat& p = pools[static_cast<int>(pool)];
    return Stat{p.allocated - p.freed, p.peak, p.allocated, p.freed};
  }
  Stat all() const {
    const std::int64_t allocated = pools[0].allocated + pools[1].allocated;
    const std::int64_t freed = pools[0].freed + pools[1].freed;
    return Stat{all_current, all_peak, allocated, freed};
  }
};

struct DeviceStats {
  StatArray allocation;      // user-held blocks (-1 at free *request*)
  StatArray segment;         // cudaMalloc'd segments (not expandable maps)
  StatArray active;          // allocated + pending-free
  StatArray inactive_split;  // free blocks inside split non-expandable segments
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;  // 2.0+
  Stat oversize_allocations;
  Stat oversize_segments;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  std::int64_t max_split_size = -1;  // captured at construction; unlimited -> -1

  // ("allocated_bytes.all.current", value), ... sorted by key like torch.cuda.memory_stats().
  // `with_requested_bytes` is false for 1.13, which had no requested_bytes.
  std::vector<std::pair<std::string, std::int64_t>> listing(bool with_requested_bytes) const;
};

}  // namespace fraglab::cca
