// SnapshotRecorder: see fraglab/snapshot_export.hpp. The keys and their order are those of
// PyTorch 2.x's _memory_snapshot() (allocator-model §11.2-§11.5), as the snapshots in
// ../shared/traces/real show them.
#include "fraglab/snapshot_export.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "fraglab/pickle_writer.hpp"

namespace fraglab {
namespace {

const char* action_name(SnapshotRecorder::Action a) {
  using A = SnapshotRecorder::Action;
  switch (a) {
    case A::Alloc:
      return "alloc";
    case A::FreeRequested:
      return "free_requested";
    case A::FreeCompleted:
      return "free_completed";
    case A::SegmentAlloc:
      return "segment_alloc";
    case A::SegmentFree:
      return "segment_free";
    case A::SegmentMap:
      return "segment_map";
    case A::SegmentUnmap:
      return "segment_unmap";
    case A::Oom:
      return "oom";
  }
  return "?";
}

// The frames of a stack, innermost first as PyTorch lists them, each a {filename, line, name}
// dict: an empty list where the trace kept none (README "Stack frames": --frames). The one place
// that writes frames (entries, blocks and segments all come here).
void write_frames(PickleWriter& w, const Trace* trace, std::optional<std::span<const std::uint32_t>> stack) {
  w.begin_list();
  if (trace != nullptr && stack) {
    for (const std::uint32_t index : *stack) {
      const Frame& frame = trace->frames.at(index);
      w.begin_dict();
      w.key("filename");
      w.str(frame.filename);
      w.key("line");
      w.integer(frame.line);
      w.key("name");
      w.str(frame.name);
      w.end_dict();
    }
  }
  w.end_list();
}

// The stack of a trace event (an alloc, free or segment action), if the trace kept one.
std::optional<std::span<const std::uint32_t>> event_stack(const Trace* trace, std::optional<std::uint64_t> event) {
  if (trace == nullptr || !event) return std::nullopt;
  return trace->stack_of(*event);
}

}  // namespace

void SnapshotRecorder::on_device_call(DeviceCall call, Addr addr, Bytes size) {
  // The start state's calls built what the trace begins with: a cut-off snapshot shows that as
  // its segments, not as entries (header). Aliases are no PyTorch action.
  if (!started_ || call == DeviceCall::MapAlias || call == DeviceCall::UnmapAlias) return;
  calls_.push_back({call, addr, size});
}

void SnapshotRecorder::on_initial_block(const InitialAllocation& allocation, const Block& block) {
  live_[allocation.id] =
      Live{block, allocation.requested, allocation.free_requested, next_pending_, std::nullopt, allocation.stack};
  if (allocation.free_requested) pending_[next_pending_++] = allocation.id;
}

void SnapshotRecorder::on_start(const Trace& trace, const Policy& policy) {
  trace_ = &trace;
  started_ = true;
  calls_.clear();
  if (!trace.events.empty()) device_index_ = trace.events.front().device;
  policy_ = &policy;
  flush_completes_pending_ = policy.snapshot_settings().has_value();
  retries_seen_ = policy.counters().num_alloc_retries;
  for (const SegmentView& s : policy.segments()) stream_at_[s.addr] = s.stream;
}

void SnapshotRecorder::add(Action action, Addr addr, Bytes size, StreamId stream, const Event& e, std::uint64_t index) {
  entries_.push_back(Entry{action, addr, size, stream, e.time_us, e.has_time, index});
}

// The stream a segment or mapped run at `addr` belongs to: that of the nearest one starting at
// or below it (runs of one expandable segment share its stream), else `fallback`.
StreamId SnapshotRecorder::stream_of(Addr addr, StreamId fallback) const {
  auto it = stream_at_.upper_bound(addr);
  if (it == stream_at_.begin()) return fallback;
  return std::prev(it)->second;
}

// The device calls made while serving an event, in order. A new segment or mapped run belongs
// to the stream of the request that needed it (allocator-model §2); a released one keeps its own.
void SnapshotRecorder::flush_calls(const Event& e, std::uint64_t index) {
  for (const Call& c : calls_) {
    switch (c.call) {
      case DeviceCall::Malloc:
        stream_at_[c.addr] = e.stream;
        segment_event_[c.addr] = index;
        add(Action::SegmentAlloc, c.addr, c.size, e.stream, e, index);
        break;
      case DeviceCall::Free:
        add(Action::SegmentFree, c.addr, c.size, stream_of(c.addr, e.stream), e, index);
        segment_event_.erase(c.addr);
        break;
      case DeviceCall::Map:
        stream_at_[c.addr] = e.stream;
        add(Action::SegmentMap, c.addr, c.size, e.stream, e, index);
        break;
      case DeviceCall::Unmap:
        add(Action::SegmentUnmap, c.addr, c.size, stream_of(c.addr, e.stream), e, index);
        break;
      default:
        break;
    }
  }
  calls_.clear();
}

// §5.3 step 1: the flush synchronises every stream and completes every pending free, in the
// order they were requested, before it releases anything.
void SnapshotRecorder::complete_pending(const Event& e, std::uint64_t index) {
  for (const auto& [since, id] : pending_) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    add(Action::FreeCompleted, it->second.block.addr, it->second.requested, it->second.block.stream, e, index);
    live_.erase(it);
  }
  pending_.clear();
}

// Entries in PyTorch's order (allocator-model §11.5): segment actions a request needed come
// before its alloc (or its oom, after the flush that failed to make room); free_requested comes
// before anything the free released, free_completed when the block returns to the allocator.
void SnapshotRecorder::on_event(const ReplayPoint& point) {
  const Event& e = *point.event;
  const std::uint64_t index = point.event_index;
  switch (e.op) {
    case Op::Alloc: {
      if (flush_completes_pending_) {
        // The retry rung flushed the cache (an OOM gets there too): its completions come first.
        const std::uint64_t retries = policy_->counters().num_alloc_retries;
        if (retries > retries_seen_) complete_pending(e, index);
        retries_seen_ = retries;
      }
      flush_calls(e, index);
      if (point.block) {
        add(Action::Alloc, point.block->addr, e.size, e.stream, e, index);
        live_[e.id] = Live{*point.block, e.size, false, 0, index};
      } else {
        // What cudaMemGetInfo reports after the failed attempt: validate reads the memory the
        // allocator could obtain as reserved + device_free.
        add(Action::Oom, device_.free_memory(), e.size, e.stream, e, index);
      }
      break;
    }
    case Op::Free:
    case Op::FreeRequested:
    case Op::FreeCompleted: {
      auto it = live_.find(e.id);
      if (it == live_.end()) {  // its alloc failed: nothing to free
        flush_calls(e, index);
        break;
      }
      Live& live = it->second;
      if (e.op != Op::FreeCompleted && !live.pending) {
        add(Action::FreeRequested, live.block.addr, live.requested, live.block.stream, e, index);
        live.pending = true;
        live.pending_since = next_pending_;
        pending_[next_pending_++] = e.id;
      }
      if (e.op == Op::FreeRequested) {
        flush_calls(e, index);
        break;
      }
      add(Action::FreeCompleted, live.block.addr, live.requested, live.block.stream, e, index);
      if (live.pending) pending_.erase(live.pending_since);
      live_.erase(it);
      flush_calls(e, index);
      break;
    }
    case Op::EmptyCache:  // no entry of its own: its completions and segment frees
      if (flush_completes_pending_) complete_pending(e, index);
      flush_calls(e, index);
      break;
    default:  // marks and observed events: nothing
      flush_calls(e, index);
      break;
  }
}

std::string SnapshotRecorder::snapshot(const Policy& policy) const {
  // The live blocks by address: the requested bytes and state of each allocated piece.
  std::map<Addr, const Live*> by_addr;
  for (const auto& [id, live] : live_) by_addr[live.block.addr] = &live;

  if (device_index_ > kMaxDevice)
    throw std::invalid_argument(fmt::format("snapshot export: device {} is beyond {}", device_index_, kMaxDevice));
  PickleWriter w;
  w.begin_dict();
  w.key("segments");
  w.begin_list();
  for (const SegmentView& seg : policy.segments()) {
    Bytes allocated = 0, active = 0, requested = 0;
    for (const SegmentView::Piece& p : seg.blocks) {
      if (!p.allocated) continue;
      auto it = by_addr.find(p.addr);
      const Live* live = it == by_addr.end() ? nullptr : it->second;
      active += p.size;
      if (live == nullptr || !live->pending) allocated += p.size;
      requested += live ? live->requested : p.size;
    }
    w.begin_dict();
    w.key("device");
    w.integer(device_index_);
    w.key("address");
    w.unsigned_integer(seg.addr);
    w.key("total_size");
    w.unsigned_integer(seg.size);
    w.key("allocated_size");
    w.unsigned_integer(allocated);
    w.key("active_size");
    w.unsigned_integer(active);
    w.key("requested_size");
    w.unsigned_integer(requested);
    w.key("stream");
    w.unsigned_integer(seg.stream);
    w.key("segment_type");
    w.str(seg.pool == "small" ? "small" : "large");
    w.key("segment_pool_id");
    w.begin_tuple();
    w.integer(0);
    w.integer(0);
    w.end_tuple();
    w.key("is_expandable");
    w.boolean(seg.expandable);
    w.key("frames");
    const auto made_by = segment_event_.find(seg.addr);
    write_frames(w, trace_,
                 event_stack(trace_, made_by == segment_event_.end() ? std::nullopt : std::optional(made_by->second)));
    w.key("blocks");
    w.begin_list();
    for (const SegmentView::Piece& p : seg.blocks) {
      auto it = by_addr.find(p.addr);
      const Live* live = p.allocated && it != by_addr.end() ? it->second : nullptr;
      w.begin_dict();
      w.key("address");
      w.unsigned_integer(p.addr);
      w.key("size");
      w.unsigned_integer(p.size);
      w.key("requested_size");
      w.unsigned_integer(!p.allocated ? 0 : live ? live->requested : p.size);
      w.key("state");
      w.str(!p.allocated ? "inactive" : live && live->pending ? "active_pending_free" : "active_allocated");
      w.key("frames");
      write_frames(w, trace_,
                   !live         ? std::nullopt
                   : live->event ? event_stack(trace_, live->event)
                                 : trace_->stack_at(live->stack));
      w.end_dict();
    }
    w.end_list();
    w.end_dict();
  }
  w.end_list();

  w.key("device_traces");
  w.begin_list();
  for (std::uint32_t d = 0; d < device_index_; ++d) {
    w.begin_list();
    w.end_list();
  }
  w.begin_list();
  for (const Entry& e : entries_) {
    w.begin_dict();
    w.key("action");
    w.str(action_name(e.action));
    w.key(e.action == Action::Oom ? "device_free" : "addr");
    w.unsigned_integer(e.addr);
    w.key("size");
    w.unsigned_integer(e.size);
    w.key("stream");
    w.unsigned_integer(e.stream);
    if (e.has_time) {
      w.key("time_us");
      w.integer(e.time_us);
    }
    w.key("frames");
    write_frames(w, trace_, event_stack(trace_, e.event));
    w.end_dict();
  }
  w.end_list();
  w.end_list();

  if (const std::optional<SnapshotSettings> s = policy.snapshot_settings()) {
    w.key("allocator_settings");
    w.begin_dict();
    w.key("PYTORCH_CUDA_ALLOC_CONF");
    w.str(s->conf);
    w.key("max_split_size");
    if (s->max_split_size)
      w.unsigned_integer(*s->max_split_size);
    else
      w.integer(-1);  // SIZE_MAX, stored as int64
    w.key("garbage_collection_threshold");
    w.real(s->garbage_collection_threshold);
    w.key("expandable_segments");
    w.boolean(s->expandable_segments);
    if (s->max_non_split_rounding != 0) {
      w.key("max_non_split_rounding");
      w.unsigned_integer(s->max_non_split_rounding);
    }
    if (s->large_segment_size != 0) {
      w.key("large_segment_size");
      w.unsigned_integer(s->large_segment_size);
    }
    w.key("roundup_power2_divisions");
    w.begin_dict();
    std::uint64_t interval_mib = 1;  // keys: each interval's lower bound in MiB
    for (const std::uint64_t divisions : s->roundup_power2_divisions) {
      w.key(std::to_string(interval_mib));
      w.unsigned_integer(divisions);
      interval_mib *= 2;
    }
    w.end_dict();
    w.end_dict();
  }
  w.end_dict();
  return w.finish();
}

}  // namespace fraglab
