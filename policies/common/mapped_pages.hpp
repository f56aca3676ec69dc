// MappedPages: which pages of an arena reserved with Device::reserve_range have physical memory
// mapped behind them, and the device calls (map / unmap) that change that. Shared by the policies
// that grow one virtual arena page by page (bestfit, cuda_async).
//
// Kept as a sorted array of mapped runs, not one bit per page: an 80 GiB arena is 40k pages of
// 2 MiB and a replay must stay above a million events a second, so every query costs one binary
// search plus one step per run it touches, never a scan over pages. An arena has few runs (its
// mapped pages are mostly contiguous), so a flat array beats a tree map: no node allocations.
//
// Invariants:
//  - runs_ holds disjoint, non-adjacent runs [start, end) of whole pages (adjacent runs merge,
//    as the device merges its own), so unmapping any piece of a run is legal on the device;
//  - mapped_bytes_ = Σ run lengths = the bytes this arena has added to the device's reserved.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/free_ranges.hpp"
#include "fraglab/device.hpp"
#include "fraglab/policy.hpp"

namespace fraglab {

class MappedPages {
 public:
  explicit MappedPages(Device& device) : device_(device) {}

  // Maps every page of [lo, hi) (page aligned) that is not mapped yet: one device map per
  // unmapped gap, lowest address first. When the device refuses one, the gaps this call mapped
  // are unmapped again (the arena is left exactly as it was) and the answer is false.
  bool map_missing(Addr lo, Addr hi) {
    // The common case, a block placed in pages that are already mapped: one search, no gaps.
    if (lo >= hi) return true;
    if (auto holder = first_starting_after(lo); holder != runs_.begin() && std::prev(holder)->second >= hi) {
      return true;
    }
    std::vector<std::pair<Addr, Addr>>& gaps = gaps_;  // reused: no allocation per call
    unmapped_within(lo, hi, gaps);
    for (std::size_t i = 0; i < gaps.size(); ++i) {
      const auto [gap_lo, gap_hi] = gaps[i];
      if (!device_.map(gap_lo, gap_hi - gap_lo)) {
        for (std::size_t done = 0; done < i; ++done) unmap_within(gaps[done].first, gaps[done].second);
        return false;
      }
      add_run(gap_lo, gap_hi);
    }
    return true;
  }

  // Unmaps every mapped page of [lo, hi) (page aligned): one device unmap per mapped piece.
  // Returns the bytes unmapped.
  Bytes unmap_within(Addr lo, Addr hi) {
    std::vector<std::pair<Addr, Addr>>& pieces = pieces_;  // reused: no allocation per call
    pieces.clear();
    auto it = first_starting_after(lo);
    if (it != runs_.begin() && std::prev(it)->second > lo) --it;
    for (; it != runs_.end() && it->first < hi; ++it) {
      pieces.emplace_back(std::max(it->first, lo), std::min(it->second, hi));
    }
    Bytes released = 0;
    for (const auto& [piece_lo, piece_hi] : pieces) {
      device_.unmap(piece_lo, piece_hi - piece_lo);
      remove_piece(piece_lo, piece_hi);
      released += piece_hi - piece_lo;
    }
    return released;
  }

  // Unmaps mapped pages of [lo, hi) (page aligned), highest address first, until `budget` bytes
  // are released (whole pages of `page` bytes, so up to one page more than the budget).
  // Returns the bytes released.
  Bytes unmap_from_top(Addr lo, Addr hi, Bytes budget, Bytes page) {
    Bytes released = 0;
    while (released < budget) {
      auto it = first_starting_at_or_after(hi);
      if (it == runs_.begin()) break;
      --it;
      if (it->second <= lo) break;
      const Addr piece_hi = std::min(it->second, hi);
      const Addr piece_lo_limit = std::max(it->first, lo);
      const Bytes wanted = (budget - released + page - 1) / page * page;
      const Addr piece_lo = piece_hi - piece_lo_limit > wanted ? piece_hi - wanted : piece_lo_limit;
      device_.unmap(piece_lo, piece_hi - piece_lo);
      remove_piece(piece_lo, piece_hi);
      released += piece_hi - piece_lo;
      hi = piece_lo;
    }
    return released;
  }

  // Mapped bytes inside [lo, hi) (for statistics).
  Bytes mapped_within(Addr lo, Addr hi) const {
    Bytes bytes = 0;
    auto it = first_starting_after(lo);
    if (it != runs_.begin() && std::prev(it)->second > lo) --it;
    for (; it != runs_.end() && it->first < hi; ++it) bytes += std::min(it->second, hi) - std::max(it->first, lo);
    return bytes;
  }

  // One SegmentView per mapped run (as PyTorch lists an expandable segment), holding the parts of
  // the allocated `blocks` (any order) and of the `free` ranges that lie in it: the segment sizes
  // add up to the mapped bytes.
  std::vector<SegmentView> segments(std::vector<SegmentView::Piece> blocks, const FreeRanges& free,
                                    const std::string& pool) const {
    std::vector<SegmentView::Piece>& pieces = blocks;
    for (const auto& [addr, size] : free.by_address()) pieces.push_back({addr, size, false});
    std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
    std::vector<SegmentView> out;
    std::size_t first = 0;  // first piece that may overlap the current run
    for (const auto& [run_lo, run_hi] : runs_) {
      SegmentView view{run_lo, run_hi - run_lo, 0, pool, true, {}};
      while (first < pieces.size() && pieces[first].addr + pieces[first].size <= run_lo) ++first;
      for (std::size_t i = first; i < pieces.size() && pieces[i].addr < run_hi; ++i) {
        const Addr lo = std::max(pieces[i].addr, run_lo);
        const Addr hi = std::min(pieces[i].addr + pieces[i].size, run_hi);
        view.blocks.push_back(SegmentView::Piece{lo, hi - lo, pieces[i].allocated});
      }
      out.push_back(std::move(view));
    }
    return out;
  }

  Bytes mapped_bytes() const { return mapped_bytes_; }
  // The mapped runs [start, end) in address order.
  const std::vector<std::pair<Addr, Addr>>& runs() const { return runs_; }

 private:
  // Sets `gaps` to the unmapped gaps of [lo, hi), in address order.
  void unmapped_within(Addr lo, Addr hi, std::vector<std::pair<Addr, Addr>>& gaps) const {
    gaps.clear();
    Addr at = lo;
    auto next = first_starting_after(lo);
    if (next != runs_.begin() && std::prev(next)->second > lo) at = std::prev(next)->second;
    while (at < hi) {
      const Addr gap_end = next != runs_.end() ? std::min(next->first, hi) : hi;
      if (gap_end > at) gaps.emplace_back(at, gap_end);
      if (next == runs_.end() || next->first >= hi) break;
      at = next->second;
      ++next;
    }
  }

  using Runs = std::vector<std::pair<Addr, Addr>>;

  Runs::iterator first_starting_at_or_after(Addr addr) {
    return std::lower_bound(runs_.begin(), runs_.end(), addr, [](const auto& run, Addr a) { return run.first < a; });
  }
  Runs::iterator first_starting_after(Addr addr) {
    return std::upper_bound(runs_.begin(), runs_.end(), addr, [](Addr a, const auto& run) { return a < run.first; });
  }
  Runs::const_iterator first_starting_after(Addr addr) const {
    return std::upper_bound(runs_.begin(), runs_.end(), addr, [](Addr a, const auto& run) { return a < run.first; });
  }

  // Adds the run [lo, hi) (unmapped before), merged with the runs it touches.
  void add_run(Addr lo, Addr hi) {
    mapped_bytes_ += hi - lo;
    auto next = first_starting_at_or_after(lo);
    const bool merge_prev = next != runs_.begin() && std::prev(next)->second == lo;
    const bool merge_next = next != runs_.end() && next->first == hi;
    if (merge_prev && merge_next) {
      std::prev(next)->second = next->second;
      runs_.erase(next);
    } else if (merge_prev) {
      std::prev(next)->second = hi;
    } else if (merge_next) {
      next->first = lo;
    } else {
      runs_.insert(next, {lo, hi});
    }
  }

  // Removes [lo, hi), which lies inside one run.
  void remove_piece(Addr lo, Addr hi) {
    auto it = std::prev(first_starting_after(lo));  // the run holding the piece
    const Addr run_lo = it->first;
    const Addr run_hi = it->second;
    mapped_bytes_ -= hi - lo;
    if (run_lo < lo && hi < run_hi) {
      it->second = lo;
      runs_.insert(std::next(it), {hi, run_hi});
    } else if (run_lo < lo) {
      it->second = lo;
    } else if (hi < run_hi) {
      it->first = hi;
    } else {
      runs_.erase(it);
    }
  }

  Device& device_;
  Runs runs_;  // [start, end), sorted by start
  // Scratch for map_missing and unmap_within (distinct: a failed map_missing unmaps).
  std::vector<std::pair<Addr, Addr>> gaps_;
  std::vector<std::pair<Addr, Addr>> pieces_;
  Bytes mapped_bytes_ = 0;
};

// The arena invariants bestfit and cuda_async share: [base, top) is tiled exactly by the live
// `blocks` (addr, size) and the `free` ranges; every page under a live block is mapped; nothing
// outside [base, top) is mapped.
inline void audit_arena(kit::AuditLog& log, Addr base, Addr top, std::vector<std::pair<Addr, Bytes>> blocks,
                        const FreeRanges& free, const MappedPages& pages, Bytes page) {
  free.audit(log);
  // In address order: the live blocks may come from a hash map, whose order must not decide which
  // violation is reported first (the same run gives the same message).
  std::sort(blocks.begin(), blocks.end());
  const auto live = static_cast<std::ptrdiff_t>(blocks.size());
  for (const auto& [addr, size] : blocks) {
    const Addr lo = kit::align_down(addr, page), hi = kit::align_up(addr + size, page);
    log.require(pages.mapped_within(lo, hi) == hi - lo,
                [&] { return fmt::format("live block [0x{:x}, +{}) has unmapped pages", addr, size); });
  }
  for (const auto& [addr, size] : free.by_address()) blocks.emplace_back(addr, size);
  std::inplace_merge(blocks.begin(), blocks.begin() + live, blocks.end());
  Addr at = base;
  for (const auto& [addr, size] : blocks) {
    log.require(addr == at, [&] { return fmt::format("arena not tiled at 0x{:x} (next piece 0x{:x})", at, addr); });
    at = addr + size;
  }
  log.require(at == top, [&] { return fmt::format("arena pieces end at 0x{:x}, its top is 0x{:x}", at, top); });
  log.require(pages.runs().empty() || (pages.runs().begin()->first >= base && pages.runs().rbegin()->second <= top),
              [] { return std::string("pages mapped outside the arena"); });
}

}  // namespace fraglab
