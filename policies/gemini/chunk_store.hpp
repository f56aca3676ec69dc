// ChunkStore: the chunks of the gemini policy — fixed-size device allocations that tagged tensors
// are packed into, one open chunk per tag class, as Gemini's ChunkManager.register_tensor does
// (hpcaitech/ColossalAI colossalai/zero/gemini/chunk/manager.py and chunk.py).
//
// Behaviour (Gemini's, except where marked as ours):
//  - a tensor is appended at the fill point of its class's open chunk, with no padding
//    (Chunk.append_tensor: utilized_size += numel);
//  - a tensor that does not fit closes the open chunk and opens a new one; a tensor larger than
//    the chunk size gets a chunk of exactly its size (register_tensor: chunk_size = numel), which
//    becomes the open chunk;
//  - ours: Gemini's chunks live as long as the model; a trace also frees tagged tensors
//    (gathered copies, optimizer temporaries), so a closed chunk whose tensors are all freed is
//    recycled: kept on the device, cached, and reused for the next new chunk that fits in it
//    (smallest cached chunk first, lowest address on ties). An open chunk whose tensors are all
//    freed starts filling again from its beginning.
//  - ours: every class uses the same chunk size in bytes (Gemini's fp32 chunks hold the same
//    number of elements as the fp16 ones, i.e. twice the bytes).
//
// Invariants:
//  - by_address_ holds every chunk allocated on the device (open, closed or cached), by address;
//  - a chunk's live tensors lie in [addr, addr + used) and never overlap; live = their count;
//  - a cached chunk has no live tensors and is in cached_ (size, addr); no other chunk is;
//  - open_[class] is the chunk of that class tensors are appended to, or none.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/policy_kit.hpp"

namespace fraglab::gemini {

enum class TagClass : std::uint8_t { Param, Grad, Opt };
inline constexpr std::size_t kTagClasses = 3;
const char* tag_class_name(TagClass c);

class ChunkStore {
 public:
  ChunkStore(Device& device, Bytes chunk_size) : device_(device), chunk_size_(chunk_size) {}

  // Packs a tensor of `size` (> 0) bytes. nullopt when the device refuses a new chunk; the
  // class's open chunk is closed then (as Gemini closes it before opening the next).
  std::optional<Block> pack(TagClass cls, Bytes size, StreamId stream);
  // True when `addr` lies in one of the chunks (so the block is a chunk tensor).
  bool owns(Addr addr) const;
  // The tensor's free completed.
  void release(const Block& block);
  // Frees every chunk without live tensors on the device (cached ones and empty open ones).
  // Returns how many.
  std::uint64_t release_empty_chunks();

  Bytes chunk_size() const { return chunk_size_; }
  Bytes bytes_on_device() const { return chunk_bytes_; }
  // The bytes of a new chunk a tensor of `size` bytes needs.
  Bytes new_chunk_bytes(Bytes size) const { return std::max(chunk_size_, size); }
  std::vector<std::pair<std::string, std::int64_t>> stats() const;
  std::vector<SegmentView> segments() const;  // address order
  // Checks the invariants above, and that the byte counters match the chunks.
  void audit(kit::AuditLog& log) const;

 private:
  enum class State : std::uint8_t { Open, Closed, Cached, Released };
  struct Tensor {
    Addr addr;
    Bytes size;
    bool live;
  };
  struct Chunk {
    Addr addr = 0;
    Bytes size = 0;
    Bytes used = 0;          // fill point, from addr
    std::uint64_t live = 0;  // live tensors
    TagClass cls = TagClass::Param;
    State state = State::Released;
    std::vector<Tensor> tensors;  // in fill order; a freed one stays, marked dead, until a reset
  };
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};

  // A chunk of at least `size` bytes: a cached one, or a new device allocation.
  std::optional<std::uint32_t> acquire(Bytes size);
  void close(std::uint32_t index);
  void cache(std::uint32_t index);
  void reset(Chunk& chunk);

  Device& device_;
  const Bytes chunk_size_;
  std::vector<Chunk> chunks_;  // Block::cookie's high half indexes it; released entries are reused
  std::vector<std::uint32_t> released_entries_;
  std::map<Addr, std::uint32_t> by_address_;
  std::set<std::pair<Bytes, Addr>> cached_;
  std::array<std::uint32_t, kTagClasses> open_{kNone, kNone, kNone};
  // Statistics.
  Bytes chunk_bytes_ = 0;
  Bytes chunk_bytes_peak_ = 0;
  Bytes tensor_bytes_ = 0;  // live tensor bytes in chunks
  std::uint64_t chunk_mallocs_ = 0;
  std::uint64_t chunk_reuses_ = 0;
  std::uint64_t dedicated_chunks_ = 0;  // opened for a tensor larger than the chunk size
};

}  // namespace fraglab::gemini
