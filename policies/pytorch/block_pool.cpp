// StreamBlocks and FreeBlockSet: the ordered free-block sets of block_pool.hpp.
#include "pytorch/block_pool.hpp"

#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>

namespace fraglab::cca {

void StreamBlocks::Class::grow() {  // a full class (insert() hands an empty one its first buffer)
  assert(cap_ > 0);
  const std::uint32_t cap = 2 * cap_;
  auto* bigger = new Entry[cap];
  for (std::uint32_t k = 0; k < n_; ++k) bigger[k] = (*this)[k];
  if (cap_ > kFirstCapacity) delete[] buf_;
  buf_ = bigger;
  head_ = 0;
  mask_ = cap - 1;
  cap_ = cap;
}

StreamBlocks::Entry* StreamBlocks::first_buffer() {
  constexpr std::size_t kChunkSlots = 32 * Class::kFirstCapacity;
  if (first_next_ == first_end_) {
    first_chunks_.push_back(std::make_unique_for_overwrite<Entry[]>(kChunkSlots));
    first_next_ = first_chunks_.back().get();
    first_end_ = first_next_ + kChunkSlots;
  }
  return std::exchange(first_next_, first_next_ + Class::kFirstCapacity);
}

void StreamBlocks::Class::insert_slow(std::uint32_t i, const Entry& e) {
  if (n_ == cap_) grow();  // full
  Class& self = *this;
  if (i < n_ - i) {  // the front is shorter: it moves one slot down
    head_ = (head_ - 1) & mask_;
    for (std::uint32_t k = 0; k < i; ++k) self[k] = self[k + 1];
  } else {
    for (std::uint32_t k = n_; k > i; --k) self[k] = self[k - 1];
  }
  self[i] = e;
  ++n_;
}

void StreamBlocks::Class::erase_slow(std::uint32_t i) {
  Class& self = *this;
  if (i < n_ - 1 - i) {  // the front is shorter: it moves one slot up
    for (std::uint32_t k = i; k > 0; --k) self[k] = self[k - 1];
    head_ = (head_ + 1) & mask_;
  } else {
    for (std::uint32_t k = i; k + 1 < n_; ++k) self[k] = self[k + 1];
  }
  --n_;
}

std::size_t StreamBlocks::size() const {
  std::size_t n = 0;  // the non-empty classes only: a checked replay audits after every event
  for (std::uint32_t c = next_nonempty(0); c < kClasses; c = next_nonempty(c + 1)) n += classes_[c].size();
  return n;
}

void StreamBlocks::copy_to(StreamId stream, std::vector<FreeEntry>& out) const {
  for (Pos p = begin(); !is_end(p); p = next(p)) {
    out.push_back(FreeEntry{stream, size_at(p), addr_at(p), id_at(p)});
  }
}

StreamBlocks& FreeBlockSet::of(StreamId stream) {
  const auto at = std::lower_bound(streams_.begin(), streams_.end(), stream,
                                   [](const auto& entry, StreamId s) { return entry.first < s; });
  StreamBlocks& added = streams_.emplace(at, stream, StreamBlocks{})->second;
  first_stream_ = streams_.front().first;  // the insert may have moved every entry
  first_blocks_ = &streams_.front().second;
  return added;
}

}  // namespace fraglab::cca
