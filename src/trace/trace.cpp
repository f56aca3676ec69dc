// The Trace model: op spellings, string interning, summary figures and the invariant check.
// The lifetime rules themselves live in live_allocations.hpp, shared with the JSONL reader.
#include "fraglab/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include "trace/live_allocations.hpp"
#include "trace/summary_builder.hpp"
#include "trace/trace_checks.hpp"

namespace fraglab {

namespace {

// Indexed by Op; the JSONL spelling of each op (README "Traces").
constexpr std::array<std::string_view, 11> kOpNames = {
    "alloc",         "free",         "free_requested", "free_completed", "empty_cache", "mark",
    "segment_alloc", "segment_free", "segment_map",    "segment_unmap",  "oom",
};
static_assert(kOpNames.size() == static_cast<std::size_t>(Op::Oom) + 1);

}  // namespace

std::string_view op_name(Op op) {
  auto i = static_cast<std::size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : std::string_view("?");
}

std::optional<Op> op_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<Op>(i);
  return std::nullopt;
}

// A linear search: a trace holds a handful of tags and labels. Readers that intern per event keep
// their own index (see jsonl_reader.cpp) instead of calling this in a loop.
std::uint32_t Trace::intern(std::string_view s) {
  for (std::size_t i = 0; i < strings.size(); ++i)
    if (strings[i] == s) return static_cast<std::uint32_t>(i);
  strings.emplace_back(s);
  return static_cast<std::uint32_t>(strings.size() - 1);
}

std::optional<std::span<const std::uint32_t>> Trace::stack_at(std::uint32_t stack) const {
  if (stack >= stacks.size()) return std::nullopt;  // kNoString, or a stale index: no stack
  return std::span<const std::uint32_t>(stacks[stack]);
}

std::optional<std::span<const std::uint32_t>> Trace::stack_of(std::size_t event_index) const {
  if (event_index >= event_stacks.size()) return std::nullopt;
  return stack_at(event_stacks[event_index]);
}

Bytes InitialState::reserved_bytes() const {
  Bytes total = 0;
  for (const InitialSegment& s : segments) total += s.size;
  return total;
}

TraceSummary summarize(const Trace& trace) {
  detail::SummaryBuilder sum;
  detail::LiveAllocations live;
  // Initial allocations hold memory from the start, a pending (free_requested) one included:
  // it is released only by its free_completed.
  for (const InitialAllocation& a : trace.initial.allocations)
    sum.initial(a.requested, live.add_initial(a.id, a.requested, a.free_requested));
  for (const Event& e : trace.events) {
    if (is_observed(e.op)) {
      sum.observed();
      continue;
    }
    switch (e.op) {
      case Op::Alloc: {
        const bool applied = live.apply(Op::Alloc, e.id, e.size) == nullptr;
        sum.alloc(e, applied);
        break;
      }
      case Op::Free:
      case Op::FreeCompleted: {
        // Summaries are also asked of unvalidated traces: a bad free changes nothing.
        const bool applied = live.apply(e.op, e.id, 0) == nullptr;
        sum.freed(applied, live.last_released());
        break;
      }
      case Op::FreeRequested:
        live.apply(e.op, e.id, 0);  // still holds its memory until free_completed
        break;
      default:
        break;
    }
  }
  return sum.finish(trace.events.size());
}

namespace {

[[noreturn]] void fail_event(std::string_view origin, std::size_t index, Op op, std::string_view what) {
  throw InputError(fmt::format("{}: event {} ({}): {}", origin, index, op_name(op), what));
}

void check_string(const Trace& trace, std::uint64_t index, std::string_view origin, std::size_t event, Op op,
                  const char* what) {
  if (index >= trace.strings.size())
    fail_event(
        origin, event, op,
        fmt::format("{} string index {} out of range (the trace has {} strings)", what, index, trace.strings.size()));
}

// Frames kept (README "Stack frames"): every index points into its table, and event_stacks is
// either absent or one per event.
void validate_frames(const Trace& trace, std::string_view origin) {
  if (!trace.event_stacks.empty() && trace.event_stacks.size() != trace.events.size())
    throw InputError(fmt::format("{}: {} event stacks for {} events (expected one per event, or none)", origin,
                                 trace.event_stacks.size(), trace.events.size()));
  for (std::size_t s = 0; s < trace.stacks.size(); ++s) {
    for (const std::uint32_t f : trace.stacks[s]) {
      if (f >= trace.frames.size())
        throw InputError(fmt::format("{}: stack {}: frame index {} out of range (the trace has {} frames)", origin, s,
                                     f, trace.frames.size()));
    }
  }
  auto check_stack = [&](std::uint32_t stack, std::string_view what, std::size_t i) {
    if (stack != kNoString && stack >= trace.stacks.size())
      throw InputError(fmt::format("{}: {} {}: stack index {} out of range (the trace has {} stacks)", origin, what, i,
                                   stack, trace.stacks.size()));
  };
  for (std::size_t i = 0; i < trace.event_stacks.size(); ++i) check_stack(trace.event_stacks[i], "event", i);
  for (std::size_t i = 0; i < trace.initial.allocations.size(); ++i)
    check_stack(trace.initial.allocations[i].stack, "initial allocation", i);
}

// The start state's rules; fills `live` with the initial allocations.
void validate_start(const Trace& trace, std::string_view origin, detail::LiveAllocations& live) {
  for (std::size_t i = 0; i < trace.initial.segments.size(); ++i) {
    if (trace.initial.segments[i].size >= detail::kImpossibleSize)
      throw InputError(fmt::format("{}: initial segment {}: impossible size {} (expected < 2^60)", origin, i,
                                   trace.initial.segments[i].size));
  }
  for (std::size_t i = 0; i < trace.initial.allocations.size(); ++i) {
    const InitialAllocation& a = trace.initial.allocations[i];
    if (a.requested == 0 || a.requested >= detail::kImpossibleSize)
      throw InputError(fmt::format("{}: initial allocation {} (id {}): impossible size {} (expected 1 .. 2^60-1)",
                                   origin, i, a.id, a.requested));
    if (!live.add_initial(a.id, a.requested, a.free_requested))
      throw InputError(
          fmt::format("{}: initial allocation {}: id {} is already live (expected unique ids)", origin, i, a.id));
  }
}

}  // namespace

void validate_trace(const Trace& trace, std::string_view origin) {
  detail::LiveAllocations live;
  validate_start(trace, origin, live);
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.tag != kNoString) check_string(trace, e.tag, origin, i, e.op, "tag");
    switch (e.op) {
      case Op::Alloc:
        if (e.size == 0) fail_event(origin, i, e.op, "size 0 (expected a positive size)");
        [[fallthrough]];
      case Op::SegmentAlloc:
      case Op::SegmentFree:
      case Op::SegmentMap:
      case Op::SegmentUnmap:
      case Op::Oom:
        if (e.size >= detail::kImpossibleSize)
          fail_event(origin, i, e.op, fmt::format("impossible size {} (expected < 2^60)", e.size));
        break;
      case Op::Mark:
        check_string(trace, e.id, origin, i, e.op, "label");
        check_string(trace, e.size, origin, i, e.op, "value");
        break;
      default:
        break;
    }
    if (const char* what = live.apply(e.op, e.id, e.size))
      fail_event(origin, i, e.op, fmt::format("id {}: {}", e.id, what));
  }
  validate_frames(trace, origin);
}

namespace detail {

void validate_trace_except_events(const Trace& trace, std::string_view origin) {
  detail::LiveAllocations live;
  validate_start(trace, origin, live);
  validate_frames(trace, origin);
}

}  // namespace detail

}  // namespace fraglab
