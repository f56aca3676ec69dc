// AddressRanges: disjoint address ranges by start address, for SimDevice's address space. Header-
// only, device layer.
//
// One sorted array with a gap (a gap buffer): the entries before the gap and after it are in
// address order, and the gap sits where the last insert or erase was. Why not a tree: a replay's
// device calls come in runs at one place (a bump pointer hands out increasing addresses, right
// below the ranges placed above it), so an insert lands where the gap already is: no search, no
// node, no rebalancing; the gap moves (a memmove of the entries in between) only when a call goes
// elsewhere. Lookups are a binary search on one side of the gap.
//
// Entries are 16 bytes: the size of a range and whether it is a reserved VMM range share a word
// (sizes are multiples of 512 bytes, so the low bit is free).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <memory>

#include "fraglab/types.hpp"

namespace fraglab {

class AddressRanges {
 public:
  struct Entry {
    Addr addr;
    Bytes bits;  // size | vmm
    Bytes size() const { return bits & ~Bytes{1}; }
    bool vmm() const { return (bits & 1) != 0; }
    Addr end() const { return addr + size(); }
  };
  static constexpr std::size_t npos = ~std::size_t{0};

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The i-th range in address order (i < size()).
  const Entry& operator[](std::size_t i) const { return data_[i < gap_ ? i : i + (capacity_ - size_)]; }
  const Entry& back() const { return (*this)[size_ - 1]; }

  // The first range starting at or after `addr` (lower) / after `addr` (upper); size() if none.
  std::size_t lower_bound(Addr addr) const {
    return search(addr, [](const Entry& e, Addr a) { return e.addr < a; });
  }
  std::size_t upper_bound(Addr addr) const {
    return search(addr, [](const Entry& e, Addr a) { return e.addr <= a; });
  }
  // The range starting at `addr`, npos if none.
  std::size_t find(Addr addr) const {
    const std::size_t i = lower_bound(addr);
    return i < size_ && (*this)[i].addr == addr ? i : npos;
  }

  // Adds [addr, addr + size), which overlaps no range (the caller checked). Sizes are even.
  void insert(Addr addr, Bytes size, bool vmm) {
    assert(size % 2 == 0);
    const Entry e{addr, size | (vmm ? 1 : 0)};
    // Where the gap is, usually: the entry before it is lower and the one after it higher.
    const bool at_gap = (gap_ == 0 || data_[gap_ - 1].addr < addr) && (gap_ == size_ || (*this)[gap_].addr > addr);
    const std::size_t i = at_gap ? gap_ : lower_bound(addr);
    if (size_ == capacity_) {
      grow(i);
    } else {
      move_gap(i);
    }
    data_[gap_++] = e;
    ++size_;
  }
  void erase(std::size_t i) {
    move_gap(i);  // the entry is now the first after the gap: the gap takes it
    --size_;
  }

 private:
  template <class Less>
  std::size_t search(Addr addr, Less less) const {
    const Entry* data = data_.get();
    if (gap_ > 0 && !less(data[gap_ - 1], addr)) {  // the answer lies before the gap
      return static_cast<std::size_t>(std::lower_bound(data, data + gap_, addr, less) - data);
    }
    const std::size_t after = gap_ + (capacity_ - size_);
    return gap_ +
           static_cast<std::size_t>(std::lower_bound(data + after, data + capacity_, addr, less) - (data + after));
  }
  // The gap to logical position i (entries [i, gap) move above it, or [gap, i) below it).
  void move_gap(std::size_t i) {
    const std::size_t gap_size = capacity_ - size_;
    Entry* data = data_.get();
    if (i < gap_) {
      std::memmove(data + i + gap_size, data + i, (gap_ - i) * sizeof(Entry));
    } else if (i > gap_) {
      std::memmove(data + gap_, data + gap_ + gap_size, (i - gap_) * sizeof(Entry));
    }
    gap_ = i;
  }
  // Full: twice the room, the gap at logical position i.
  void grow(std::size_t i) {
    const std::size_t capacity = std::max<std::size_t>(16, 2 * capacity_);
    auto data = std::make_unique_for_overwrite<Entry[]>(capacity);
    // Full: no gap, logical order = physical order.
    if (size_ > 0) {
      std::memcpy(data.get(), data_.get(), i * sizeof(Entry));
      std::memcpy(data.get() + i + (capacity - size_), data_.get() + i, (size_ - i) * sizeof(Entry));
    }
    data_ = std::move(data);
    capacity_ = capacity;
    gap_ = i;
  }

  std::unique_ptr<Entry[]> data_;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::size_t gap_ = 0;  // logical position of the gap: entries [0, gap_) are before it
};

}  // namespace fraglab
