// TraceBuilder: the one place generated events are written. It hands out allocation ids, stamps
// events with the CPU clock of the timing model, and turns record_stream frees into
// free_requested now + free_completed later.
//
// Deferred frees (allocator-model §6, wm §3.1): a block freed after record_stream(s) becomes reusable
// once stream s has passed the point where the free was issued. PyTorch notices that only when it
// polls its events, at the start of the next malloc; so free_completed is written just before the
// first alloc whose CPU time is at or after that GPU time, or at an empty_cache (which syncs), or
// at the end of the trace.
//
// Invariants: ids are unique and never reused; every alloc id is freed at most once; a deferred
// free always gets its free_completed (finish() completes the rest); every event is one the JSONL
// reader accepts: a size below 2^60 (kImpossibleSize), the sizes live at once summing below 2^60,
// a time below 2^62 µs. check_sizes() keeps sane options far from these; an alloc or a clock past
// them throws InputError instead of writing what the reader would refuse.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <queue>
#include <string_view>
#include <vector>

#include "fraglab/trace.hpp"
#include "workload/gpu_timing.hpp"
#include "workload/streams.hpp"

namespace fraglab::workload {

enum class Tag : std::uint8_t { Param, Grad, Act, Opt, Comm, Temp };

// An allocation id; 0 = nothing (e.g. a zero-byte request, which never reaches the allocator).
using TensorId = AllocId;

class TraceBuilder {
 public:
  TraceBuilder(Trace& trace, GpuTiming& gpu);

  TensorId alloc(Bytes size, Stream stream, Tag tag);
  // The block was used only on the stream it was allocated on: reusable at once.
  void free(TensorId id);
  // record_stream(users...) then free: reusable once every user stream passes this point.
  void free_after(TensorId id, std::initializer_list<Stream> users);
  void free_at(TensorId id, double gpu_time);  // reusable at that GPU time
  void mark_step(std::uint32_t step);
  void mark_phase(std::string_view phase);
  void empty_cache();  // torch.cuda.empty_cache(): syncs pending frees, then releases the cache
  void finish();       // the process ends: every pending free completes

  GpuTiming& gpu() { return gpu_; }

 private:
  struct Pending {
    double time;
    std::uint64_t seq;
    TensorId id;
    bool operator>(const Pending& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  Event event(Op op, std::uint64_t id) const;
  void complete_due(double up_to);

  Trace& trace_;
  GpuTiming& gpu_;
  std::vector<Bytes> sizes_;  // by id - 1: the size of each allocation, to keep the live total
  Bytes live_ = 0;
  void release(TensorId id) { live_ -= sizes_[id - 1]; }
  TensorId next_id_ = 1;
  std::uint64_t pending_seq_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  std::array<std::uint32_t, 6> tags_{};
  std::uint32_t step_label_ = 0, phase_label_ = 0;
};

}  // namespace fraglab::workload
