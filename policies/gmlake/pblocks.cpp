// pBlocks: the segments of physical memory and the address-ordered chains of blocks carved from
// them (PyTorch's large pool as GMLake keeps it), plus mark_range(), which tells the sBlocks that
// alias a range when its pages become used or free. Invariants: allocator.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "gmlake/allocator.hpp"

namespace fraglab::gmlake {

Id Allocator::new_pblock() {
  Id id;
  if (!spare_pblocks_.empty()) {
    id = spare_pblocks_.back();
    spare_pblocks_.pop_back();
    pblocks_[id] = PBlock{};
  } else {
    id = static_cast<Id>(pblocks_.size());
    pblocks_.emplace_back();
  }
  pblocks_[id].live = true;
  return id;
}

// [realloc_block] A new segment: physical memory first (cuMemCreate of its PhyBlocks fails before
// any address space is taken), then a range with every page mapped. With vmm_defragment off it is
// a plain cudaMalloc. Returns its single Free (not yet inserted) block, or kNone when the device
// refuses.
Id Allocator::create_segment(Bytes size, StreamId stream) {
  Addr addr = 0;
  if (options_.vmm_defragment) {
    if (device_.free_memory() < size) return kNone;
    const std::optional<Addr> range = device_.reserve_range(size);
    if (!range) return kNone;
    if (!device_.map(*range, size)) {
      device_.release_range(*range);
      return kNone;
    }
    addr = *range;
  } else {
    const std::optional<Addr> range = device_.malloc(size);
    if (!range) return kNone;
    addr = *range;
  }
  Id seg;
  if (!spare_segments_.empty()) {
    seg = spare_segments_.back();
    spare_segments_.pop_back();
    segments_[seg] = Segment{};
  } else {
    seg = static_cast<Id>(segments_.size());
    segments_.emplace_back();
  }
  const Id block = new_pblock();
  PBlock& b = pblocks_[block];
  b.addr = addr;
  b.size = size;
  b.stream = stream;
  b.segment = seg;
  Segment& s = segments_[seg];
  s.addr = addr;
  s.size = size;
  s.stream = stream;
  s.head = block;
  s.vmm = options_.vmm_defragment;
  s.live = true;
  pblock_at_.emplace(addr, block);
  return block;
}

// [release_block] The segment is one Free block. Cached sBlocks that show its pages are torn down
// and live ones lose their (unused-tail) aliases of it before its pages go.
void Allocator::release_segment(Id seg) {
  while (!segments_[seg].pieces.empty()) {
    const auto [sblock, piece] = segments_[seg].pieces.back();
    if (sblocks_[sblock].state == SState::Live) {
      detach_piece(sblock, piece);
    } else {
      tear_down(sblock);
    }
  }
  Segment& s = segments_[seg];
  const Id block = s.head;
  erase_free(block);
  pblock_at_.erase(pblocks_[block].addr);
  pblocks_[block].live = false;
  spare_pblocks_.push_back(block);
  if (s.vmm) {
    device_.unmap(s.addr, s.size);
    device_.release_range(s.addr);
  } else {
    device_.free(s.addr);
  }
  s.live = false;
  spare_segments_.push_back(seg);
}

Id Allocator::split_tail(Id block, Bytes keep) {
  const Id tail = new_pblock();  // may reallocate pblocks_: no references held across it
  PBlock& b = pblocks_[block];
  PBlock& t = pblocks_[tail];
  t.addr = b.addr + keep;
  t.size = b.size - keep;
  t.stream = b.stream;
  t.segment = b.segment;
  t.use = b.use;
  t.prev = block;
  t.next = b.next;
  if (b.next != kNone) pblocks_[b.next].prev = tail;
  b.next = tail;
  b.size = keep;
  pblock_at_.emplace(t.addr, tail);
  return tail;
}

Id Allocator::carve(Addr addr, Bytes size) {
  auto at = pblock_at_.upper_bound(addr);
  Id block = std::prev(at)->second;
  {
    const PBlock& b = pblocks_[block];
    if (b.use != Use::Free || addr + size > b.addr + b.size) {
      throw std::logic_error(fmt::format("gmlake: pages [0x{:x}, +{}) of a clean sBlock are not free", addr, size));
    }
  }
  erase_free(block);
  if (pblocks_[block].addr < addr) {
    const Id rest = split_tail(block, addr - pblocks_[block].addr);
    insert_free(block);
    block = rest;
  }
  if (pblocks_[block].size > size) insert_free(split_tail(block, size));
  return block;
}

void Allocator::insert_free(Id block) {
  const PBlock& b = pblocks_[block];
  free_pblocks_.insert(SizeKey{b.stream, b.size, b.addr, block});
}

void Allocator::erase_free(Id block) {
  const PBlock& b = pblocks_[block];
  free_pblocks_.erase(SizeKey{b.stream, b.size, b.addr, block});
}

// [free_block / try_merge_blocks] The left block of a merge absorbs the right one.
void Allocator::make_free(Id block) {
  auto absorb = [this](Id left, Id right) {
    PBlock& l = pblocks_[left];
    PBlock& r = pblocks_[right];
    l.size += r.size;
    l.next = r.next;
    if (r.next != kNone) pblocks_[r.next].prev = left;
    pblock_at_.erase(r.addr);
    r.live = false;
    spare_pblocks_.push_back(right);
  };
  PBlock& b = pblocks_[block];
  b.use = Use::Free;
  b.pending = false;
  b.holder = kNone;
  const Id next = b.next;
  if (next != kNone && pblocks_[next].use == Use::Free) {
    erase_free(next);
    absorb(block, next);
  }
  const Id prev = pblocks_[block].prev;
  if (prev != kNone && pblocks_[prev].use == Use::Free) {
    erase_free(prev);
    absorb(prev, block);
    block = prev;
  }
  insert_free(block);
}

// [malloc: should_split] The block (not in the free set) serves r: split when 2 MiB or more
// would be left over, the rest stays Free.
Block Allocator::hand_out_pblock(Id block, const Request& r) {
  if (pblocks_[block].size > r.rounded) insert_free(split_tail(block, r.rounded));
  PBlock& b = pblocks_[block];
  b.use = Use::Allocated;
  b.requested = r.requested;
  b.serial = ++serial_;
  mark_range(b.segment, b.addr, b.size, true);
  return Block{b.addr, b.size, r.requested, r.stream, cookie(Handle::PBlock, block, b.serial)};
}

// [PhyBlock::free, VmmSegment::free_blocks] Pages [addr, + size) of a segment became used (or
// free): every sBlock with an alias of them counts them, and a cached one turns fragmented (or
// clean again).
void Allocator::mark_range(Id seg, Addr addr, Bytes size, bool used) {
  for (const auto& [sblock, index] : segments_[seg].pieces) {
    SBlock& s = sblocks_[sblock];
    const Piece& p = s.pieces[index];
    const Addr lo = std::max(p.source, addr);
    const Addr hi = std::min(p.source + p.size, addr + size);
    if (lo >= hi) continue;
    const std::uint64_t pages = (hi - lo) / kPage;
    if (used) {
      if (s.state == SState::Clean) set_state(sblock, SState::Fragmented);
      s.busy_pages += pages;
    } else {
      s.busy_pages -= pages;
      if (s.state == SState::Fragmented && s.busy_pages == 0) set_state(sblock, SState::Clean);
    }
  }
}

}  // namespace fraglab::gmlake
