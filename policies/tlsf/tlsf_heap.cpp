// TlsfHeap: see tlsf_heap.hpp for the structure and its invariants.
#include "tlsf/tlsf_heap.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include <fmt/format.h>

namespace fraglab::tlsf {

TlsfHeap::TlsfHeap(unsigned sl_bits) : sl_bits_(sl_bits), heads_(std::size_t{kFirstLevels} << sl_bits, kNil) {
  if (sl_bits > kMaxSlBits) throw std::logic_error("TlsfHeap: sl_bits above kMaxSlBits");
}

TlsfHeap::Index TlsfHeap::add_pool(Addr base, Bytes size) {
  const Index index = new_record();
  blocks_[index] = BlockRecord{base, size, kNil, kNil, kNil, kNil, false};
  pools_.emplace(base, Pool{size, index});
  insert_free(index);
  return index;
}

TlsfHeap::Index TlsfHeap::allocate(Bytes size) {
  if (size >= (Bytes{1} << 62)) return kNil;  // larger than any class
  const Index found = find_suitable(class_for_request(size, sl_bits_));
  return found == kNil ? kNil : take(found, size);
}

TlsfHeap::Index TlsfHeap::take(Index index, Bytes size) {
  remove_free(index);
  BlockRecord& b = blocks_[index];
  b.free = false;
  if (b.size > size) {
    const Index rest = new_record();
    BlockRecord& r = blocks_[rest];  // blocks_ may have grown: take references afterwards
    BlockRecord& low = blocks_[index];
    r = BlockRecord{low.addr + size, low.size - size, index, low.next_phys, kNil, kNil, false};
    if (low.next_phys != kNil) blocks_[low.next_phys].prev_phys = rest;
    low.next_phys = rest;
    low.size = size;
    insert_free(rest);
    ++splits_;
  }
  return index;
}

// `left` absorbs its physical successor (already taken off its free list).
void TlsfHeap::absorb_next(Index left) {
  const Index right = blocks_[left].next_phys;
  BlockRecord& b = blocks_[left];
  b.size += blocks_[right].size;
  b.next_phys = blocks_[right].next_phys;
  if (b.next_phys != kNil) blocks_[b.next_phys].prev_phys = left;
  drop_record(right);
  ++merges_;
}

void TlsfHeap::free(Index index) {
  blocks_[index].free = true;
  // Merge with the next neighbour first: this record absorbs it.
  const Index next = blocks_[index].next_phys;
  if (next != kNil && blocks_[next].free) {
    remove_free(next);
    absorb_next(index);
  }
  // Then with the previous one, which absorbs this record.
  const Index prev = blocks_[index].prev_phys;
  if (prev != kNil && blocks_[prev].free) {
    remove_free(prev);
    absorb_next(prev);
    index = prev;
  }
  insert_free(index);
}

std::vector<Addr> TlsfHeap::wholly_free_pools() const {
  std::vector<Addr> out;
  for (const auto& [base, pool] : pools_) {
    const BlockRecord& first = blocks_[pool.first];
    if (first.free && first.next_phys == kNil) out.push_back(base);
  }
  return out;
}

void TlsfHeap::remove_pool(Addr base) {
  auto it = pools_.find(base);
  const Index first = it->second.first;
  if (!blocks_[first].free || blocks_[first].next_phys != kNil) {
    throw std::logic_error("TlsfHeap: remove_pool of a pool that is not wholly free");
  }
  remove_free(first);
  drop_record(first);
  pools_.erase(it);
}

Bytes TlsfHeap::largest_free_block() const {
  if (fl_bitmap_ == 0) return 0;
  // Only the highest non-empty first level can hold the largest block; walk its lists.
  const unsigned fl = 63 - static_cast<unsigned>(std::countl_zero(fl_bitmap_));
  Bytes largest = 0;
  for (unsigned sl = 0; sl < (1u << sl_bits_); ++sl) {
    for (Index i = heads_[list_of({fl, sl})]; i != kNil; i = blocks_[i].next_free) {
      largest = std::max(largest, blocks_[i].size);
    }
  }
  return largest;
}

TlsfHeap::Index TlsfHeap::find_suitable(SizeClass c) const {
  std::uint64_t sl_map = sl_bitmap_[c.fl] & (~std::uint64_t{0} << c.sl);
  unsigned fl = c.fl;
  if (sl_map == 0) {
    if (c.fl + 1 >= kFirstLevels) return kNil;
    const std::uint64_t fl_map = fl_bitmap_ & (~std::uint64_t{0} << (c.fl + 1));
    if (fl_map == 0) return kNil;
    fl = static_cast<unsigned>(std::countr_zero(fl_map));
    sl_map = sl_bitmap_[fl];
  }
  const unsigned sl = static_cast<unsigned>(std::countr_zero(sl_map));
  return heads_[list_of({fl, sl})];
}

void TlsfHeap::insert_free(Index index) {
  BlockRecord& b = blocks_[index];
  const SizeClass c = class_of(b.size, sl_bits_);
  Index& head = heads_[list_of(c)];
  b.free = true;
  b.prev_free = kNil;
  b.next_free = head;
  if (head != kNil) blocks_[head].prev_free = index;
  head = index;
  sl_bitmap_[c.fl] |= std::uint64_t{1} << c.sl;
  fl_bitmap_ |= std::uint64_t{1} << c.fl;
  free_bytes_ += b.size;
  ++free_blocks_;
}

void TlsfHeap::remove_free(Index index) {
  BlockRecord& b = blocks_[index];
  const SizeClass c = class_of(b.size, sl_bits_);
  Index& head = heads_[list_of(c)];
  if (b.prev_free != kNil)
    blocks_[b.prev_free].next_free = b.next_free;
  else
    head = b.next_free;
  if (b.next_free != kNil) blocks_[b.next_free].prev_free = b.prev_free;
  b.prev_free = b.next_free = kNil;
  if (head == kNil) {
    sl_bitmap_[c.fl] &= ~(std::uint64_t{1} << c.sl);
    if (sl_bitmap_[c.fl] == 0) fl_bitmap_ &= ~(std::uint64_t{1} << c.fl);
  }
  free_bytes_ -= b.size;
  --free_blocks_;
}

TlsfHeap::Index TlsfHeap::new_record() {
  if (!spare_records_.empty()) {
    const Index index = spare_records_.back();
    spare_records_.pop_back();
    return index;
  }
  blocks_.emplace_back();
  return static_cast<Index>(blocks_.size() - 1);
}

void TlsfHeap::drop_record(Index index) {
  blocks_[index] = BlockRecord{};
  spare_records_.push_back(index);
}

void TlsfHeap::audit(kit::AuditLog& log) const {
  const std::size_t bound = blocks_.size();  // a corrupt chain or list may loop: walk no further
  std::uint64_t free_seen = 0;
  Bytes free_bytes_seen = 0;
  for (const auto& [base, pool] : pools_) {
    Addr at = base;
    Index prev = kNil;
    std::size_t steps = 0;
    for (Index i = pool.first; i != kNil && steps < bound; i = blocks_[i].next_phys, ++steps) {
      const BlockRecord& b = blocks_[i];
      log.require(b.addr == at && b.prev_phys == prev && b.size > 0,
                  [&] { return fmt::format("pool 0x{:x}: chain broken at block 0x{:x}", base, b.addr); });
      log.require(!b.free || prev == kNil || !blocks_[prev].free,
                  [&] { return fmt::format("free neighbours not merged at 0x{:x}", b.addr); });
      if (b.free) ++free_seen, free_bytes_seen += b.size;
      at = b.addr + b.size;
      prev = i;
    }
    log.require(at == base + pool.size, [&] { return fmt::format("pool 0x{:x}: blocks do not tile it", base); });
  }
  log.require(free_seen == free_blocks_ && free_bytes_seen == free_bytes_, [&] {
    return fmt::format("counters say {} free blocks of {} bytes, the pools hold {} of {}", free_blocks_, free_bytes_,
                       free_seen, free_bytes_seen);
  });
  std::uint64_t listed = 0;
  for (std::size_t list = 0; list < heads_.size(); ++list) {
    const SizeClass c{static_cast<unsigned>(list >> sl_bits_), static_cast<unsigned>(list & ((1u << sl_bits_) - 1))};
    const bool bit = ((sl_bitmap_[c.fl] >> c.sl) & 1) != 0 && ((fl_bitmap_ >> c.fl) & 1) != 0;
    log.require(bit == (heads_[list] != kNil), [&] { return fmt::format("bitmap wrong for class {}/{}", c.fl, c.sl); });
    Index prev = kNil;
    std::size_t steps = 0;
    for (Index i = heads_[list]; i != kNil && steps <= bound; i = blocks_[i].next_free, ++steps, ++listed) {
      const BlockRecord& b = blocks_[i];
      log.require(b.free && b.prev_free == prev && class_of(b.size, sl_bits_) == c,
                  [&] { return fmt::format("free list {}/{} holds block 0x{:x} wrongly", c.fl, c.sl, b.addr); });
      prev = i;
    }
  }
  log.require(listed == free_seen,
              [&] { return fmt::format("free lists hold {} blocks, the pools {} free ones", listed, free_seen); });
}

}  // namespace fraglab::tlsf
