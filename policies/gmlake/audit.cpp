// audit(): recomputes the invariants of allocator.hpp from scratch and throws std::logic_error on
// the first one broken. Run after every call with the self_check:true option (tests).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "gmlake/allocator.hpp"

namespace fraglab::gmlake {
namespace {

// The message is formatted only when the check fails: the audit runs after every event of a
// checked replay and visits every block, so formatting each passing check's text dominated it.
template <typename... Args>
void require(bool ok, fmt::format_string<Args...> what, Args&&... args) {
  if (!ok) throw std::logic_error("gmlake audit: " + fmt::format(what, std::forward<Args>(args)...));
}

}  // namespace

void Allocator::audit() const {
  std::size_t blocks = 0, free_blocks = 0;
  Bytes segment_bytes = 0;
  for (Id seg = 0; seg < segments_.size(); ++seg) {
    const Segment& s = segments_[seg];
    if (!s.live) continue;
    segment_bytes += s.size;
    Addr at = s.addr;
    Id prev = kNone;
    for (Id b = s.head; b != kNone; b = pblocks_[b].next) {
      const PBlock& p = pblocks_[b];
      ++blocks;
      require(p.live && p.segment == seg && p.prev == prev && p.addr == at && p.size > 0 && p.size % kPage == 0,
              "chain of segment 0x{:x} broken at block 0x{:x}", s.addr, p.addr);
      auto where = pblock_at_.find(p.addr);
      require(where != pblock_at_.end() && where->second == b, "pblock_at_ out of date");
      const bool listed = free_pblocks_.count(SizeKey{p.stream, p.size, p.addr, b}) == 1;
      require(listed == (p.use == Use::Free), "free set disagrees about block 0x{:x}", p.addr);
      if (p.use == Use::Free) {
        ++free_blocks;
        require(prev == kNone || pblocks_[prev].use != Use::Free, "two free neighbours not merged");
      }
      if (p.use == Use::Held) {
        require(p.holder < sblocks_.size() && sblocks_[p.holder].live && sblocks_[p.holder].state == SState::Live,
                "held block without a live holder");
      }
      at += p.size;
      prev = b;
    }
    require(at == s.addr + s.size, "chain does not tile its segment");
  }
  require(blocks == pblock_at_.size() && free_blocks == free_pblocks_.size(), "stray pBlocks");

  // How many pages of [from, from + size) are used (Allocated or Held): the pBlocks tiling the
  // range (the chains were checked above) are walked in address order, one lookup per piece
  // instead of one per page.
  auto used_pages = [this](Addr from, Bytes size) {
    std::uint64_t pages = 0;
    const Addr end = from + size;
    for (auto it = std::prev(pblock_at_.upper_bound(from)); from < end && it != pblock_at_.end(); ++it) {
      const PBlock& b = pblocks_[it->second];
      const Addr upto = std::min(end, std::max(from, b.addr + b.size));
      if (b.use != Use::Free) pages += (upto - from) / kPage;
      from = upto;
    }
    return pages;
  };
  std::size_t refs = 0, clean = 0, fragmented = 0;
  for (Id id = 0; id < sblocks_.size(); ++id) {
    const SBlock& s = sblocks_[id];
    if (!s.live) continue;
    std::uint64_t busy = 0;
    Bytes offset = 0;
    for (std::uint32_t i = 0; i < s.pieces.size(); ++i) {
      const Piece& p = s.pieces[i];
      require(p.offset == offset, "pieces do not tile their sBlock");
      offset += p.size;
      if (!p.mapped) continue;
      ++refs;
      const auto& list = segments_[p.segment].pieces;
      require(std::find(list.begin(), list.end(), std::pair<Id, std::uint32_t>{id, i}) != list.end(),
              "mapped piece missing from its segment");
      busy += used_pages(p.source, p.size);
    }
    require(offset == s.size, "pieces do not cover their sBlock");
    require(busy == s.busy_pages, "sBlock 0x{:x}: busy_pages {} but {} pages in use", s.addr, s.busy_pages, busy);
    const bool in_clean = clean_sblocks_.count(SizeKey{s.stream, s.size, s.addr, id}) == 1;
    const bool in_fragmented = fragmented_by_release_.count({s.released_at, id}) == 1;
    if (s.state == SState::Live) {
      require(!in_clean && !in_fragmented, "live sBlock in a cache set");
      Bytes held = 0;
      for (Id b : s.held) {
        require(pblocks_[b].use == Use::Held && pblocks_[b].holder == id, "held list out of date");
        held += pblocks_[b].size;
      }
      require(held == s.used, "a live sBlock holds other than its prefix");
    } else {
      require(s.held.empty() && !s.doomed, "cached sBlock holds blocks");
      require(in_clean == (s.state == SState::Clean) && in_fragmented == (s.state == SState::Fragmented),
              "cache sets disagree with the state");
      require((s.state == SState::Clean) == (busy == 0), "clean iff no page in use");
      ++(s.state == SState::Clean ? clean : fragmented);
    }
  }
  require(clean == clean_sblocks_.size() && clean == clean_by_release_.size() &&
              fragmented == fragmented_by_release_.size(),
          "stray entries in the sBlock sets");
  std::size_t listed = 0;
  for (const Segment& s : segments_) listed += s.live ? s.pieces.size() : 0;
  require(listed == refs, "segments list unmapped or foreign pieces");
  require(device_.reserved() == segment_bytes + static_cast<Bytes>(small_.stats().reserved_bytes.all().current),
          "device reserved != pBlock segments + small pool");
}

}  // namespace fraglab::gmlake
