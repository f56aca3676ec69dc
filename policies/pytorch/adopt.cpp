// Rebuilding the allocator state a cut-off trace starts from (allocator-model §12.2).
//
// Each initial segment becomes a device range at its recorded address (or wherever the device
// puts it: the segment's blocks move by the same offset), counted in the stats like a segment
// allocation but not as a device call of the replay (num_device_alloc stays 0). Expandable runs
// of the same (stream, pool) share one reserved range starting where prepare() inferred it
// (start_state.hpp), else at the first run. Each initial allocation becomes an allocated (or
// pending-free) block; when its block size is not recorded it is the size prepare() read from
// the trace's evidence (start_evidence.hpp), else derived with the split rule from the gap it
// was carved from. Gaps are free blocks.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <span>

#include "pytorch/address_order.hpp"
#include "pytorch/caching_allocator.hpp"
#include "pytorch/rounding.hpp"
#include "pytorch/start_evidence.hpp"

namespace fraglab::cca {
namespace {
[[noreturn]] void fail(const std::string& message) { throw InputError("pytorch: " + message); }
}  // namespace

std::vector<std::optional<Block>> CachingAllocator::adopt(const InitialState& initial) {
  const auto& segs = initial.segments;
  const auto& allocs = initial.allocations;
  // Unrecorded block sizes are derived with ms and the rounding rules as values (and prepare()'s
  // evidence): only this very setting rebuilds the same start (decision_bounds.hpp).
  if (std::any_of(allocs.begin(), allocs.end(), [](const InitialAllocation& a) { return a.block_size == 0; }))
    bounds_.pin_start(config_.max_split_size);
  const std::vector<std::size_t> seg_order = by_address(segs);

  // Which segment holds each allocation (allocations per segment, in address order), as one
  // array grouped by segment: held(s) is segment s's part (no vector per segment to allocate).
  // Evidence from prepare() applies when it was read from this very start state.
  const StartEvidence* evidence = evidence_for_ == allocs && !allocs.empty() ? &evidence_ : nullptr;
  // Allocations by address: prepare() sorted these very allocations the same way.
  std::vector<std::size_t> alloc_order;
  if (evidence != nullptr && evidence->by_address.size() == allocs.size()) {
    alloc_order = evidence->by_address;
  } else {
    sort_by_address(alloc_order, allocs);
  }
  std::vector<std::size_t> seg_of(allocs.size());     // by position in alloc_order
  std::vector<std::size_t> held_at(segs.size() + 1);  // segment s: [held_at[s], held_at[s + 1])
  // Both in address order: one walk finds each allocation's segment (the last starting at or
  // below it), as a search per allocation would.
  auto it = seg_order.begin();
  for (std::size_t k = 0; k < alloc_order.size(); ++k) {
    const InitialAllocation& a = allocs[alloc_order[k]];
    while (it != seg_order.end() && segs[*it].addr <= a.addr) ++it;
    if (it == seg_order.begin() || a.addr >= segs[*(it - 1)].addr + segs[*(it - 1)].size) {
      fail(fmt::format("initial allocation {} at {:#x} lies outside every initial segment", a.id, a.addr));
    }
    seg_of[k] = *(it - 1);
    ++held_at[seg_of[k] + 1];
  }
  std::partial_sum(held_at.begin(), held_at.end(), held_at.begin());
  std::vector<std::size_t> held_allocs(allocs.size());
  {
    std::vector<std::size_t> fill(held_at.begin(), held_at.end() - 1);
    for (std::size_t k = 0; k < alloc_order.size(); ++k) held_allocs[fill[seg_of[k]]++] = alloc_order[k];
  }
  auto held = [&](std::size_t s) {
    return std::span<const std::size_t>(held_allocs.data() + held_at[s], held_at[s + 1] - held_at[s]);
  };

  std::vector<std::optional<Block>> result(allocs.size());
  std::vector<NodeId> free_nodes;
  // The nodes made below, at most: per allocation one and the gap before it; per segment the gap
  // at its end, and for an expandable run unmapped space on either side. Room for them at once
  // instead of a few reallocations of the node array (each copying every node so far).
  nodes_.reserve(nodes_.slots() + 2 * allocs.size() + 3 * segs.size());

  // The allocations' stat increases (§8), summed per pool and applied at once: adopting only ever
  // increases these stats, so one increase by the sum leaves the same current, allocated and
  // peak as one per allocation. Applied before split_active() copies the allocation stats.
  struct Sums {
    std::array<Bytes, 2> allocation{}, allocated_bytes{}, active{}, active_bytes{}, requested_bytes{};
    Bytes oversize_allocations = 0;
  } sums;
  auto apply_sums = [&] {
    for (const PoolKind pool : {PoolKind::Small, PoolKind::Large}) {
      const auto p = static_cast<std::size_t>(pool);
      if (sums.allocation[p] != 0) {
        stats_.allocation.increase(pool, sums.allocation[p]);
        stats_.allocated_bytes.increase(pool, sums.allocated_bytes[p]);
      }
      if (sums.active[p] != 0) {
        stats_.active.increase(pool, sums.active[p]);
        stats_.active_bytes.increase(pool, sums.active_bytes[p]);
      }
      if (sums.requested_bytes[p] != 0) stats_.requested_bytes.increase(pool, sums.requested_bytes[p]);
    }
    if (sums.oversize_allocations != 0) stats_.oversize_allocations.increase(sums.oversize_allocations);
    sums = Sums{};
  };

  // Lays out one mapped run [start, start + size) (addresses already shifted) after `prev`;
  // returns the last node.
  auto build_run = [&](NodeId prev, Addr start, Bytes size, std::int64_t shift, std::span<const std::size_t> in,
                       StreamId stream, PoolKind pool, std::int32_t segment) -> NodeId {
    auto link = [&](Addr addr, Bytes bytes) {
      const NodeId id = nodes_.create();
      Node& n = nodes_[id];
      n.addr = addr;
      n.size = bytes;
      n.stream = stream;
      n.pool = pool;
      n.segment = segment;
      n.prev = prev;
      if (prev != kNil) nodes_[prev].next = id;
      prev = id;
      return id;
    };
    const Addr end = start + size;
    Addr cursor = start;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const InitialAllocation& a = allocs[in[k]];
      const Addr addr = a.addr + static_cast<Addr>(shift);
      if (addr < cursor) fail(fmt::format("initial allocation {} at {:#x} overlaps the one before it", a.id, a.addr));
      if (addr > cursor) free_nodes.push_back(link(cursor, addr - cursor));
      const Addr next = k + 1 < in.size() ? allocs[in[k + 1]].addr + static_cast<Addr>(shift) : end;
      const Bytes gap = next - addr;
      Bytes block = a.block_size;
      if (block == 0 && evidence) {  // the trace's evidence (prepare(), start_evidence.hpp)
        block = evidence->blocks[in[k]]->chosen();
      } else if (block == 0) {  // derive: the free block it was carved from was `gap` bytes (§4.1)
        const Bytes rounded = round_size(a.requested, config_.rounding);
        if (rounded >= gap) {
          block = gap;
        } else {
          const Bytes remaining = gap - rounded;
          const bool split = (pool == PoolKind::Small || segment >= 0 || expandable_active_)
                                 ? remaining >= kMinBlockSize
                                 : rounded < config_.max_split_size && remaining > kSmallSize;
          block = split ? rounded : gap;
        }
      }
      if (block > gap) {
        fail(fmt::format("initial allocation {} at {:#x}: block of {} bytes does not fit before {:#x}", a.id, a.addr,
                         block, next - static_cast<Addr>(shift)));
      }
      const NodeId id = link(addr, block);
      Node& n = nodes_[id];
      n.requested = a.requested;
      n.serial = ++serial_;
      const auto p = static_cast<std::size_t>(pool);
      if (a.free_requested) {
        if (!active_split_) {  // the active stats start to differ from the allocation stats
          apply_sums();
          split_active();
        }
        n.pending = true;
        pending_.emplace_back(id, n.serial);
        ++pending_live_;
      } else {
        n.allocated = true;
        ++sums.allocation[p];
        sums.allocated_bytes[p] += block;
        if (block >= config_.max_split_size) ++sums.oversize_allocations;
      }
      if (active_split_) {  // else they are the allocation stats (split_active())
        ++sums.active[p];
        sums.active_bytes[p] += block;
      }
      sums.requested_bytes[p] += a.requested;
      result[in[k]] = Block{addr, block, a.requested, stream, cookie_of(id, n)};
      cursor = addr + block;
    }
    if (cursor < end) free_nodes.push_back(link(cursor, end - cursor));
    return prev;
  };

  // cudaMalloc'd segments.
  for (std::size_t s : seg_order) {
    const InitialSegment& seg = segs[s];
    if (seg.expandable) continue;
    const PoolKind pool = seg.small_pool ? PoolKind::Small : PoolKind::Large;
    const std::optional<Addr> addr = device_.malloc(seg.size, seg.addr);
    if (!addr) fail(fmt::format("the device has no room for initial segment at {:#x} ({} bytes)", seg.addr, seg.size));
    const std::int64_t shift = static_cast<std::int64_t>(*addr - seg.addr);
    const std::size_t first_free = free_nodes.size();
    const NodeId last = build_run(kNil, *addr, seg.size, shift, held(s), seg.stream, pool, -1);
    total_ += seg.size;
    stats_.segment.increase(pool, 1);
    stats_.reserved_bytes.increase(pool, seg.size);
    if (seg.size >= config_.max_split_size) stats_.oversize_segments.increase(1);
    const bool split = nodes_[last].prev != kNil;
    for (std::size_t k = first_free; k < free_nodes.size() && split; ++k) {
      stats_.inactive_split.increase(pool, 1);
      stats_.inactive_split_bytes.increase(pool, nodes_[free_nodes[k]].size);
    }
  }

  // Expandable runs: per (stream, pool), runs in address order share a range while they fit.
  std::vector<std::size_t> runs;
  for (std::size_t s : seg_order) {
    if (segs[s].expandable) runs.push_back(s);
  }
  std::stable_sort(runs.begin(), runs.end(), [&](auto a, auto b) {
    if (segs[a].stream != segs[b].stream) return segs[a].stream < segs[b].stream;
    return segs[a].small_pool > segs[b].small_pool;
  });
  for (std::size_t i = 0; i < runs.size();) {
    const InitialSegment& first = segs[runs[i]];
    const PoolKind pool = first.small_pool ? PoolKind::Small : PoolKind::Large;
    const Bytes range = expandable_range_size(page_size(pool));
    std::size_t j = i + 1;
    while (j < runs.size() && segs[runs[j]].stream == first.stream && segs[runs[j]].small_pool == first.small_pool &&
           segs[runs[j]].addr + segs[runs[j]].size <= first.addr + range) {
      ++j;
    }
    BlockPool& bp = pool_of(pool);
    // The range may begin below its first run: prepare() read where from the trace's maps.
    Addr wanted = first.addr;
    for (const ExpandableRangeStart& r : range_starts_) {
      if (r.stream == first.stream && r.small_pool == first.small_pool && r.first_run == first.addr) {
        wanted = r.base;  // grouped with the same range size: every run of the group still fits
      }
    }
    const NodeId whole = create_expandable_segment(first.stream, bp, wanted);
    if (whole == kNil) fail(fmt::format("cannot reserve the address range of initial segment at {:#x}", first.addr));
    const std::int32_t index = nodes_[whole].segment;
    const Addr base = nodes_[whole].addr;
    const std::int64_t shift = static_cast<std::int64_t>(base - wanted);
    bp.unmapped.erase(unmapped_key(nodes_[whole]));
    nodes_.destroy(whole);

    NodeId prev = kNil;
    Addr cursor = base;
    auto unmapped = [&](Addr addr, Bytes bytes) {
      const NodeId id = nodes_.create();
      Node& n = nodes_[id];
      n.addr = addr;
      n.size = bytes;
      n.stream = first.stream;
      n.pool = pool;
      n.segment = index;
      n.mapped = false;
      n.prev = prev;
      if (prev != kNil) nodes_[prev].next = id;
      bp.unmapped.emplace(unmapped_key(n), id);
      prev = id;
    };
    for (std::size_t k = i; k < j; ++k) {
      const InitialSegment& run = segs[runs[k]];
      const Addr start = run.addr + static_cast<Addr>(shift);
      if (start < cursor) fail(fmt::format("initial expandable segment at {:#x} overlaps the one before it", run.addr));
      if (start > cursor) unmapped(cursor, start - cursor);
      if (!device_.map(start, run.size)) {
        fail(fmt::format("cannot map initial expandable segment at {:#x} ({} bytes: whole pages of {} bytes needed)",
                         run.addr, run.size, device_.granularity()));
      }
      prev = build_run(prev, start, run.size, shift, held(runs[k]), run.stream, pool, index);
      total_ += run.size;
      stats_.reserved_bytes.increase(pool, run.size);
      cursor = start + run.size;
    }
    if (cursor < base + range) unmapped(cursor, base + range - cursor);
    i = j;
  }

  apply_sums();
  for (NodeId id : free_nodes) insert_into_blocks(pool_of(nodes_[id].pool), id);
  return result;
}

void CachingAllocator::prepare(const Trace& trace) {
  evidence_for_ = trace.initial.allocations;
  evidence_ = infer_start_blocks(trace, config_);
  range_starts_ = infer_expandable_ranges(trace, expandable_range_size(page_size(PoolKind::Small)),
                                          expandable_range_size(page_size(PoolKind::Large)));
}

std::vector<StartBlock> CachingAllocator::start_blocks() const {
  std::vector<StartBlock> out;
  for (std::size_t i = 0; i < evidence_.blocks.size() && i < evidence_for_.size(); ++i) {
    if (!evidence_.blocks[i]) continue;
    const BlockInterval& b = *evidence_.blocks[i];
    const InitialAllocation& a = evidence_for_[i];
    out.push_back({a.id, a.addr, a.requested, b.min, b.max, b.chosen(), b.evidence, b.error});
  }
  return out;
}

}  // namespace fraglab::cca
