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
//  - two tables, each id live in at most one: dense ids (below 1024 + twice the allocations seen,
//    what every trace we write or read from a snapshot uses) index pages directly; any other id
//    goes to an open-addressing hash map with linear probing and backward-shift deletion (no
//    tombstones), so a long trace of alloc/free pairs never degrades it. Both exist because the
//    JSONL ingest budget is ~100 ns per event and std::unordered_map costs a node allocation per
//    alloc;
//  - hash slots are found through a hash seeded per process (fraglab/seeded_hash.hpp): ids chosen
//    to collide (hash flooding) probe as briefly as any others. Nothing iterates the slots, so the
//    seed changes no result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
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
  // Always inlined, and only the paged table's path is: it is the JSONL reader's per-event work.
  [[gnu::always_inline]] const char* apply(Op op, AllocId id, std::uint64_t requested) {
    if (op > Op::FreeCompleted) return nullptr;
    const std::size_t page_index = static_cast<std::size_t>(id >> kPageBits);
    Page* page = page_index < pages_.size() ? pages_[page_index].get() : nullptr;
    if (op == Op::Alloc) {
      if (page == nullptr) {
        if (id >= paged_bound_) return apply_sparse(op, id, requested);
        page = add_page(page_index);
      }
      const std::size_t i = static_cast<std::size_t>(id & kPageMask);
      // An id can still be live in the hash table: allocated there while above the bound.
      if (page->state[i] != kEmpty || (size_ != 0 && find(id) != nullptr))
        return "alloc of an id that is already live (duplicate live id)";
      page->state[i] = kLive;
      page->requested[i] = requested;
      ++page->live;
      ++paged_size_;
      paged_bound_ += 2;
      return nullptr;
    }
    const std::size_t i = static_cast<std::size_t>(id & kPageMask);
    if (page == nullptr || page->state[i] == kEmpty) return apply_sparse(op, id, requested);
    std::uint8_t& state = page->state[i];
    switch (op) {
      case Op::Free:
        if (state == kFreeRequested) return "free of an id whose free was already requested (expected free_completed)";
        break;
      case Op::FreeRequested:
        if (state == kFreeRequested) return "free_requested twice for the same allocation";
        state = kFreeRequested;
        return nullptr;
      default:  // Op::FreeCompleted
        if (state != kFreeRequested) return "free_completed of an allocation whose free was never requested";
        break;
    }
    released_ = page->requested[i];
    state = kEmpty;
    --paged_size_;
    if (--page->live == 0) drop_page(page_index);
    return nullptr;
  }

  // Adds an allocation live at the start of the trace. Returns false if the id is already live.
  bool add_initial(AllocId id, std::uint64_t requested, bool free_requested) {
    if (apply(Op::Alloc, id, requested) != nullptr) return false;
    if (free_requested) apply(Op::FreeRequested, id, 0);
    return true;
  }

  // Requested bytes of a live id (0 if not live): what a completing free releases.
  std::uint64_t requested(AllocId id) const {
    const std::size_t page_index = static_cast<std::size_t>(id >> kPageBits);
    if (page_index < pages_.size() && pages_[page_index] != nullptr) {
      const Page& page = *pages_[page_index];
      if (page.state[id & kPageMask] != kEmpty) return page.requested[id & kPageMask];
    }
    const Slot* s = const_cast<LiveAllocations*>(this)->find(id);
    return s ? s->requested : 0;
  }

  // The requested bytes the last allowed `free` / `free_completed` released (a streamed reader's
  // running peak of requested bytes needs no second lookup).
  std::uint64_t last_released() const { return released_; }

  std::size_t size() const { return paged_size_ + size_; }

  // The longest run of occupied slots a lookup in the hash table may walk (tests hold it small on
  // adversarial ids).
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

  // ---- the paged table: ids below a bound that grows with the allocations seen -----------------
  // Traces we write and snapshots number their allocations from 0 or 1, so almost every id is
  // below twice the allocations seen so far: such an id is its own index into pages of
  // kPageSize entries, found with no hashing and no probing (the hash table below cost the JSONL
  // reader ~55 instructions per event). A page is allocated when an id below the bound first
  // needs it, and freed once nothing in it is live, so the pages hold about what is live, and ids
  // spread to defeat them cost at most one page per kPageSize allocations seen (the bound). Any
  // other id, e.g. 2^63, goes to the hash table. An id is live in at most one table; which one
  // holds it changes no result.
  static constexpr unsigned kPageBits = 10;
  static constexpr AllocId kPageMask = (AllocId{1} << kPageBits) - 1;
  static constexpr std::size_t kPageSize = std::size_t{1} << kPageBits;
  struct Page {
    std::uint32_t live = 0;              // entries not kEmpty
    std::uint8_t state[kPageSize] = {};  // kEmpty: the entry holds nothing
    // Read only while its state is not kEmpty: left uninitialised, so a new page zeroes 1 KiB, not 9.
    std::uint64_t requested[kPageSize];
  };

  [[gnu::noinline]] Page* add_page(std::size_t page_index) {
    if (page_index >= pages_.size()) pages_.resize(page_index + 1);
    // The last dropped page is kept for reuse (all its entries are kEmpty again): ids that rise
    // through the pages would otherwise allocate and free one at every page boundary.
    pages_[page_index] = spare_ != nullptr ? std::move(spare_) : std::unique_ptr<Page>(new Page);
    return pages_[page_index].get();
  }
  [[gnu::noinline]] void drop_page(std::size_t page_index) { spare_ = std::move(pages_[page_index]); }

  // ---- the hash table: every other id -------------------------------------------------------------
  // apply() for an id the paged table does not hold: the hash table's own lookups (and the
  // messages for an id in neither table). Out of line: rare on ordinary traces.
  [[gnu::noinline]] const char* apply_sparse(Op op, AllocId id, std::uint64_t requested) {
    switch (op) {
      case Op::Alloc: {
        Slot& s = find_or_insert(id);
        if (s.state != kEmpty) return "alloc of an id that is already live (duplicate live id)";
        s.state = kLive;
        s.requested = requested;
        ++size_;
        paged_bound_ += 2;
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
  std::size_t size_ = 0;  // live ids in the hash table
  std::uint64_t released_ = 0;
  std::vector<std::unique_ptr<Page>> pages_;  // by id >> kPageBits; null: nothing live there
  std::unique_ptr<Page> spare_;               // the last page dropped, all kEmpty
  std::size_t paged_size_ = 0;                // live ids in the pages
  std::uint64_t paged_bound_ = 1024;          // 1024 + twice the allocations seen
};

}  // namespace fraglab::detail
