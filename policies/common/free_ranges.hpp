// FreeRanges: the free address ranges of one arena, coalesced, with a best-fit lookup.
// Shared by the policies that carve blocks out of one address space (bestfit, cuda_async).
//
// Kept in two flat sorted arrays, not in tree maps: an arena holds tens to a few thousand free
// ranges, and every event of a replay inserts or erases one, so a binary search plus a short
// memmove beats a node allocation and a rebalance (about 5x fewer instructions per event).
//
// A set that is searched by size only now and then (cuda_async's kinds of free bytes, next to its
// set of all free bytes) can do without the size index: best_fit then scans the ranges.
//
// Invariants:
//  - by_address_ is sorted by address; ranges are disjoint and never adjacent: insert() merges a
//    range with its neighbours;
//  - with a size index, by_size_ is sorted by (size, addr) and holds exactly one entry per range
//    of by_address_; without, by_size_ is empty;
//  - total_ = Σ sizes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/policy_kit.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

class FreeRanges {
 public:
  struct Range {
    Addr addr = 0;
    Bytes size = 0;
    Addr end() const { return addr + size; }
    bool operator==(const Range&) const = default;
  };

  enum class SizeIndex { Kept, None };
  explicit FreeRanges(SizeIndex size_index = SizeIndex::Kept) : indexed_(size_index == SizeIndex::Kept) {}

  // Adds [addr, addr + size) and merges it with adjacent free ranges. Returns the merged range.
  Range insert(Addr addr, Bytes size) {
    auto next = first_at_or_after(addr);
    const bool has_prev = next != by_address_.begin();
    if (has_prev && std::prev(next)->end() > addr) throw std::logic_error("FreeRanges: insert overlaps a free range");
    if (next != by_address_.end() && next->addr < addr + size) {
      throw std::logic_error("FreeRanges: insert overlaps a free range");
    }
    const bool merge_prev = has_prev && std::prev(next)->end() == addr;
    const bool merge_next = next != by_address_.end() && next->addr == addr + size;
    total_ += size;
    if (merge_prev) {
      // The previous range grows in place (its position by address stays); a following range
      // it now touches is absorbed.
      Range& prev = *std::prev(next);
      const Range before = prev;
      prev.size += size;
      if (merge_next) {
        unindex(*next);
        prev.size += next->size;
        by_address_.erase(next);
      }
      reindex(before, prev);
      return prev;
    }
    if (merge_next) {
      const Range before = *next;
      next->addr = addr;
      next->size += size;
      reindex(before, *next);
      return *next;
    }
    const Range added{addr, size};
    by_address_.insert(next, added);
    index(added);
    return added;
  }

  // The smallest free range of at least `size` bytes; the lowest address among equal sizes.
  std::optional<Range> best_fit(Bytes size) const {
    if (!indexed_) {
      const Range* best = nullptr;  // in address order: the first of the smallest size wins
      for (const Range& r : by_address_) {
        if (r.size >= size && (best == nullptr || r.size < best->size)) best = &r;
      }
      return best == nullptr ? std::nullopt : std::optional<Range>(*best);
    }
    auto it = by_size_lower_bound(by_size_.begin(), by_size_.end(), key_of(size, 0));
    if (it == by_size_.end()) return std::nullopt;
    return Range{addr_of(*it), size_of(*it)};
  }

  // Takes [addr, addr + size) out; it must lie inside one free range (which is split around it).
  void erase(Addr addr, Bytes size) {
    auto it = first_at_or_after(addr + 1);  // the range holding addr is the one before
    if (it == by_address_.begin()) throw std::logic_error("FreeRanges: erase of a range that is not free");
    --it;
    if (addr < it->addr || addr + size > it->end()) {
      throw std::logic_error("FreeRanges: erase of a range that is not free");
    }
    erase_inside(it, addr, size);
  }

  // Takes out whatever part of [lo, hi) is free (none, or pieces of several ranges). True when
  // some was. One search when none is (the common case), and no further search per piece.
  bool erase_within(Addr lo, Addr hi) {
    bool removed = false;
    // Candidates from the last range starting below hi downwards; erasing inside one range moves
    // only the ranges after it, so the index of the ones below stays right.
    for (auto i = static_cast<std::size_t>(first_at_or_after(hi) - by_address_.begin()); i-- > 0;) {
      const auto it = by_address_.begin() + static_cast<std::ptrdiff_t>(i);
      if (it->end() <= lo) break;
      const Addr piece_lo = std::max(it->addr, lo);
      erase_inside(it, piece_lo, std::min(it->end(), hi) - piece_lo);
      removed = true;
    }
    return removed;
  }

  // The free range containing `addr`, if any.
  std::optional<Range> containing(Addr addr) const {
    const Range* r = last_starting_below(addr + 1);
    if (r == nullptr || addr >= r->end()) return std::nullopt;
    return *r;
  }

  // The range with the highest address below `addr` (nullptr when none): the only one that may
  // overlap [x, addr) from below.
  const Range* last_starting_below(Addr addr) const {
    auto it = first_at_or_after(addr);
    return it == by_address_.begin() ? nullptr : &*std::prev(it);
  }

  Bytes total() const { return total_; }
  std::size_t count() const { return by_address_.size(); }
  bool empty() const { return by_address_.empty(); }
  // The ranges in address order.
  const std::vector<Range>& by_address() const { return by_address_; }
  // Largest free range (0 when none).
  Bytes largest() const {
    if (!indexed_) {
      Bytes most = 0;
      for (const Range& r : by_address_) most = std::max(most, r.size);
      return most;
    }
    return by_size_.empty() ? 0 : size_of(by_size_.back());
  }
  // Empties the set (keeping whether it has a size index).
  void clear() {
    by_address_.clear();
    by_size_.clear();
    total_ = 0;
  }

  // Checks the invariants above from scratch.
  void audit(kit::AuditLog& log) const {
    Bytes sum = 0;
    Addr end = 0;
    for (const auto& [addr, size] : by_address_) {
      log.require(
          size > 0 && (sum == 0 || addr > end) &&
              (!indexed_ || std::binary_search(by_size_.begin(), by_size_.end(), key_of(size, addr))),
          [&] { return "free range at " + std::to_string(addr) + " is empty, touches its neighbour or is unindexed"; });
      sum += size;
      end = addr + size;
    }
    log.require(std::is_sorted(by_size_.begin(), by_size_.end()), [] { return std::string("size index unsorted"); });
    log.require(sum == total_ && by_size_.size() == (indexed_ ? by_address_.size() : 0), [&] {
      return "free ranges sum to " + std::to_string(sum) + " bytes, the total says " + std::to_string(total_);
    });
  }

 private:
  // (size, addr) packed in one 128-bit integer, so that integer order is the order best fit
  // compares ranges in (smallest, then lowest address): a search compares with two instructions,
  // and an insert into the array is one memmove.
  __extension__ using SizeKey = unsigned __int128;
  static SizeKey key_of(Bytes size, Addr addr) { return (static_cast<SizeKey>(size) << 64) | addr; }
  static Bytes size_of(SizeKey key) { return static_cast<Bytes>(key >> 64); }
  static Addr addr_of(SizeKey key) { return static_cast<Addr>(key); }

  // Takes [addr, addr + size) out of the range at `it`, which holds it.
  void erase_inside(std::vector<Range>::iterator it, Addr addr, Bytes size) {
    const Range whole = *it;
    total_ -= size;
    const bool keep_low = addr > whole.addr;
    const bool keep_high = addr + size < whole.end();
    const Range low{whole.addr, addr - whole.addr};
    const Range high{addr + size, whole.end() - addr - size};
    // Reuse the entry in place for one remainder; only a split in two inserts.
    if (keep_low) {
      *it = low;
      reindex(whole, low);
      if (keep_high) {
        by_address_.insert(std::next(it), high);
        index(high);
      }
    } else if (keep_high) {
      *it = high;
      reindex(whole, high);
    } else {
      unindex(whole);
      by_address_.erase(it);
    }
  }

  std::vector<Range>::iterator first_at_or_after(Addr addr) {
    return std::lower_bound(by_address_.begin(), by_address_.end(), addr,
                            [](const Range& r, Addr a) { return r.addr < a; });
  }
  std::vector<Range>::const_iterator first_at_or_after(Addr addr) const {
    return std::lower_bound(by_address_.begin(), by_address_.end(), addr,
                            [](const Range& r, Addr a) { return r.addr < a; });
  }
  template <typename It>
  static It by_size_lower_bound(It first, It last, SizeKey key) {
    return std::lower_bound(first, last, key);
  }
  void index(const Range& r) {
    if (!indexed_) return;
    const SizeKey key = key_of(r.size, r.addr);
    by_size_.insert(by_size_lower_bound(by_size_.begin(), by_size_.end(), key), key);
  }
  // Replaces the size-index entry of `from` by one of `to`: shifts only the entries between the
  // two positions (a range that shrinks or grows usually moves a short way in size order).
  void reindex(const Range& from, const Range& to) {
    if (!indexed_) return;
    const SizeKey old_key = key_of(from.size, from.addr);
    const SizeKey new_key = key_of(to.size, to.addr);
    const auto old_pos = by_size_lower_bound(by_size_.begin(), by_size_.end(), old_key);
    if (new_key < old_key) {
      const auto new_pos = by_size_lower_bound(by_size_.begin(), old_pos, new_key);
      std::move_backward(new_pos, old_pos, std::next(old_pos));
      *new_pos = new_key;
    } else {
      const auto new_end = by_size_lower_bound(std::next(old_pos), by_size_.end(), new_key);
      std::move(std::next(old_pos), new_end, old_pos);
      *std::prev(new_end) = new_key;
    }
  }
  void unindex(const Range& r) {
    if (!indexed_) return;
    by_size_.erase(by_size_lower_bound(by_size_.begin(), by_size_.end(), key_of(r.size, r.addr)));
  }

  std::vector<Range> by_address_;
  std::vector<SizeKey> by_size_;
  bool indexed_ = true;
  Bytes total_ = 0;
};

}  // namespace fraglab
