// AddressTable: every address a snapshot's alloc/free entries name, and what each holds while the
// snapshot reader walks the trace forward (snapshot_reader.cpp).
//
// Invariants:
//  - open addressing with linear probing, at most half full, never shrinks: an address once
//    seen stays "touched";
//  - slots are found through a hash seeded per process (fraglab/seeded_hash.hpp), so addresses
//    chosen to collide probe as briefly as any others; nothing iterates the slots into a result,
//    so the seed changes no output.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/types.hpp"

namespace fraglab::detail {

// Every address an alloc/free entry names, and what it holds while the trace is walked forward:
// an open-addressing table (linear probing, never shrinks: an address once seen stays "touched"),
// because std::unordered_map cost a node allocation per alloc on the ingest path.
class AddressTable {
 public:
  struct Slot {
    Addr addr = 0;
    std::uint64_t ref = 0;  // deferred id reference of the allocation there (when live)
    bool used = false;
    bool live = false;
    // Its free was requested and has not completed (when live): what validate_trace() would
    // track for the allocation's id, kept here so the reader can prove the trace's lifetimes.
    bool free_requested = false;
  };

  AddressTable() { slots_.resize(mask_ + 1); }

  // The slot of `addr`, added (not live) when new. Valid until the next get().
  Slot& get(Addr addr) {
    if (2 * (count_ + 1) > mask_ + 1) [[unlikely]]
      rehash(2 * (mask_ + 1));
    Slot& s = slots_[probe(slots_.data(), mask_, addr)];
    if (!s.used) {
      s.used = true;
      s.addr = addr;
      ++count_;
    }
    return s;
  }
  // Room for `addresses` addresses in all without a rehash.
  void reserve(std::size_t addresses) {
    std::size_t size = mask_ + 1;
    while (size < 2 * addresses) size *= 2;
    if (size != mask_ + 1) rehash(size);
  }
  const Slot* find(Addr addr) const {
    const Slot& s = slots_[probe(slots_.data(), mask_, addr)];
    return s.used ? &s : nullptr;
  }

  // The longest run of slots a lookup may walk (tests hold it small on adversarial addresses).
  std::size_t longest_probe() const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t longest = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].used) continue;
      const auto home = static_cast<std::size_t>(seeded_hash(slots_[i].addr, seed_) >> 32) & mask;
      longest = std::max(longest, ((i - home) & mask) + 1);
    }
    return longest;
  }

 private:
  // Index of the slot holding `addr`, or of the empty slot where it would go.
  // `mask` is the table's size - 1, kept in mask_ (a vector's size() divides by the 24-byte slot
  // size on every lookup, once per trace entry).
  std::size_t probe(const Slot* slots, std::size_t mask, Addr addr) const {
    const std::uint64_t seed = seed_;
    // A seeded mix: Fibonacci hashing (a fixed multiplier) sent every multiple of its inverse
    // to one slot, and a snapshot could name 100,000 such addresses (quadratic probing).
    std::size_t i = static_cast<std::size_t>(seeded_hash(addr, seed) >> 32) & mask;
    while (slots[i].used && slots[i].addr != addr) i = (i + 1) & mask;
    return i;
  }
  void rehash(std::size_t size) {
    std::vector<Slot> fresh(size);
    for (const Slot& s : slots_)
      if (s.used) fresh[probe(fresh.data(), size - 1, s.addr)] = s;
    slots_.swap(fresh);
    mask_ = size - 1;
  }

  std::vector<Slot> slots_;  // size is a power of two, at most half full
  std::size_t mask_ = 1023;  // slots_.size() - 1
  std::uint64_t seed_ = hash_seed();
  std::size_t count_ = 0;
};

}  // namespace fraglab::detail
