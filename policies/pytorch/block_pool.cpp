// FreeBlockSet: the ordered free-block set of block_pool.hpp.
#include "pytorch/block_pool.hpp"

#include <algorithm>
#include <cassert>

namespace fraglab::cca {

std::size_t FreeBlockSet::chunk_for(const FreeKey& key) const {
  std::size_t lo = 0;
  std::size_t hi = chunks_.size();
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (key_less(chunks_[mid].back(), key)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

FreeBlockSet::Pos FreeBlockSet::lower_bound(const FreeKey& key) const {
  const std::size_t c = chunk_for(key);
  if (c == chunks_.size()) return end();
  const auto& chunk = chunks_[c];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), key, key_less);
  return Pos{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(it - chunk.begin())};
}

void FreeBlockSet::insert(const FreeEntry& entry) {
  const FreeKey key{entry.stream, entry.size, entry.addr};
  std::size_t c = chunk_for(key);
  if (chunks_.empty()) {
    chunks_.emplace_back().reserve(kMaxChunk);
    c = 0;
  } else if (c == chunks_.size()) {
    c = chunks_.size() - 1;  // larger than everything: append to the last chunk
  }
  auto& chunk = chunks_[c];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), key, key_less);
  chunk.insert(it, entry);
  ++size_;
  if (chunk.size() >= kMaxChunk) {
    std::vector<FreeEntry> upper;
    upper.reserve(kMaxChunk);
    upper.assign(chunk.begin() + kMaxChunk / 2, chunk.end());
    chunk.resize(kMaxChunk / 2);
    chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1, std::move(upper));
  }
}

void FreeBlockSet::erase(const FreeKey& key) {
  const Pos p = lower_bound(key);
  assert(!is_end(p) && at(p).addr == key.addr && at(p).size == key.size && at(p).stream == key.stream);
  erase(p);
}

void FreeBlockSet::erase(Pos p) {
  assert(!is_end(p) && p.index < chunks_[p.chunk].size());
  auto& chunk = chunks_[p.chunk];
  chunk.erase(chunk.begin() + p.index);
  --size_;
  if (chunk.empty()) chunks_.erase(chunks_.begin() + p.chunk);
}

}  // namespace fraglab::cca
