// SnapshotRecorder: records a simulated run and writes it as a PyTorch memory snapshot pickle, the
// layout torch.cuda.memory._dump_snapshot() writes (allocator-model §11), so the run opens in
// PyTorch's own tools (memory_viz) and reads back through fraglab's snapshot reader.
//
// What the snapshot holds:
//  - `segments`: the policy's segments at the end (Policy::segments()), with their blocks;
//  - `device_traces`: one list per device up to the trace's, the trace's device holding an entry
//    per allocator action of the run at the simulated addresses: alloc, free_requested,
//    free_completed, segment_alloc / segment_free (cudaMalloc / cudaFree), segment_map /
//    segment_unmap (expandable segments), oom (with device_free);
//  - `allocator_settings`: Policy::snapshot_settings(), for the pytorch policy only.
//
// The start state of a trace that begins mid-run is represented as a real snapshot whose trace
// ring buffer was cut off (allocator-model §12): the device calls that built it are not entries;
// the segments it had are what remains after undoing the entries from the final `segments`, and
// its allocations appear as frees of addresses the trace never allocated, or as blocks still
// active at the end. The reader rebuilds the start state from exactly that.
//
// For the pytorch policy, pending frees completed by a flush of the cache (an empty_cache(), or
// the retry rung of a malloc) are written where PyTorch writes them, before the flush's segment
// frees (allocator-model §5.3); the trace's own free_completed event then adds nothing.
//
// Not recorded (PyTorch does not record them either): empty_cache() calls (only their segment
// frees), marks. An oom entry's size is the requested size, not PyTorch's rounded size: a
// replay of either fails the same way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

class PickleWriter;

class SnapshotRecorder final : public ReplayObserver, public DeviceListener {
 public:
  // device_traces holds one list per device up to the trace's: a device index beyond this is no
  // CUDA device, and would make the pickle gigabytes of empty lists (snapshot() refuses it).
  static constexpr std::uint32_t kMaxDevice = 4095;

  // Listen to `device` for the run: device.add_listener(&recorder) before it, remove after.
  explicit SnapshotRecorder(const Device& device) : device_(device) {}

  void on_device_call(DeviceCall call, Addr addr, Bytes size) override;
  void on_initial_block(const InitialAllocation& allocation, const Block& block) override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;

  // The snapshot pickle of the run so far, with `policy`'s segments (call after the run).
  std::string snapshot(const Policy& policy) const;

  enum class Action : std::uint8_t {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom
  };
  struct Entry {
    Action action = Action::Alloc;
    Addr addr = 0;  // oom: device_free
    Bytes size = 0;
    StreamId stream = 0;
    std::int64_t time_us = 0;
    bool has_time = false;
    std::optional<std::uint64_t> event;  // the trace event it belongs to (for its stack frames)
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  struct Live {
    Block block;
    Bytes requested = 0;
    bool pending = false;                // free requested, not completed
    std::uint64_t pending_since = 0;     // order of its free_requested among the pending ones
    std::optional<std::uint64_t> event;  // its alloc event; none for the start state
    std::uint32_t stack = kNoString;     // a start-state block's stack (InitialAllocation::stack)
  };
  struct Call {
    DeviceCall call;
    Addr addr;
    Bytes size;
  };
  void add(Action action, Addr addr, Bytes size, StreamId stream, const Event& e, std::uint64_t index);
  void flush_calls(const Event& e, std::uint64_t index);
  void complete_pending(const Event& e, std::uint64_t index);
  StreamId stream_of(Addr addr, StreamId fallback) const;

  const Device& device_;
  const Trace* trace_ = nullptr;
  std::uint32_t device_index_ = 0;
  bool started_ = false;
  // PyTorch's allocator (a policy with snapshot settings): a flush of the cache (empty_cache(),
  // and a malloc's last rung, which PyTorch counts as a retry) completes every pending free first
  // and records their free_completed before its segment frees (allocator-model §5.3, §14.4).
  const Policy* policy_ = nullptr;
  bool flush_completes_pending_ = false;
  std::uint64_t retries_seen_ = 0;
  std::map<std::uint64_t, AllocId> pending_;  // by pending_since
  std::uint64_t next_pending_ = 0;
  std::vector<Call> calls_;  // device calls of the event being served
  std::vector<Entry> entries_;
  std::unordered_map<AllocId, Live, SeededHash> live_;  // seeded: ids come from the trace
  // Stream of the segment or mapped run starting at an address, and the event that allocated it.
  std::map<Addr, StreamId> stream_at_;
  std::map<Addr, std::uint64_t> segment_event_;
};

}  // namespace fraglab
