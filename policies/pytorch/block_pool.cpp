// StreamBlocks and FreeBlockSet: the ordered free-block sets of block_pool.hpp.
#include "pytorch/block_pool.hpp"

#include <algorithm>
#include <cassert>

namespace fraglab::cca {

std::uint32_t StreamBlocks::new_slot() {
  if (!free_slots_.empty()) {
    const std::uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  slots_.emplace_back();
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

// The tail moves are a few entries: plain loops beat a call to memmove, which GCC would
// otherwise turn them into.
#define FRAGLAB_NO_MEMMOVE __attribute__((optimize("no-tree-loop-distribute-patterns")))

FRAGLAB_NO_MEMMOVE void StreamBlocks::insert(SizeAddr key, NodeId id) {
  ++size_;
  if (last_.empty()) {
    const std::uint32_t s = new_slot();
    Chunk& ch = slots_[s];
    ch.keys[0] = key;
    ch.ids[0] = id;
    ch.n = 1;
    order_.push_back(s);
    last_.push_back(key);
    return;
  }
  std::uint32_t c = chunk_for(key);
  if (c == last_.size()) c = c - 1;  // larger than everything: append to the last chunk
  Chunk& ch = chunk(c);
  const std::uint32_t i = index_in(ch, key);
  for (std::uint32_t k = ch.n; k > i; --k) {
    ch.keys[k] = ch.keys[k - 1];
    ch.ids[k] = ch.ids[k - 1];
  }
  ch.keys[i] = key;
  ch.ids[i] = id;
  if (i == ch.n) last_[c] = key;  // the chunk's new last key
  if (++ch.n < kMaxChunk) return;

  // Full: the upper half moves to a new chunk right after this one.
  const std::uint32_t s = new_slot();  // may move slots_: index again below
  Chunk& lower = chunk(c);
  Chunk& upper = slots_[s];
  constexpr std::uint32_t kHalf = kMaxChunk / 2;
  std::copy(lower.keys + kHalf, lower.keys + kMaxChunk, upper.keys);
  std::copy(lower.ids + kHalf, lower.ids + kMaxChunk, upper.ids);
  upper.n = kMaxChunk - kHalf;
  lower.n = kHalf;
  last_[c] = lower.keys[kHalf - 1];
  order_.insert(order_.begin() + c + 1, s);
  last_.insert(last_.begin() + c + 1, upper.keys[upper.n - 1]);
}

FRAGLAB_NO_MEMMOVE void StreamBlocks::erase(Pos p) {
  assert(!is_end(p) && p.index < chunk(p.chunk).n);
  --size_;
  Chunk& ch = chunk(p.chunk);
  const std::uint32_t n = --ch.n;
  if (n == 0) {
    free_slots_.push_back(order_[p.chunk]);
    order_.erase(order_.begin() + p.chunk);
    last_.erase(last_.begin() + p.chunk);
    return;
  }
  for (std::uint32_t k = p.index; k < n; ++k) {
    ch.keys[k] = ch.keys[k + 1];
    ch.ids[k] = ch.ids[k + 1];
  }
  if (p.index == n) last_[p.chunk] = ch.keys[n - 1];
}

void StreamBlocks::erase(SizeAddr key) {
  const Pos p = lower_bound(key);
  assert(!is_end(p) && chunk(p.chunk).keys[p.index] == key);
  erase(p);
}

void StreamBlocks::copy_to(StreamId stream, std::vector<FreeEntry>& out) const {
  for (const std::uint32_t s : order_) {
    const Chunk& ch = slots_[s];
    for (std::uint32_t i = 0; i < ch.n; ++i) {
      out.push_back(FreeEntry{stream, static_cast<Bytes>(ch.keys[i] >> 64), static_cast<Addr>(ch.keys[i]), ch.ids[i]});
    }
  }
}

StreamBlocks& FreeBlockSet::of(StreamId stream) {
  const auto at = std::lower_bound(streams_.begin(), streams_.end(), stream,
                                   [](const auto& entry, StreamId s) { return entry.first < s; });
  return streams_.emplace(at, stream, StreamBlocks{})->second;
}

NodeId FreeBlockSet::id_of(const FreeKey& key) const {
  const StreamBlocks* blocks = find(key.stream);
  if (blocks == nullptr) return kNil;
  const SizeAddr k = size_addr(key.size, key.addr);
  const StreamBlocks::Pos p = blocks->lower_bound(k);
  if (blocks->is_end(p) || blocks->size_at(p) != key.size || blocks->addr_at(p) != key.addr) return kNil;
  return blocks->id_at(p);
}

}  // namespace fraglab::cca
