// sBlocks: stitching free pBlocks into one virtual range [get_fused_fragmented_blocks], reusing a
// cached sBlock [get_free_block, fused branch], freeing one [update_block], tearing them down
// [release_block, garbage_collect_fused_blocks]. Invariants: allocator.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "gmlake/allocator.hpp"

namespace fraglab::gmlake {

Id Allocator::new_sblock() {
  Id id;
  if (!spare_sblocks_.empty()) {
    id = spare_sblocks_.back();
    spare_sblocks_.pop_back();
    sblocks_[id] = SBlock{};
  } else {
    id = static_cast<Id>(sblocks_.size());
    sblocks_.emplace_back();
  }
  sblocks_[id].live = true;
  return id;
}

// Moves a cached sBlock between the clean and fragmented sets (or out of both when it goes Live).
void Allocator::set_state(Id id, SState state) {
  SBlock& s = sblocks_[id];
  if (s.state == SState::Clean) {
    clean_sblocks_.erase(SizeKey{s.stream, s.size, s.addr, id});
    clean_by_release_.erase({s.released_at, id});
  } else if (s.state == SState::Fragmented) {
    fragmented_by_release_.erase({s.released_at, id});
  }
  s.state = state;
  if (state == SState::Clean) {
    clean_sblocks_.insert(SizeKey{s.stream, s.size, s.addr, id});
    clean_by_release_.insert({s.released_at, id});
  } else if (state == SState::Fragmented) {
    fragmented_by_release_.insert({s.released_at, id});
  }
}

// [get_fused_fragmented_blocks: vmmDefragment, defragment_level, fragment_limit]
bool Allocator::may_stitch(const Request& r, int time) const {
  return options_.vmm_defragment && time >= options_.defrag_level && r.rounded >= options_.frag_limit;
}

std::optional<Block> Allocator::stitch(const Request& r, int time) {
  if (!may_stitch(r, time)) return std::nullopt;
  const auto first = free_pblocks_.lower_bound(SizeKey{r.stream, 0, 0, 0});
  const auto end = free_pblocks_.upper_bound(
      SizeKey{r.stream, std::numeric_limits<Bytes>::max(), std::numeric_limits<Addr>::max(), kNone});
  // At least two free blocks on the stream (one alone would have been found by the best fit).
  if (first == end || std::next(first) == end) return std::nullopt;
  // Largest first; among equal sizes the higher address first (a backward walk of the set).
  scratch_.clear();
  Bytes total = 0;
  for (auto it = end; it != first && total < r.rounded;) {
    --it;
    scratch_.push_back(it->id);
    total += it->size;
  }
  if (total < r.rounded) return std::nullopt;  // reAlloc off: no stitch from too little
  const std::optional<Addr> range = device_.reserve_range(r.rounded);
  if (!range) return std::nullopt;

  for (Id b : scratch_) erase_free(b);
  // The smallest block taken gives only what is missing; its tail stays free (its neighbours are
  // the kept part and a non-free block, so nothing merges).
  if (total > r.rounded) {
    const Id last = scratch_.back();
    insert_free(split_tail(last, pblocks_[last].size - (total - r.rounded)));
  }

  const Id id = new_sblock();
  {
    SBlock& s = sblocks_[id];
    s.addr = *range;
    s.size = r.rounded;
    s.stream = r.stream;
    s.state = SState::Live;
  }
  Bytes offset = 0;
  for (Id b : scratch_) {
    PBlock& p = pblocks_[b];
    device_.map_alias(*range + offset, p.size, p.addr);
    SBlock& s = sblocks_[id];
    segments_[p.segment].pieces.emplace_back(id, static_cast<std::uint32_t>(s.pieces.size()));
    s.pieces.push_back(Piece{offset, p.addr, p.size, p.segment, true});
    s.held.push_back(b);
    p.use = Use::Held;
    p.holder = id;
    offset += p.size;
  }
  for (Id b : scratch_) mark_range(pblocks_[b].segment, pblocks_[b].addr, pblocks_[b].size, true);

  SBlock& s = sblocks_[id];
  s.used = r.rounded;
  s.requested = r.requested;
  s.serial = ++serial_;
  ++stitches_;
  stitched_bytes_ += r.rounded;
  fused_bytes_ += r.rounded;
  const Block block{s.addr, r.rounded, r.requested, r.stream, cookie(Handle::SBlock, id, s.serial)};
  if (fused_bytes_ > options_.auto_gc_gib * GiB) collect_garbage();  // [auto_gc_limits]
  return block;
}

// [get_free_block, fused branch] Best-fit clean sBlock of the stream, unless it is more than
// reuse_limit times the request. Its first pages are taken back out of the free pBlocks.
std::optional<Block> Allocator::reuse_cached_sblock(const Request& r) {
  if (!options_.vmm_defragment) return std::nullopt;
  const auto it = clean_sblocks_.lower_bound(SizeKey{r.stream, r.rounded, 0, 0});
  if (it == clean_sblocks_.end() || it->stream != r.stream) return std::nullopt;
  if (static_cast<double>(it->size) > static_cast<double>(r.rounded) * options_.reuse_limit) return std::nullopt;
  const Id id = it->id;
  set_state(id, SState::Live);
  for (std::uint32_t i = 0; i < sblocks_[id].pieces.size(); ++i) {
    const Piece p = sblocks_[id].pieces[i];
    if (p.offset >= r.rounded) break;
    const Id b = carve(p.source, std::min(p.size, r.rounded - p.offset));
    pblocks_[b].use = Use::Held;
    pblocks_[b].holder = id;
    sblocks_[id].held.push_back(b);
  }
  for (Id b : sblocks_[id].held) mark_range(pblocks_[b].segment, pblocks_[b].addr, pblocks_[b].size, true);
  SBlock& s = sblocks_[id];
  s.used = r.rounded;
  s.requested = r.requested;
  s.serial = ++serial_;
  ++sblock_reuses_;
  return Block{s.addr, r.rounded, r.requested, r.stream, cookie(Handle::SBlock, id, s.serial)};
}

// [update_block, fused] The pages it held return to the pBlocks (merging); the sBlock stays
// mapped and is cached clean, or fragmented when another block uses one of its tail pages.
void Allocator::free_sblock(Id id) {
  scratch_.assign(sblocks_[id].held.begin(), sblocks_[id].held.end());
  sblocks_[id].held.clear();
  for (Id b : scratch_) mark_range(pblocks_[b].segment, pblocks_[b].addr, pblocks_[b].size, false);
  for (Id b : scratch_) make_free(b);
  SBlock& s = sblocks_[id];
  s.used = 0;
  s.pending = false;
  if (s.doomed) {  // [active_fused_blocks_to_gc]
    tear_down(id);
    return;
  }
  s.released_at = ++release_clock_;
  set_state(id, s.busy_pages == 0 ? SState::Clean : SState::Fragmented);
}

// A cached (or doomed, just freed) sBlock: its aliases and its range go.
void Allocator::tear_down(Id id) {
  SBlock& s = sblocks_[id];
  for (std::uint32_t i = 0; i < s.pieces.size(); ++i) {
    const Piece& p = s.pieces[i];
    if (!p.mapped) continue;
    device_.unmap_alias(s.addr + p.offset, p.size);
    auto& refs = segments_[p.segment].pieces;
    refs.erase(std::find(refs.begin(), refs.end(), std::pair<Id, std::uint32_t>{id, i}));
  }
  device_.release_range(s.addr);
  set_state(id, SState::Live);  // out of the cache sets
  s.live = false;
  spare_sblocks_.push_back(id);
  ++teardowns_;
}

// [release_block, active fused block] A live sBlock loses the alias of a segment being released;
// only its unused tail can show a wholly free segment.
void Allocator::detach_piece(Id id, std::uint32_t index) {
  SBlock& s = sblocks_[id];
  Piece& p = s.pieces[index];
  if (p.offset < s.used) throw std::logic_error("gmlake: releasing pages a live sBlock uses");
  device_.unmap_alias(s.addr + p.offset, p.size);
  p.mapped = false;
  s.doomed = true;
  auto& refs = segments_[p.segment].pieces;
  refs.erase(std::find(refs.begin(), refs.end(), std::pair<Id, std::uint32_t>{id, index}));
}

// [garbage_collect_fused_blocks(2, 0)] Every cached sBlock: fragmented ones, then clean ones,
// each in release order. The pBlocks (the memory) stay.
void Allocator::collect_garbage() {
  ++gc_runs_;
  for (auto* set : {&fragmented_by_release_, &clean_by_release_}) {
    while (!set->empty()) {
      const Id id = set->begin()->second;
      fused_bytes_ -= sblocks_[id].size;
      tear_down(id);
    }
  }
}

}  // namespace fraglab::gmlake
