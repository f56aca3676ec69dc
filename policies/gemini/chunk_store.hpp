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
//  - offloading (only when built with `offload`): a chunk with live tensors can be moved to the
//    host (ChunkManager.move_chunk to cpu) and back (to cuda). Its address range stays reserved
//    for it (CUDA VMM: reserve_range, then its pages mapped while it is on the device), so the
//    program's blocks keep their addresses while the data is on the host; a chunk then takes
//    whole pages of the device's granularity. Without `offload` a chunk is one device malloc.
//    A chunk on the host whose tensors are all freed is released at once (nothing to move back).
//
// Invariants:
//  - by_address_ holds every chunk allocated on the device (open, closed or cached), by address;
//  - a chunk's live tensors lie in [addr, addr + used) and never overlap; live = their count;
//  - a cached chunk has no live tensors and is in cached_ (size, addr); no other chunk is;
//  - open_[class] is the chunk of that class tensors are appended to, or none;
//  - a chunk on the host is Open or Closed and has live tensors; bytes_on_device() counts the
//    chunks on the device, bytes_on_host() those on the host.
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
  ChunkStore(Device& device, Bytes chunk_size, bool offload = false)
      : device_(device), chunk_size_(chunk_size), offload_(offload) {}

  // The chunk a tensor of `size` of class `cls` would be packed into, before pack() is called:
  // kNewChunk when it opens one (a cached chunk or a new allocation).
  static constexpr std::uint32_t kNewChunk = ~std::uint32_t{0};
  std::uint32_t target(TagClass cls, Bytes size) const;
  // Device bytes pack() needs for that chunk first: the chunk's size when it is on the host or
  // new (0 when a cached chunk takes it), else 0 (Gemini's _get_layout_info cuda_demand).
  Bytes demand(TagClass cls, Bytes size) const;

  // Packs a tensor of `size` (> 0) bytes. nullopt when the device refuses a new chunk; the
  // class's open chunk is closed then (as Gemini closes it before opening the next).
  std::optional<Block> pack(TagClass cls, Bytes size, StreamId stream);
  // ---- offloading (only with `offload`) ----
  // Chunks that could move to the host now, in address order: on the device, with live tensors,
  // not `keep` (Gemini's get_cuda_movable_chunks less the chunk being computed on).
  std::vector<std::uint32_t> movable(std::uint32_t keep) const;
  // Moves a chunk to the host (unmaps its pages): device→host bytes += its size.
  void evict(std::uint32_t index);
  // The chunk's size (what evicting it frees on the device).
  Bytes size_of(std::uint32_t index) const { return chunks_[index].size; }
  bool on_host(std::uint32_t index) const { return chunks_[index].on_host; }
  // True when `addr` lies in a chunk that is on the host.
  bool on_host_at(Addr addr) const;
  // The open chunk of a class, or kNewChunk.
  std::uint32_t open_chunk(TagClass cls) const { return open_[static_cast<std::size_t>(cls)]; }
  Bytes bytes_on_host() const { return host_bytes_; }
  // Bytes of the live tensors in chunks on the host (Policy::held_on_host). O(tensors of those chunks).
  Bytes tensor_bytes_on_host() const;
  Bytes to_host_bytes() const { return to_host_; }
  Bytes to_device_bytes() const { return to_device_; }
  // How many chunks of `cls` were opened so far (new or cached), this pack's included.
  std::uint64_t opened(TagClass cls) const { return opened_[static_cast<std::size_t>(cls)]; }

  // True when `addr` lies in one of the chunks (so the block is a chunk tensor).
  bool owns(Addr addr) const;
  // The tensor's free completed.
  void release(const Block& block);
  // Frees every chunk without live tensors on the device (cached ones and, with `open_too`, empty
  // open ones). Returns how many.
  std::uint64_t release_empty_chunks(bool open_too = true);

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
    bool on_host = false;
    std::vector<Tensor> tensors;  // in fill order; a freed one stays, marked dead, until a reset
  };
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};

  // A chunk of at least `size` bytes: a cached one, or a new device allocation.
  std::optional<std::uint32_t> acquire(Bytes size);
  void close(std::uint32_t index);
  void cache(std::uint32_t index);
  void reset(Chunk& chunk);
  void release_chunk(std::uint32_t index);  // gives its memory (and address range) back
  Bytes footprint(Bytes size) const;        // device bytes a chunk of `size` takes
  bool fetch(std::uint32_t index);          // host → device; false when the device refuses

  Device& device_;
  const Bytes chunk_size_;
  const bool offload_;
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
  Bytes host_bytes_ = 0;                // chunks on the host
  Bytes host_bytes_peak_ = 0;
  Bytes to_host_ = 0;  // device → host bytes moved
  Bytes to_device_ = 0;
  std::uint64_t evictions_ = 0;
  std::uint64_t fetches_ = 0;
  std::array<std::uint64_t, kTagClasses> opened_{0, 0, 0};
};

}  // namespace fraglab::gemini
