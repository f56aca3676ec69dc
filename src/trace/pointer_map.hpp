// PointerMap: object address -> uint32, for the snapshot reader's caches of frame dicts and frame
// lists already read (snapshot_reader.cpp read_stack). One lookup per frame of every stack made
// std::unordered_map (a node and a division per lookup) 40 % of reading a snapshot with frames.
//
// Invariants:
//  - open addressing with linear probing over a power-of-two table at most half full; never
//    erased from, so no tombstones;
//  - keys are addresses inside one parsed document (never null): the input cannot choose them,
//    so a fixed multiplicative hash spreads them (no seeding needed against hash flooding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fraglab::detail {

class PointerMap {
 public:
  PointerMap() { slots_.resize(1024); }

  // The value stored for `key`, or nullptr.
  const std::uint32_t* find(const void* key) const {
    for (std::size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == nullptr) return nullptr;
    }
  }
  // Stores `value` for `key`, which must not be in the map yet.
  void insert(const void* key, std::uint32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(key, value);
    ++size_;
  }
  void clear() {
    slots_.assign(1024, Slot{});
    size_ = 0;
  }

 private:
  struct Slot {
    const void* key = nullptr;
    std::uint32_t value = 0;
  };

  std::size_t slot_of(const void* key) const {
    const auto x = reinterpret_cast<std::uintptr_t>(key);
    return static_cast<std::size_t>(((x >> 4) * 0x9E3779B97F4A7C15ull) >> 20) & (slots_.size() - 1);
  }
  void place(const void* key, std::uint32_t value) {
    std::size_t i = slot_of(key);
    while (slots_[i].key != nullptr) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = Slot{key, value};
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.key != nullptr) place(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace fraglab::detail
