// CachingAllocator::audit(): the invariants of caching_allocator.hpp and block_pool.hpp,
// recomputed from the nodes: chains tile their segments, free blocks are maximal and filed in
// exactly their pool's free or unmapped set, and the byte statistics match the blocks.
// allocated_block_bytes(): the same sum for an OOM message without the usage statistics.
#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

void CachingAllocator::audit(kit::AuditLog& log) const {
  Bytes mapped = 0, allocated = 0, active = 0;
  std::array<std::size_t, 2> free_mapped{}, free_unmapped{};
  // The nodes the pools' free sets file, each under its own key in its own pool's set: one walk of
  // each set per audit (a search per node made a checked replay's audits n log n per event).
  std::vector<std::uint8_t> filed(nodes_.slots(), 0);
  std::vector<FreeEntry> entries;
  for (const BlockPool& pool : pools_) {
    entries.clear();
    pool.blocks.copy_to(entries);
    for (const FreeEntry& e : entries) {
      if (e.id >= nodes_.slots()) continue;
      const Node& n = nodes_[e.id];
      if (n.live && n.pool == pool.kind && n.stream == e.stream && n.size == e.size && n.addr == e.addr) {
        filed[e.id] = 1;
      }
    }
  }
  for (NodeId id = 0; id < nodes_.slots(); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    const auto where = [&] { return fmt::format("block 0x{:x} (+{})", n.addr, n.size); };
    if (n.mapped) mapped += n.size;
    if (n.allocated) allocated += n.size;
    if (n.allocated || n.pending) active += n.size;
    log.require(!(n.allocated && n.pending) && (n.mapped || n.reusable()),
                [&] { return where() + ": allocated and pending, or handed out unmapped"; });
    if (n.next != kNil) {
      const Node& next = nodes_[n.next];
      log.require(next.live && next.prev == id && next.addr == n.addr + n.size && next.segment == n.segment &&
                      next.pool == n.pool && next.stream == n.stream,
                  [&] { return where() + ": chain broken after it"; });
      log.require(!(n.reusable() && next.reusable() && n.mapped == next.mapped),
                  [&] { return where() + ": two free neighbours not merged"; });
    }
    const BlockPool& pool = pools_[static_cast<int>(n.pool)];
    const bool in_free = filed[id] != 0;
    const auto unmapped = pool.unmapped.find(unmapped_key(n));
    const bool in_unmapped = unmapped != pool.unmapped.end() && unmapped->second == id;
    log.require(in_free == (n.reusable() && n.mapped) && in_unmapped == (n.reusable() && !n.mapped),
                [&] { return where() + ": filed in the wrong set"; });
    (n.mapped ? free_mapped : free_unmapped)[static_cast<int>(n.pool)] += n.reusable();
  }
  for (const BlockPool& pool : pools_) {
    const int k = static_cast<int>(pool.kind);
    log.require(pool.blocks.size() == free_mapped[k] && pool.unmapped.size() == free_unmapped[k],
                [&] { return fmt::format("{} pool: its sets hold blocks that are not free", pool_name(pool.kind)); });
  }
  settle_active();
  const auto current = [](const StatArray& s) { return static_cast<Bytes>(s.all().current); };
  log.require(mapped == total_ && current(stats_.reserved_bytes) == total_, [&] {
    return fmt::format("blocks cover {} mapped bytes, total_ is {}, reserved_bytes {}", mapped, total_,
                       current(stats_.reserved_bytes));
  });
  // Without the usage statistics (skip_usage_stats()) there are none to compare.
  log.require(
      !keep_usage_stats_ || (current(stats_.allocated_bytes) == allocated && current(stats_.active_bytes) == active),
      [&] {
        return fmt::format("allocated/active bytes stats {}/{}, the blocks {}/{}", current(stats_.allocated_bytes),
                           current(stats_.active_bytes), allocated, active);
      });
}

Bytes CachingAllocator::allocated_block_bytes() const {
  Bytes allocated = 0;
  for (NodeId id = 0; id < nodes_.slots(); ++id) {
    const Node& n = nodes_[id];
    if (n.live && n.allocated) allocated += n.size;
  }
  return allocated;
}

}  // namespace fraglab::cca
