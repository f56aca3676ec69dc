// LiveAllocations: the allocations live at one point of a trace, and the one place that applies the
// lifetime rules of trace.hpp to an event. validate_trace() (event indices), parse_jsonl() (line
// numbers) and summarize() (peak requested bytes) all walk a trace through it, so the rules cannot
// drift apart between them.
//
// Invariants:
//  - an id is in the table from its `alloc` (or from the start, for an initial allocation) until
//    its free completes (`free` or `free_completed`); `free_requested` only marks it;
//  - a plain `free` of an id already marked free_requested is refused: the free was already
//    requested, only `free_completed` may end it;
//  - the table is an open-addressing hash map with linear probing and backward-shift deletion
//    (no tombstones), so a long trace of alloc/free pairs never degrades it. It exists because the
//    JSONL ingest budget is ~200 ns per event and std::unordered_map costs a node allocation per
//    alloc;
//  - slots are found through a hash seeded per process (fraglab/seeded_hash.hpp): ids chosen to
//    collide (hash flooding) probe as briefly as any others. Nothing iterates the slots, so the
//    seed changes no result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::detail {

// Sizes at or above this are impossible (no device has an exabyte): they are corrupt input, and
// refusing them keeps every sum of sizes in a trace far from overflowing 64 bits.
inline constexpr std::uint64_t kImpossibleSize = std::uint64_t{1} << 60;

class LiveAllocations {
 public:
  LiveAllocations() { rehash(64); }

  // Applies one event's effect on the live set. Returns nullptr when the event is allowed, else
  // a static description of what was expected (for "ORIGIN...: <what>" messages). Events other
  // than alloc / free* are always allowed. `requested` is the alloc's size (kept for peaks).
  // Always inlined: once Slot grew its hash field GCC called it, and the call cost the JSONL
  // reader ~18 instructions per event.
  [[gnu::always_inline]] const char* apply(Op op, AllocId id, std::uint64_t requested) {
    switch (op) {
      case Op::Alloc: {
        Slot& s = find_or_insert(id);
        if (s.state != kEmpty) return "alloc of an id that is already live (duplicate live id)";
        s.state = kLive;
        s.requested = requested;
        ++size_;
        return nullptr;
      }
      case Op::Free: {
        Slot* s = find(id);
        if (!s) return "free of an id that is not live (unknown id or double free)";
        if (s->state == kFreeRequested)
          return "free of an id whose free was already requested (expected free_completed)";
        released_ = s->requested;
        erase(*s);
        return nullptr;
      }
      case Op::FreeRequested: {
        Slot* s = find(id);
        if (!s) return "free_requested of an id that is not live (unknown id or double free)";
        if (s->state == kFreeRequested) return "free_requested twice for the same allocation";
        s->state = kFreeRequested;
        return nullptr;
      }
      case Op::FreeCompleted: {
        Slot* s = find(id);
        if (!s) return "free_completed of an id that is not live (unknown id or double free)";
        if (s->state != kFreeRequested) return "free_completed of an allocation whose free was never requested";
        released_ = s->requested;
        erase(*s);
        return nullptr;
      }
      default:
        return nullptr;
    }
  }

  // Adds an allocation live at the start of the trace. Returns false if the id is already live.
  bool add_initial(AllocId id, std::uint64_t requested, bool free_requested) {
    Slot& s = find_or_insert(id);
    if (s.state != kEmpty) return false;
    s.state = free_requested ? kFreeRequested : kLive;
    s.requested = requested;
    ++size_;
    return true;
  }

  // Requested bytes of a live id (0 if not live): what a completing free releases.
  std::uint64_t requested(AllocId id) const {
    const Slot* s = const_cast<LiveAllocations*>(this)->find(id);
    return s ? s->requested : 0;
  }

  // The requested bytes the last allowed `free` / `free_completed` released (a streamed reader's
  // running peak of requested bytes needs no second lookup).
  std::uint64_t last_released() const { return released_; }

  std::size_t size() const { return size_; }

  // The longest run of occupied slots a lookup may walk (tests hold it small on adversarial ids).
  std::size_t longest_probe() const {
    std::size_t longest = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state == kEmpty) continue;
      longest = std::max(longest, ((i - home(slots_[i].id)) & mask_) + 1);
    }
    return longest;
  }

 private:
  static constexpr std::uint8_t kEmpty = 0, kLive = 1, kFreeRequested = 2;
  struct Slot {
    AllocId id = 0;
    std::uint64_t requested = 0;
    // The top 32 bits of the id's hash, in what was padding: erase() and rehash() find a member's
    // home slot from it without hashing again (a table never has 2^32 slots, so the home index,
    // the top bits of the hash, is always within them).
    std::uint32_t hash_top = 0;
    std::uint8_t state = kEmpty;
  };

  std::uint64_t hash(AllocId id) const {
    // The high bits of a seeded mix: a fixed multiplier (Fibonacci hashing) sent every multiple
    // of its inverse to one slot, and a trace could list 100,000 of those (quadratic probing).
    return seeded_hash(id, seed_);
  }
  std::size_t home(AllocId id) const { return static_cast<std::size_t>(hash(id) >> shift_); }
  std::size_t home_of(const Slot& s) const { return static_cast<std::size_t>(s.hash_top >> (shift_ - 32)); }

  Slot* find(AllocId id) {
    for (std::size_t i = home(id);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.state == kEmpty) return nullptr;
      if (s.id == id) return &s;
    }
  }

  // The live slot for id, or the empty slot where it would go (state kEmpty, id set).
  Slot& find_or_insert(AllocId id) {
    // Load <= 1/2: at 3/4 the probe runs, and the backward shifts of erase(), cost the JSONL
    // reader ~14 instructions and 0.7 mispredicted branches per event more (callgrind). The live
    // set is small next to the trace, so the doubled table costs little memory.
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    const std::uint64_t h = hash(id);
    for (std::size_t i = static_cast<std::size_t>(h >> shift_);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.state == kEmpty) {
        s.id = id;
        s.hash_top = static_cast<std::uint32_t>(h >> 32);
        return s;
      }
      if (s.id == id) return s;
    }
  }

  // Backward-shift deletion: pull later members of the probe run into the hole so that every
  // entry stays reachable from its home slot without tombstones.
  void erase(Slot& victim) {
    std::size_t hole = static_cast<std::size_t>(&victim - slots_.data());
    --size_;
    for (std::size_t i = (hole + 1) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.state == kEmpty) break;
      std::size_t h = home_of(s);
      // Move s into the hole unless its home lies cyclically in (hole, i].
      bool stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (!stays) {
        slots_[hole] = s;
        hole = i;
      }
    }
    slots_[hole].state = kEmpty;
  }

  void rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (const Slot& s : old) {
      if (s.state == kEmpty) continue;
      for (std::size_t i = home_of(s);; i = (i + 1) & mask_) {
        if (slots_[i].state == kEmpty) {
          slots_[i] = s;
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  std::uint64_t seed_ = hash_seed();
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
  std::uint64_t released_ = 0;
};

}  // namespace fraglab::detail
