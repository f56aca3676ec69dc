// ChunkStore: see chunk_store.hpp for the packing rules and the invariants.
#include "gemini/chunk_store.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fraglab::gemini {

const char* tag_class_name(TagClass c) {
  switch (c) {
    case TagClass::Param:
      return "param";
    case TagClass::Grad:
      return "grad";
    case TagClass::Opt:
      return "opt";
  }
  return "?";
}

std::uint32_t ChunkStore::target(TagClass cls, Bytes size) const {
  const std::uint32_t open = open_[static_cast<std::size_t>(cls)];
  if (open != kNone && size <= chunks_[open].size - chunks_[open].used) return open;
  return kNewChunk;
}

Bytes ChunkStore::demand(TagClass cls, Bytes size) const {
  const std::uint32_t at = target(cls, size);
  if (at != kNewChunk) return chunks_[at].on_host ? chunks_[at].size : 0;
  const Bytes bytes = new_chunk_bytes(size);
  return cached_.lower_bound({bytes, 0}) != cached_.end() ? 0 : bytes;
}

std::optional<Block> ChunkStore::pack(TagClass cls, Bytes size, StreamId stream) {
  std::uint32_t& open = open_[static_cast<std::size_t>(cls)];
  if (open != kNone && size > chunks_[open].size - chunks_[open].used) {
    close(open);
    open = kNone;
  }
  if (open != kNone && chunks_[open].on_host && !fetch(open)) return std::nullopt;
  if (open == kNone) {
    std::optional<std::uint32_t> fresh = acquire(new_chunk_bytes(size));
    if (!fresh) return std::nullopt;
    open = *fresh;
    chunks_[open].cls = cls;
    chunks_[open].state = State::Open;
    ++opened_[static_cast<std::size_t>(cls)];
    if (size > chunk_size_) ++dedicated_chunks_;
  }
  Chunk& chunk = chunks_[open];
  const Addr addr = chunk.addr + chunk.used;
  chunk.used += size;
  ++chunk.live;
  chunk.tensors.push_back({addr, size, true});
  tensor_bytes_ += size;
  const std::uint64_t cookie = (std::uint64_t{open} << 32) | (chunk.tensors.size() - 1);
  return Block{addr, size, size, stream, cookie};
}

bool ChunkStore::owns(Addr addr) const {
  auto it = by_address_.upper_bound(addr);
  if (it == by_address_.begin()) return false;
  --it;
  return addr < it->first + chunks_[it->second].size;
}

bool ChunkStore::on_host_at(Addr addr) const {
  auto it = by_address_.upper_bound(addr);
  if (it == by_address_.begin()) return false;
  --it;
  return addr < it->first + chunks_[it->second].size && chunks_[it->second].on_host;
}

void ChunkStore::release(const Block& block) {
  const auto index = static_cast<std::uint32_t>(block.cookie >> 32);
  Chunk& chunk = chunks_[index];
  chunk.tensors[block.cookie & 0xffffffffu].live = false;
  --chunk.live;
  tensor_bytes_ -= block.size;
  if (chunk.live > 0) return;
  if (chunk.on_host) {
    // Nothing left to move back: the chunk's range is given back (see chunk_store.hpp).
    if (chunk.state == State::Open) open_[static_cast<std::size_t>(chunk.cls)] = kNone;
    release_chunk(index);
  } else if (chunk.state == State::Open) {
    reset(chunk);  // still the class's open chunk: fill it again from the start
  } else if (chunk.state == State::Closed) {
    cache(index);
  }
}

std::uint64_t ChunkStore::release_empty_chunks(bool open_too) {
  std::uint64_t released = 0;
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    Chunk& chunk = chunks_[it->second];
    const bool empty_open = open_too && chunk.state == State::Open && chunk.live == 0;
    if (chunk.state != State::Cached && !empty_open) {
      ++it;
      continue;
    }
    if (empty_open) open_[static_cast<std::size_t>(chunk.cls)] = kNone;
    const std::uint32_t index = it->second;
    ++it;
    release_chunk(index);
    ++released;
  }
  return released;
}

void ChunkStore::release_chunk(std::uint32_t index) {
  Chunk& chunk = chunks_[index];
  if (chunk.state == State::Cached) cached_.erase({chunk.size, chunk.addr});
  if (!offload_) {
    device_.free(chunk.addr);
  } else {
    if (!chunk.on_host) device_.unmap(chunk.addr, footprint(chunk.size));
    device_.release_range(chunk.addr);
  }
  (chunk.on_host ? host_bytes_ : chunk_bytes_) -= chunk.size;
  by_address_.erase(chunk.addr);
  reset(chunk);
  chunk.on_host = false;
  chunk.state = State::Released;
  released_entries_.push_back(index);
}

Bytes ChunkStore::tensor_bytes_on_host() const {
  Bytes bytes = 0;
  for (const Chunk& chunk : chunks_) {
    if (chunk.state == State::Released || !chunk.on_host) continue;
    for (const Tensor& t : chunk.tensors) bytes += t.live ? t.size : 0;
  }
  return bytes;
}

Bytes ChunkStore::footprint(Bytes size) const { return offload_ ? kit::align_up(size, device_.granularity()) : size; }

std::vector<std::uint32_t> ChunkStore::movable(std::uint32_t keep) const {
  std::vector<std::uint32_t> out;
  for (const auto& [addr, index] : by_address_) {
    const Chunk& c = chunks_[index];
    if (index != keep && !c.on_host && c.live > 0 && (c.state == State::Open || c.state == State::Closed))
      out.push_back(index);
  }
  return out;
}

void ChunkStore::evict(std::uint32_t index) {
  Chunk& chunk = chunks_[index];
  device_.unmap(chunk.addr, footprint(chunk.size));
  chunk.on_host = true;
  chunk_bytes_ -= chunk.size;
  host_bytes_ += chunk.size;
  host_bytes_peak_ = std::max(host_bytes_peak_, host_bytes_);
  to_host_ += chunk.size;
  ++evictions_;
}

bool ChunkStore::fetch(std::uint32_t index) {
  Chunk& chunk = chunks_[index];
  if (!device_.map(chunk.addr, footprint(chunk.size))) return false;
  chunk.on_host = false;
  host_bytes_ -= chunk.size;
  chunk_bytes_ += chunk.size;
  chunk_bytes_peak_ = std::max(chunk_bytes_peak_, chunk_bytes_);
  to_device_ += chunk.size;
  ++fetches_;
  return true;
}

std::optional<std::uint32_t> ChunkStore::acquire(Bytes size) {
  auto cached = cached_.lower_bound({size, 0});
  if (cached != cached_.end()) {
    const std::uint32_t index = by_address_.at(cached->second);
    cached_.erase(cached);
    ++chunk_reuses_;
    return index;
  }
  std::optional<Addr> addr;
  if (!offload_) {
    addr = device_.malloc(size);
  } else if ((addr = device_.reserve_range(footprint(size)))) {
    if (!device_.map(*addr, footprint(size))) {
      device_.release_range(*addr);
      addr.reset();
    }
  }
  if (!addr) return std::nullopt;
  std::uint32_t index = 0;
  if (!released_entries_.empty()) {
    index = released_entries_.back();
    released_entries_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(chunks_.size());
    chunks_.emplace_back();
  }
  Chunk& chunk = chunks_[index];
  chunk.addr = *addr;
  chunk.size = size;
  reset(chunk);
  by_address_.emplace(*addr, index);
  chunk_bytes_ += size;
  chunk_bytes_peak_ = std::max(chunk_bytes_peak_, chunk_bytes_);
  ++chunk_mallocs_;
  return index;
}

void ChunkStore::close(std::uint32_t index) {
  chunks_[index].state = State::Closed;
  if (chunks_[index].live == 0) cache(index);
}

void ChunkStore::cache(std::uint32_t index) {
  Chunk& chunk = chunks_[index];
  reset(chunk);
  chunk.state = State::Cached;
  cached_.emplace(chunk.size, chunk.addr);
}

void ChunkStore::reset(Chunk& chunk) {
  chunk.used = 0;
  chunk.live = 0;
  chunk.tensors.clear();
}

std::vector<std::pair<std::string, std::int64_t>> ChunkStore::stats() const {
  auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  std::vector<std::pair<std::string, std::int64_t>> out{
      {"chunk_size_bytes", i64(chunk_size_)},
      {"chunks", i64(by_address_.size())},
      {"chunks_cached", i64(cached_.size())},
      {"chunk_bytes", i64(chunk_bytes_)},
      {"chunk_bytes_peak", i64(chunk_bytes_peak_)},
      {"chunk_tensor_bytes", i64(tensor_bytes_)},
      {"chunk_idle_bytes", i64(chunk_bytes_ - tensor_bytes_)},
      {"chunk_mallocs", i64(chunk_mallocs_)},
      {"chunk_reuses", i64(chunk_reuses_)},
      {"dedicated_chunks", i64(dedicated_chunks_)},
  };
  if (offload_) {
    // Only where chunks may move, so the keys of the default placement stay as they were.
    out.insert(out.end(), {
                              {"chunk_host_bytes", i64(host_bytes_)},
                              {"chunk_host_bytes_peak", i64(host_bytes_peak_)},
                              {"chunk_evictions", i64(evictions_)},
                              {"chunk_fetches", i64(fetches_)},
                              {"device_to_host_bytes", i64(to_host_)},
                              {"host_to_device_bytes", i64(to_device_)},
                          });
  }
  return out;
}

std::vector<SegmentView> ChunkStore::segments() const {
  std::vector<SegmentView> out;
  out.reserve(by_address_.size());
  for (const auto& [addr, index] : by_address_) {
    const Chunk& chunk = chunks_[index];
    if (chunk.on_host) continue;  // no device memory
    const std::string pool = chunk.state == State::Cached ? std::string("gemini_cached")
                                                          : std::string("gemini_") + tag_class_name(chunk.cls);
    SegmentView view{addr, footprint(chunk.size), 0, pool, false, {}};
    Addr at = addr;  // end of the last piece listed
    for (const Tensor& t : chunk.tensors) {
      if (!t.live) continue;
      if (t.addr > at) view.blocks.push_back({at, t.addr - at, false});
      view.blocks.push_back({t.addr, t.size, true});
      at = t.addr + t.size;
    }
    if (at < addr + view.size) view.blocks.push_back({at, addr + view.size - at, false});
    out.push_back(std::move(view));
  }
  return out;
}

void ChunkStore::audit(kit::AuditLog& log) const {
  Bytes chunk_bytes = 0, host_bytes = 0, tensor_bytes = 0;
  std::size_t on_device = 0, cached = 0;
  for (std::uint32_t i = 0; i < chunks_.size(); ++i) {
    const Chunk& c = chunks_[i];
    if (c.state == State::Released) continue;
    ++on_device;
    (c.on_host ? host_bytes : chunk_bytes) += c.size;
    log.require(!c.on_host || (offload_ && c.live > 0 && (c.state == State::Open || c.state == State::Closed)),
                [&] { return fmt::format("chunk 0x{:x} on the host is empty, cached or not offloadable", c.addr); });
    const auto at = by_address_.find(c.addr);
    log.require(at != by_address_.end() && at->second == i && c.used <= c.size,
                [&] { return fmt::format("chunk 0x{:x} unindexed or overfilled", c.addr); });
    Addr fill = c.addr;
    std::uint64_t live = 0;
    for (const Tensor& t : c.tensors) {
      log.require(t.addr >= fill && t.addr + t.size <= c.addr + c.used,
                  [&] { return fmt::format("tensor 0x{:x} outside chunk 0x{:x} or out of order", t.addr, c.addr); });
      fill = t.addr + t.size;
      if (t.live) ++live, tensor_bytes += t.size;
    }
    const bool is_cached = c.state == State::Cached;
    cached += is_cached;
    log.require(
        live == c.live && (!is_cached || c.live == 0) && cached_.count({c.size, c.addr}) == (is_cached ? 1u : 0u),
        [&] { return fmt::format("chunk 0x{:x}: live count or cache entry wrong", c.addr); });
  }
  for (std::size_t k = 0; k < kTagClasses; ++k) {
    log.require(open_[k] == kNone || (open_[k] < chunks_.size() && chunks_[open_[k]].state == State::Open),
                [&] { return fmt::format("open chunk of class {} is not open", k); });
  }
  log.require(on_device == by_address_.size() && cached == cached_.size() && chunk_bytes == chunk_bytes_ &&
                  host_bytes == host_bytes_ && tensor_bytes == tensor_bytes_,
              [&] {
                return fmt::format("counters disagree with the chunks ({} vs {} bytes on device)", chunk_bytes_,
                                   chunk_bytes);
              });
}

}  // namespace fraglab::gemini
