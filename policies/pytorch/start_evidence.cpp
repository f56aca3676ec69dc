// Start-state block sizes from the trace's evidence: see start_evidence.hpp.
#include "pytorch/start_evidence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "fraglab/id_index.hpp"
#include "pytorch/address_order.hpp"
#include "pytorch/rounding.hpp"

namespace fraglab::cca {
namespace {

Bytes saturating_add(Bytes a, Bytes b) { return a > kUnlimited - b ? kUnlimited : a + b; }

// One initial allocation whose block is not recorded, while the trace can still tell about it.
struct Pending {
  std::size_t index = 0;  // in InitialState::allocations
  Addr addr = 0;
  Bytes rounded = 0;
  Addr next = 0;                             // next known allocation's start, or the segment end
  std::size_t next_alloc = ~std::size_t{0};  // index of the allocation at `next` (none: segment end)
  PoolKind pool = PoolKind::Large;
  StreamId stream = 0;
  bool open = false;  // still live and no alloc has landed in the free space after it
};

// Block sizes are multiples of 512 whenever the rounded size is (§1.2): snap bounds to them.
Bytes align_up(Bytes v, Bytes rounded) {
  return rounded % kMinBlockSize != 0 ? v : (v + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}
Bytes align_down(Bytes v, Bytes rounded) {
  return rounded % kMinBlockSize != 0 ? v : v / kMinBlockSize * kMinBlockSize;
}

}  // namespace

StartEvidence infer_start_blocks(const Trace& trace, const Config& config) {
  const InitialState& initial = trace.initial;
  const auto& segs = initial.segments;
  const auto& allocs = initial.allocations;
  StartEvidence out;
  out.blocks.resize(allocs.size());
  const bool expandable_active = config.expandable_segments && has_expandable_segments(config.version);
  const Bytes ms = config.max_split_size;
  const Bytes slack = config.oversize_slack();

  const std::vector<std::size_t> seg_order = by_address(segs);
  std::vector<std::size_t>& order = out.by_address;  // allocations by address
  sort_by_address(order, allocs);
  auto segment_of = [&](Addr addr) -> const InitialSegment* {
    auto it = std::upper_bound(seg_order.begin(), seg_order.end(), addr,
                               [&](Addr v, std::size_t s) { return v < segs[s].addr; });
    if (it == seg_order.begin()) return nullptr;
    const InitialSegment& s = segs[*(it - 1)];
    return addr < s.addr + s.size ? &s : nullptr;
  };

  // The interval the split rule alone allows (§4.1), and the gap rule's guess.
  std::vector<Pending> pending(allocs.size());
  // Allocations and segments both in address order: one walk finds each one's segment (what
  // segment_of() finds by a search).
  auto seg_it = seg_order.begin();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    const InitialAllocation& a = allocs[i];
    while (seg_it != seg_order.end() && segs[*seg_it].addr <= a.addr) ++seg_it;
    const InitialSegment* seg = seg_it == seg_order.begin() ? nullptr : &segs[*(seg_it - 1)];
    if (seg != nullptr && a.addr >= seg->addr + seg->size) seg = nullptr;
    if (seg == nullptr || a.block_size != 0) continue;
    Pending& p = pending[i];
    p.index = i;
    p.addr = a.addr;
    p.rounded = round_size(a.requested, config.rounding);
    p.next = seg->addr + seg->size;
    if (k + 1 < order.size() && allocs[order[k + 1]].addr < p.next) {
      p.next = allocs[order[k + 1]].addr;
      p.next_alloc = order[k + 1];
    }
    p.pool = seg->small_pool ? PoolKind::Small : PoolKind::Large;
    p.stream = a.stream;
    const Bytes gap = p.next - a.addr;
    BlockInterval b;
    if (p.rounded >= gap) {  // nothing else fits: the whole gap (as adopt() always did)
      b.min = b.max = b.guess = gap;
    } else {
      // Largest remainder left unsplit: none in the small pool or expandable mode; up to 1 MiB
      // below max_split_size; an oversize request takes a block < rounded + slack (§3.2 step 4)
      // or a fresh segment rounded to 2 MiB (§1.5).
      const bool tight = p.pool == PoolKind::Small || seg->expandable || expandable_active;
      const Bytes max_rest =
          tight ? kMinBlockSize - 1 : (p.rounded < ms ? kSmallSize : std::max(slack, kRoundLarge) - 1);
      b.min = p.rounded;
      b.max = std::min(gap, p.rounded + align_down(max_rest, p.rounded));
      const Bytes remaining = gap - p.rounded;
      const bool split = tight ? remaining >= kMinBlockSize : p.rounded < ms && remaining > kSmallSize;
      b.guess = split ? p.rounded : gap;
      if (!tight) {
        // L was carved from a maximal free block of s bytes at L (§4.3). What followed it was the
        // segment end, or a live block of this large-pool segment: more than 1 MiB (§2). So s
        // reaches the gap's end or the segment's, or leaves room for such a block. The block is
        // rounded (s split, s - rounded > 1 MiB, below max_split_size) or s.
        const Bytes rest = seg->addr + seg->size - a.addr;  // L to the segment end
        const Bytes room = kSmallSize + kMinBlockSize;      // the smallest large-pool block
        auto source_ok = [&](Bytes s) { return s == gap || s == rest || (rest >= room && s <= rest - room); };
        const bool may_split = p.rounded < ms && rest - p.rounded > kSmallSize;
        if (!may_split && !source_ok(b.min)) b.min = gap <= b.max ? gap : b.min;  // only s = gap fits
        if (!source_ok(b.max) && b.max != p.rounded) {
          const Bytes fits = rest >= room ? align_down(rest - room, p.rounded) : 0;
          b.max = std::max(b.min, std::min(b.max, fits));
        }
      }
      p.open = b.min != b.max;
    }
    out.blocks[i] = std::move(b);
  }

  // Every block is known or pinned by the split rule alone: the trace has nothing to add (the
  // walk below would end at its first event).
  if (std::none_of(pending.begin(), pending.end(), [](const Pending& p) { return p.open; })) return out;

  // The initial allocations by id while they live (the first of the same id counts). Snapshots
  // number allocations from 0, so the ids are mostly small: those go to the table.
  IdIndex live_initial(4 * allocs.size() + 1024);  // id -> index, while live
  for (std::size_t i = 0; i < allocs.size(); ++i) live_initial.insert(allocs[i].id, i);
  std::vector<char> live(allocs.size(), 1);
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < allocs.size(); ++i) {
    if (pending[i].open) open.push_back(i);
  }
  std::vector<std::pair<Addr, Bytes>> new_segments;  // segment_alloc since the last alloc
  // Initial segments holding nothing, where nothing has landed yet: a set of addresses kept as
  // a sorted array with a flag each (only ever shrinks; cheaper than a node per segment).
  std::vector<Addr> segment_addrs;
  segment_addrs.reserve(segs.size());
  for (std::size_t s : seg_order) segment_addrs.push_back(segs[s].addr);  // sorted (equal ones adjacent)
  segment_addrs.erase(std::unique(segment_addrs.begin(), segment_addrs.end()), segment_addrs.end());
  std::vector<char> untouched_flag(segment_addrs.size(), 1);
  auto untouched_slot = [&](Addr addr) -> char* {
    const auto it = std::lower_bound(segment_addrs.begin(), segment_addrs.end(), addr);
    return it != segment_addrs.end() && *it == addr
               ? &untouched_flag[static_cast<std::size_t>(it - segment_addrs.begin())]
               : nullptr;
  };
  auto untouched_erase = [&](Addr addr) {
    if (char* f = untouched_slot(addr)) *f = 0;
  };
  auto untouched_has = [&](Addr addr) {
    const char* f = untouched_slot(addr);
    return f != nullptr && *f != 0;
  };
  for (const InitialAllocation& a : allocs) {
    if (const InitialSegment* s = segment_of(a.addr)) untouched_erase(s->addr);
  }

  for (const Event& e : trace.events) {
    if (open.empty()) break;
    if (e.op == Op::SegmentAlloc) new_segments.emplace_back(e.addr, e.size);
    if (e.op == Op::SegmentFree) untouched_erase(e.addr);  // gone (its address may come back)
    if ((e.op == Op::Free || e.op == Op::FreeCompleted)) {
      const std::size_t i = live_initial.take(e.id);
      if (i != IdIndex::kNone) {
        live[i] = 0;
        pending[i].open = false;  // its neighbourhood may merge from now on
      }
    }
    if (e.op != Op::Alloc) continue;
    if (!e.has_addr) break;  // it may have landed after an open block: nothing more is sound

    // Positive evidence: the first alloc in the free space after L starts at L's block end.
    auto above = std::upper_bound(order.begin(), order.end(), e.addr,
                                  [&](Addr v, std::size_t i) { return v <= allocs[i].addr; });
    if (above != order.begin()) {
      Pending& p = pending[*(above - 1)];
      const bool reachable = p.next_alloc == ~std::size_t{0} ? e.addr < p.next : e.addr <= p.next;
      if (p.open && e.addr >= p.addr + p.rounded && reachable) {
        BlockInterval& b = *out.blocks[p.index];
        const Bytes block = e.addr - p.addr;
        if (block >= b.min && block <= b.max) {
          b.min = b.max = block;
          b.evidence = fmt::format("alloc {} placed at {:#x}, right after it", e.id, e.addr);
        } else {
          b.error = fmt::format(
              "the start state is inconsistent: alloc {} placed at {:#x} makes the block of allocation {} at {:#x} "
              "{} bytes, but a request rounded to {} bytes there has a block of {}..{} bytes (docs/allocator-model.md "
              "§4.1)",
              e.id, e.addr, allocs[p.index].id, p.addr, block, p.rounded, b.min, b.max);
        }
        p.open = false;
      }
    }

    // Negative evidence: the request did not go to the free block after L. Read when it was
    // served by a new segment (it missed every cached block, §3.1, §5), or from the start of an
    // initial segment that holds nothing and nothing landed in yet (a free block of exactly that
    // segment's size, which best fit preferred, §3.1).
    const bool missed = std::any_of(new_segments.begin(), new_segments.end(),
                                    [&](const auto& s) { return e.addr >= s.first && e.addr < s.first + s.second; });
    new_segments.clear();
    const InitialSegment* landed = segment_of(e.addr);
    const bool whole_free =
        !missed && landed != nullptr && !landed->expandable && e.addr == landed->addr && untouched_has(landed->addr);
    if (landed != nullptr) untouched_erase(landed->addr);
    if (!missed && !whole_free) continue;
    const Bytes rounded = round_size(e.size, config.rounding);
    const PoolKind pool = pool_for(rounded);
    // A cached block of F bytes is refused when F < rounded, or when it is too large for the
    // max_split_size rules: F >= ms for a normal request, F >= rounded + slack for an oversize one.
    const Bytes too_large = rounded < ms ? ms : saturating_add(rounded, slack);
    const std::string why =
        missed ? fmt::format("alloc {} of {} bytes took a new segment", e.id, rounded)
               : fmt::format("alloc {} of {} bytes went to the free segment at {:#x}", e.id, rounded, landed->addr);
    for (std::size_t i : open) {
      Pending& p = pending[i];
      if (!p.open || p.pool != pool || p.stream != e.stream) continue;
      BlockInterval& b = *out.blocks[i];
      // While nothing landed after L, the free block after it holds [L + block, next): F >= that,
      // and F is exactly that while the allocation at `next` lives (or `next` is the segment end).
      const Bytes reach = p.next - p.addr;
      const bool exact = p.next_alloc == ~std::size_t{0} || live[p.next_alloc];
      // The block sizes the decision allows, as intervals [first, second] (narrowed to their hull).
      std::vector<std::pair<Bytes, Bytes>> allowed;
      // F < rounded: block > reach - rounded (F >= reach - block suffices for this one).
      allowed.emplace_back(reach >= rounded ? align_up(reach - rounded + 1, p.rounded) : 0, kUnlimited);
      if (!exact && (whole_free || too_large != kUnlimited)) continue;  // F may be anything large
      if (missed && too_large != kUnlimited && reach >= too_large) {
        allowed.emplace_back(0, reach - too_large);  // F >= too_large: refused as well (§3.2 step 4)
      }
      if (whole_free) {
        const Bytes other = landed->size;
        // F > other: the free segment was the better fit; F == other: a tie, lower address wins.
        if (reach > other) allowed.emplace_back(0, align_down(reach - other - 1, p.rounded));
        if (reach >= other && p.addr + (reach - other) > landed->addr) {
          allowed.emplace_back(reach - other, reach - other);
        }
      }
      Bytes lo = kUnlimited, hi = 0;
      for (const auto& [first, second] : allowed) {
        const Bytes l = std::max(first, b.min), h = std::min(second, b.max);
        if (l > h) continue;
        lo = std::min(lo, l);
        hi = std::max(hi, h);
      }
      if (lo > hi) {
        b.error = fmt::format(
            "the start state is inconsistent: {} although the free block after allocation {} at {:#x} would have "
            "served it for every block size of {}..{} bytes (docs/allocator-model.md §3.1)",
            why, allocs[i].id, p.addr, b.min, b.max);
        p.open = false;
        continue;
      }
      if (lo == b.min && hi == b.max) continue;  // nothing ruled out
      b.min = lo;
      b.max = hi;
      b.evidence += (b.evidence.empty() ? "" : "; ") + why;
      if (b.determined()) p.open = false;
    }
  }
  return out;
}

}  // namespace fraglab::cca
