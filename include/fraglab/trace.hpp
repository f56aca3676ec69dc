// The Trace: an ordered stream of allocator events for one device, plus the allocator state the
// device was in when the stream starts (for snapshots whose history was cut off, allocator-model §12).
//
// Invariants (checked by validate_trace(), relied on by the Replayer):
//  - every `alloc` id is unique among live allocations (ids of initial allocations included);
//  - `free`, `free_requested` and `free_completed` name a live id; `free_requested` comes at most
//    once per allocation, and `free_completed` only after it; a plain `free` is both at once;
//  - observed events (segment_*, oom) are never inputs to a policy, only references.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/types.hpp"

namespace fraglab {

enum class Op : std::uint8_t {
  Alloc,
  Free,           // free requested and completed at once
  FreeRequested,  // user freed; the block may still be in use by another stream
  FreeCompleted,  // the block really returns to the allocator
  EmptyCache,
  Mark,  // step / phase boundary: label and value live in the trace's string table
  // Observed allocator actions recorded by a real run: references for validation only.
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Oom,
};

// The JSONL spelling of an op ("alloc", "free", ...), and its inverse (nullopt if unknown).
std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
// True for segment_* and oom: events a replay must not feed to a policy.
inline bool is_observed(Op op) { return op >= Op::SegmentAlloc; }

inline constexpr std::uint32_t kNoString = 0xffffffffu;
// The tag of an event fraglab inferred rather than read (an empty_cache() call a snapshot shows
// only as a burst of segment frees): JSONL spells it {"op":"empty_cache","tag":"inferred"}.
inline constexpr std::string_view kInferredTag = "inferred";

struct Event {
  Op op = Op::Alloc;
  bool has_addr = false;  // alloc: recorded address known; segment_*: always true
  bool has_time = false;
  std::uint32_t device = 0;
  // alloc: index into Trace::strings ("param", "act", ...); empty_cache: kInferredTag when inferred.
  std::uint32_t tag = kNoString;
  // alloc/free*: allocation id. mark: index of the label in Trace::strings.
  std::uint64_t id = 0;
  // alloc: requested bytes. segment_*: bytes. oom: rounded request.
  // mark: index of the value's JSON text in Trace::strings.
  std::uint64_t size = 0;
  StreamId stream = 0;
  // alloc: recorded address; segment_*: segment address; oom: device_free bytes.
  std::uint64_t addr = 0;
  std::int64_t time_us = 0;

  bool operator==(const Event&) const = default;
};

// A segment that existed when the trace starts (allocator-model §12.2). For expandable segments this is
// one mapped run, as the snapshot reports it.
struct InitialSegment {
  Addr addr = 0;
  Bytes size = 0;
  StreamId stream = 0;
  bool small_pool = false;  // PyTorch's segment_type "small"
  bool expandable = false;
  bool operator==(const InitialSegment&) const = default;
};

// An allocation live when the trace starts. Its later free (if any) is in the events.
struct InitialAllocation {
  AllocId id = 0;
  Addr addr = 0;
  Bytes requested = 0;   // bytes the program asked for
  Bytes block_size = 0;  // block size inside its segment; 0 = not recorded (derive it)
  StreamId stream = 0;
  bool free_requested = false;  // freed by the user but awaiting other streams (pending free)
  // Index into Trace::stacks of the stack that allocated it (a snapshot block's `frames`);
  // kNoString when frames were not kept or none were recorded.
  std::uint32_t stack = kNoString;
  bool operator==(const InitialAllocation&) const = default;
};

struct InitialState {
  std::vector<InitialSegment> segments;        // sorted by address
  std::vector<InitialAllocation> allocations;  // sorted by address
  bool empty() const { return segments.empty() && allocations.empty(); }
  Bytes reserved_bytes() const;
  bool operator==(const InitialState&) const = default;
};

// One source location of a recorded stack (a PyTorch snapshot's frame dict {filename, line, name}).
struct Frame {
  std::string filename;
  std::int64_t line = 0;
  std::string name;
  bool operator==(const Frame&) const = default;
};

struct Trace {
  std::string name;    // short name (file stem by default)
  std::string source;  // where it came from ("pytorch-snapshot", "jsonl", "fraglab gen ...")
  // PYTORCH_CUDA_ALLOC_CONF the run used, as far as the source records it (snapshot
  // allocator_settings rebuilt into the env-var syntax); empty when unknown or default.
  std::string allocator_conf;
  bool allocator_conf_known = false;  // the source recorded settings (even if all default)
  std::vector<Event> events;
  // Entries in the source the events came from (a snapshot's trace entries, before adjacent
  // free_requested/free_completed pairs were joined into one `free`); 0 = same as events.size().
  std::uint64_t source_entries = 0;
  std::vector<std::string> strings;  // tags, mark labels and values
  InitialState initial;
  // Stack frames, kept only when asked for (TraceReadOptions::frames; README "Stack frames"):
  std::vector<Frame> frames;                       // unique frames
  std::vector<std::vector<std::uint32_t>> stacks;  // unique stacks: indices into frames, innermost first, at most
                                                   // the top N kept
  std::vector<std::uint32_t> event_stacks;         // empty when frames were not kept; else one per event: index into
                                                   // stacks, kNoString when the event has none

  // The stack of events[event_index] (indices into frames, innermost first); nullopt when frames
  // were not kept or that event has none.
  std::optional<std::span<const std::uint32_t>> stack_of(std::size_t event_index) const;
  // The same for a stack index (InitialAllocation::stack): nullopt for kNoString.
  std::optional<std::span<const std::uint32_t>> stack_at(std::uint32_t stack) const;
  bool has_frames() const { return !event_stacks.empty() || !stacks.empty(); }

  std::uint32_t intern(std::string_view s);  // index of s in strings, adding it if new
  std::string_view string_at(std::uint32_t index) const { return strings.at(index); }
  bool operator==(const Trace&) const = default;
};

// Summary figures of a trace that do not depend on any policy.
struct TraceSummary {
  std::uint64_t events = 0;
  std::uint64_t allocs = 0;
  std::uint64_t frees = 0;
  std::uint64_t observed_events = 0;  // segment_* and oom
  std::uint64_t streams = 0;
  Bytes peak_requested = 0;  // most bytes live at once (initial allocations included)
  Bytes total_requested = 0;
  Bytes max_request = 0;
};
TraceSummary summarize(const Trace& trace);

// Checks the invariants at the top of this file. Throws InputError naming `origin` and the
// event index on the first violation.
void validate_trace(const Trace& trace, std::string_view origin);

}  // namespace fraglab
