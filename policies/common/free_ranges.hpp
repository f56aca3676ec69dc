// FreeRanges: the free address ranges of one arena, coalesced, with a best-fit lookup.
// Shared by the policies that carve blocks out of one address space (bestfit, cuda_async).
//
// Invariants:
//  - ranges are disjoint and never adjacent: insert() merges a range with its neighbours;
//  - by_size_ holds exactly one (size, addr) entry per range of by_address_;
//  - total_ = Σ sizes.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

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

  // Adds [addr, addr + size) and merges it with adjacent free ranges. Returns the merged range.
  Range insert(Addr addr, Bytes size) {
    Range merged{addr, size};
    auto next = by_address_.lower_bound(addr);
    if (next != by_address_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > addr) throw std::logic_error("FreeRanges: insert overlaps a free range");
      if (prev->first + prev->second == addr) {
        merged.addr = prev->first;
        merged.size += prev->second;
        remove_entry(prev);
      }
    }
    if (next != by_address_.end()) {
      if (next->first < addr + size) throw std::logic_error("FreeRanges: insert overlaps a free range");
      if (next->first == addr + size) {
        merged.size += next->second;
        remove_entry(next);
      }
    }
    by_address_.emplace(merged.addr, merged.size);
    by_size_.emplace(merged.size, merged.addr);
    total_ += size;
    return merged;
  }

  // The smallest free range of at least `size` bytes; the lowest address among equal sizes.
  std::optional<Range> best_fit(Bytes size) const {
    auto it = by_size_.lower_bound({size, 0});
    if (it == by_size_.end()) return std::nullopt;
    return Range{it->second, it->first};
  }

  // Takes [addr, addr + size) out; it must lie inside one free range (which is split around it).
  void erase(Addr addr, Bytes size) {
    auto it = by_address_.upper_bound(addr);
    if (it == by_address_.begin()) throw std::logic_error("FreeRanges: erase of a range that is not free");
    --it;
    const Range whole{it->first, it->second};
    if (addr + size > whole.end()) throw std::logic_error("FreeRanges: erase of a range that is not free");
    remove_entry(it);
    total_ -= size;
    if (addr > whole.addr) add_entry(whole.addr, addr - whole.addr);
    if (addr + size < whole.end()) add_entry(addr + size, whole.end() - addr - size);
  }

  // The free range containing `addr`, if any.
  std::optional<Range> containing(Addr addr) const {
    auto it = by_address_.upper_bound(addr);
    if (it == by_address_.begin()) return std::nullopt;
    --it;
    if (addr >= it->first + it->second) return std::nullopt;
    return Range{it->first, it->second};
  }

  Bytes total() const { return total_; }
  std::size_t count() const { return by_address_.size(); }
  bool empty() const { return by_address_.empty(); }
  const std::map<Addr, Bytes>& by_address() const { return by_address_; }
  // Largest free range (0 when none).
  Bytes largest() const { return by_size_.empty() ? 0 : std::prev(by_size_.end())->first; }

  // Checks the invariants above from scratch.
  void audit(kit::AuditLog& log) const {
    Bytes sum = 0;
    Addr end = 0;
    for (const auto& [addr, size] : by_address_) {
      log.require(size > 0 && (sum == 0 || addr > end) && by_size_.count({size, addr}) == 1, [&] {
        return "free range at " + std::to_string(addr) + " is empty, touches its neighbour or is unindexed";
      });
      sum += size;
      end = addr + size;
    }
    log.require(sum == total_ && by_size_.size() == by_address_.size(), [&] {
      return "free ranges sum to " + std::to_string(sum) + " bytes, the total says " + std::to_string(total_);
    });
  }

 private:
  void add_entry(Addr addr, Bytes size) {
    by_address_.emplace(addr, size);
    by_size_.emplace(size, addr);
  }
  void remove_entry(std::map<Addr, Bytes>::iterator it) {
    by_size_.erase({it->second, it->first});
    by_address_.erase(it);
  }

  std::map<Addr, Bytes> by_address_;
  std::set<std::pair<Bytes, Addr>> by_size_;
  Bytes total_ = 0;
};

}  // namespace fraglab
