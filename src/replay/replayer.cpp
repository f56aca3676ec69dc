// The replay loop. It owns the measurement of requested and allocated bytes (the Device owns
// reserved bytes) and nothing else: no policy logic, no output.
//
// Invariants during the loop:
//  - requested = Σ requested bytes of live allocations (alloc .. free completed);
//  - allocated = Σ block sizes of live allocations whose free was not yet requested;
//  - held = Σ block sizes of live allocations (alloc .. free completed);
//  - an allocation that hit OOM is remembered so its later frees are ignored.
#include "fraglab/replay.hpp"
#include "fraglab/seeded_hash.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

namespace fraglab {
namespace {

struct LiveAllocation {
  Block block;
  bool in_use = false;          // slot holds a live allocation
  bool free_requested = false;  // the program freed it; the block may not be reusable yet
  bool out_of_memory = false;   // the alloc failed: frees of this id are ignored
};

// Live allocations by id: a flat vector when ids are dense (traces we write, snapshots), a hash
// map otherwise (hand-written traces may use any u64).
class LiveTable {
 public:
  LiveTable(const Trace& trace) {
    AllocId max_id = 0;
    for (const InitialAllocation& a : trace.initial.allocations) max_id = std::max(max_id, a.id);
    for (const Event& e : trace.events) {
      if (e.op == Op::Alloc) max_id = std::max(max_id, e.id);
    }
    const std::uint64_t dense_limit = 2 * (trace.events.size() + trace.initial.allocations.size()) + 1024;
    dense_ = max_id < dense_limit;
    if (dense_) slots_.resize(max_id + 1);
  }
  LiveAllocation& operator[](AllocId id) { return dense_ ? slots_[id] : sparse_[id]; }
  LiveAllocation* find(AllocId id) {
    if (dense_) return id < slots_.size() && slots_[id].in_use ? &slots_[id] : nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  void erase(AllocId id) {
    if (dense_)
      slots_[id] = LiveAllocation{};
    else
      sparse_.erase(id);
  }

 private:
  bool dense_ = false;
  std::vector<LiveAllocation> slots_;
  std::unordered_map<AllocId, LiveAllocation, SeededHash> sparse_;  // seeded: ids come from the trace
};

}  // namespace

std::string_view start_state_name(StartState s) { return s == StartState::Cold ? "cold" : "recorded"; }

Replayer::Replayer(const Trace& trace, Policy& policy, Device& device, ReplayOptions options)
    : trace_(trace), policy_(policy), device_(device), options_(options) {}

ReplayResult Replayer::run(std::string policy_spec) {
  const auto started = std::chrono::steady_clock::now();
  ReplayResult result;
  result.policy = std::move(policy_spec);
  Metrics& m = result.metrics;

  policy_.prepare(trace_);

  LiveTable live(trace_);
  Bytes requested = 0;
  Bytes allocated = 0;
  Bytes held = 0;
  result.start_state = options_.start_state;
  const std::vector<std::optional<Block>> initial_blocks = options_.start_state == StartState::Cold
                                                               ? policy_.allocate_initial(trace_.initial)
                                                               : policy_.adopt(trace_.initial);
  for (size_t i = 0; i < trace_.initial.allocations.size(); ++i) {
    const InitialAllocation& a = trace_.initial.allocations[i];
    LiveAllocation& slot = live[a.id];
    slot.in_use = true;
    if (!initial_blocks[i]) {
      // The rebuilt start state does not fit this policy on this device.
      slot.out_of_memory = true;
      result.ooms.push_back({0, a.requested, a.stream, "initial state: " + policy_.last_oom_message()});
      continue;
    }
    slot.block = *initial_blocks[i];
    for (ReplayObserver* o : observers_) o->on_initial_block(a, slot.block);
    slot.free_requested = a.free_requested;
    requested += a.requested;
    held += slot.block.size;
    if (!a.free_requested) allocated += slot.block.size;
  }
  const std::uint64_t device_allocs_at_start = device_.device_allocs();
  const std::uint64_t device_frees_at_start = device_.device_frees();
  m.reserved_at_start = device_.reserved();
  m.peak_requested = requested;
  m.peak_allocated = allocated;
  Bytes best_reserved = device_.reserved();  // the highest reserved seen after an event
  Bytes lowest_reserved = best_reserved;     // the least reserved seen so far
  m.lowest_reserved_before_peak = lowest_reserved;
  m.allocated_at_peak_reserved = allocated;
  for (ReplayObserver* o : observers_) o->on_start(trace_, policy_);

  std::uint64_t index = 0;
  const std::uint64_t total = trace_.events.size();
  for (; index < total; ++index) {
    const Event& e = trace_.events[index];
    const Block* handed_out = nullptr;
    switch (e.op) {
      case Op::Alloc: {
        LiveAllocation& slot = live[e.id];
        slot.in_use = true;
        std::optional<Block> block = policy_.allocate(e.size, e.stream);
        if (!block) {
          slot.out_of_memory = true;
          result.ooms.push_back({index, e.size, e.stream, policy_.last_oom_message()});
          break;
        }
        slot.block = *block;
        handed_out = &slot.block;
        requested += e.size;
        allocated += block->size;
        held += block->size;
        break;
      }
      case Op::Free:
      case Op::FreeRequested:
      case Op::FreeCompleted: {
        LiveAllocation* slot = live.find(e.id);
        if (slot == nullptr) break;  // validate_trace() rules this out for loaded traces
        if (slot->out_of_memory) {
          if (e.op != Op::FreeRequested) live.erase(e.id);
          break;
        }
        if (e.op != Op::FreeCompleted && !slot->free_requested) {
          allocated -= slot->block.size;
          slot->free_requested = true;
        }
        if (e.op == Op::FreeRequested) {
          policy_.free_requested(slot->block);
        } else {
          if (e.op == Op::Free)
            policy_.free(slot->block);
          else
            policy_.free_completed(slot->block);
          requested -= slot->block.requested;
          held -= slot->block.size;
          live.erase(e.id);
        }
        break;
      }
      case Op::EmptyCache:
        policy_.empty_cache();
        break;
      case Op::Mark:
        policy_.mark(trace_.string_at(static_cast<std::uint32_t>(e.id)),
                     trace_.string_at(static_cast<std::uint32_t>(e.size)));
        break;
      default:  // observed events are not inputs to a policy
        break;
    }

    const Bytes reserved = device_.reserved();
    lowest_reserved = std::min(lowest_reserved, reserved);
    if (reserved > best_reserved) {
      best_reserved = reserved;
      m.lowest_reserved_before_peak = lowest_reserved;
      m.allocated_at_peak_reserved = allocated;
      m.peak_reserved_event = static_cast<std::int64_t>(index);
    } else if (reserved == best_reserved && allocated > m.allocated_at_peak_reserved) {
      // Still at the peak (a cache, or a static arena, holds it): the busiest moment counts.
      m.allocated_at_peak_reserved = allocated;
    }
    m.peak_requested = std::max(m.peak_requested, requested);
    m.peak_allocated = std::max(m.peak_allocated, allocated);
    if (!observers_.empty()) {
      const ReplayPoint point{index, &e, requested, allocated, reserved, held, handed_out};
      for (ReplayObserver* o : observers_) o->on_event(point);
    }
    if (!result.ooms.empty() && options_.stop_on_oom && e.op == Op::Alloc && handed_out == nullptr) {
      result.stopped_on_oom = true;
      ++index;
      break;
    }
  }
  for (ReplayObserver* o : observers_) o->on_finish();

  result.events_replayed = index;
  m.peak_reserved = device_.peak_reserved();
  m.reserved_at_end = device_.reserved();
  m.fragmentation_at_peak =
      best_reserved == 0 ? 0.0
                         : 1.0 - static_cast<double>(m.allocated_at_peak_reserved) / static_cast<double>(best_reserved);
  m.peak_utilization =
      m.peak_reserved == 0 ? 0.0 : static_cast<double>(m.peak_allocated) / static_cast<double>(m.peak_reserved);
  const PolicyCounters counters = policy_.counters();
  m.num_alloc_retries = counters.num_alloc_retries;
  m.num_ooms = result.ooms.size();
  m.num_device_alloc = device_.device_allocs() - device_allocs_at_start;
  m.num_device_free = device_.device_frees() - device_frees_at_start;
  result.detailed_stats = policy_.detailed_stats();
  result.notes = policy_.notes();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace fraglab
