// AddressTable: every address a snapshot's alloc/free entries name, and what each holds while the
// snapshot reader walks the trace forward (snapshot_reader.cpp).
//
// Invariants:
//  - open addressing with linear probing, at most half full, never shrinks: an address once
//    seen stays "touched";
//  - slots are found through a mix that starts with a multiply by a random odd number drawn from
//    the per-process seed (fraglab/seeded_hash.hpp), so addresses chosen to collide probe as
//    briefly as any others; nothing iterates the slots into a result, so the seed changes no
//    output.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/types.hpp"

namespace fraglab::detail {

// Every address an alloc/free entry names, and what it holds while the trace is walked forward:
// an open-addressing table (linear probing, never shrinks: an address once seen stays "touched"),
// because std::unordered_map cost a node allocation per alloc on the ingest path.
class AddressTable {
 public:
  // A slot not `used` holds nothing else: a new table only clears each slot's `used` (empty_slots)
  // and get() fills in the rest of a slot when it takes it. A std::vector value-initialised every
  // field of every slot, ~10 instructions a slot (lm2.7b-ctx512's addresses grow the table to
  // 4,096), and a memset of the whole table costs more than that under callgrind (rep stosb).
  struct Slot {
    Addr addr;
    std::uint64_t ref;  // deferred id reference of the allocation there (when live)
    bool used;
    bool live;
    // Its free was requested and has not completed (when live): what validate_trace() would
    // track for the allocation's id, kept here so the reader can prove the trace's lifetimes.
    bool free_requested;
  };
  static_assert(std::is_trivial_v<Slot>);

  AddressTable() : slots_(empty_slots(mask_ + 1)) {}
  // Room for `addresses` addresses without a rehash, allocated once.
  explicit AddressTable(std::size_t addresses)
      : mask_(size_for(addresses) - 1), shift_(shift_for(mask_ + 1)), slots_(empty_slots(mask_ + 1)) {}

  // The slot of `addr`, added (not live) when new. Valid until the next get().
  Slot& get(Addr addr) {
    if (2 * (count_ + 1) > mask_ + 1) [[unlikely]]
      rehash(2 * (mask_ + 1));
    Slot& s = slots_[probe(slots_.get(), mask_, shift_, addr)];
    if (!s.used) {
      s = Slot{addr, 0, true, false, false};
      ++count_;
    }
    return s;
  }
  const Slot* find(Addr addr) const {
    const Slot& s = slots_[probe(slots_.get(), mask_, shift_, addr)];
    return s.used ? &s : nullptr;
  }

  // The longest run of slots a lookup may walk (tests hold it small on adversarial addresses).
  std::size_t longest_probe() const {
    const std::size_t mask = mask_;
    std::size_t longest = 0;
    for (std::size_t i = 0; i <= mask; ++i) {
      if (!slots_[i].used) continue;
      const std::size_t home = home_slot(slots_[i].addr, shift_);
      longest = std::max(longest, ((i - home) & mask) + 1);
    }
    return longest;
  }

 private:
  // The top bits of a mix of `addr` (a table of 2^(64 - shift) slots): a multiply by a random odd
  // multiplier, then a fixed xorshift and multiply. Fibonacci hashing (a fixed multiplier) sent
  // every multiple of its inverse to one slot, and a snapshot could name 100,000 such addresses
  // (quadratic probing); the random multiplier alone (multiply-shift) left some seeds with probe
  // runs 4x longer on a real trace's addresses (evenly spaced ones), which the finishing multiply
  // spreads. Two multiplies instead of seeded_hash()'s finaliser: one lookup per alloc/free entry.
  std::size_t home_slot(Addr addr, unsigned shift) const {
    std::uint64_t h = addr * multiplier_;
    h ^= h >> 32;
    return static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ull) >> shift);
  }
  // Index of the slot holding `addr`, or of the empty slot where it would go.
  // `mask` is the table's size - 1, kept in mask_ (a vector's size() divides by the 24-byte slot
  // size on every lookup, once per trace entry).
  std::size_t probe(const Slot* slots, std::size_t mask, unsigned shift, Addr addr) const {
    std::size_t i = home_slot(addr, shift);
    while (slots[i].used && slots[i].addr != addr) i = (i + 1) & mask;
    return i;
  }
  // The smallest table (at least the default 1,024 slots) at most half full with `addresses`.
  static std::size_t size_for(std::size_t addresses) {
    std::size_t size = kDefaultSize;
    while (size < 2 * addresses) size *= 2;
    return size;
  }
  // 64 - log2(size) for a power of two `size`.
  static unsigned shift_for(std::size_t size) { return static_cast<unsigned>(std::countl_zero(size)) + 1; }
  static std::unique_ptr<Slot[]> empty_slots(std::size_t size) {
    auto slots = std::make_unique_for_overwrite<Slot[]>(size);
    // Four a step (size is a power of two >= kDefaultSize): one store per slot, not four instructions.
    for (std::size_t i = 0; i < size; i += 4) {
      slots[i].used = false;
      slots[i + 1].used = false;
      slots[i + 2].used = false;
      slots[i + 3].used = false;
    }
    return slots;
  }
  void rehash(std::size_t size) {
    std::unique_ptr<Slot[]> fresh = empty_slots(size);
    for (std::size_t i = 0; i <= mask_; ++i)
      if (slots_[i].used) fresh[probe(fresh.get(), size - 1, shift_for(size), slots_[i].addr)] = slots_[i];
    slots_ = std::move(fresh);
    mask_ = size - 1;
    shift_ = shift_for(size);
  }

  static constexpr std::size_t kDefaultSize = 1024;
  std::size_t mask_ = kDefaultSize - 1;         // the table's size - 1
  unsigned shift_ = shift_for(kDefaultSize);    // 64 - log2(the table's size)
  std::unique_ptr<Slot[]> slots_;               // mask_ + 1 slots (a power of two), at most half full
  std::uint64_t multiplier_ = hash_seed() | 1;  // odd: a bijection of the addresses
  std::size_t count_ = 0;
};

}  // namespace fraglab::detail
