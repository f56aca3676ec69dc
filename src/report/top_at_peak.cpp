// inspect --top-at-peak, rendered (fraglab/top_at_peak_report.hpp).
#include "fraglab/top_at_peak_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "fraglab/types.hpp"

namespace fraglab {

namespace {

std::string where_allocated(std::int64_t alloc_event) {
  return alloc_event < 0 ? std::string("live at start") : fmt::format("event {}", alloc_event);
}

nlohmann::json frame_json(const Frame& f) { return {{"filename", f.filename}, {"line", f.line}, {"name", f.name}}; }

}  // namespace

std::string top_at_peak_text(const Trace& trace, const TopAtPeak& top, const FrameFilter& filter,
                             std::size_t frames_shown) {
  const std::string at =
      top.live.after_event < 0 ? std::string("the start") : fmt::format("event {}", top.live.after_event);
  std::string out;
  if (top.basis == "reserved") {
    out += fmt::format("top {} live allocations at the peak reserved of {} ({}, after {}; {} requested live):\n",
                       top.count, top.policy, format_bytes(top.peak_reserved), at, format_bytes(top.live.live_bytes));
  } else {
    out += fmt::format("top {} live allocations at the peak of requested bytes ({} live, after {}):\n", top.count,
                       format_bytes(top.live.live_bytes), at);
  }
  const std::size_t n = std::min(top.count, top.live.allocations.size());
  for (std::size_t k = 0; k < n; ++k) {
    const LiveAllocation& a = top.live.allocations[k];
    out += fmt::format("  {:>2}. {:>12} ({} B)  id {}  {}  stream {}{}\n", k + 1, format_bytes(a.size), a.size, a.id,
                       where_allocated(a.alloc_event), a.stream, a.free_requested ? "  (free requested)" : "");
    const auto stack = trace.stack_at(a.stack);
    if (!stack) {
      out += trace.has_frames() ? "        (no stack recorded)\n" : "";
      continue;
    }
    // From the top frame (the source line that asked, frames.hpp) outwards to its callers.
    const auto top_frame = filter.top_frame(trace, *stack);
    if (!top_frame) {
      out += fmt::format("        (all {} kept frames are PyTorch's own: keep more with --frames)\n", stack->size());
      continue;
    }
    std::size_t shown = 0;
    bool reached = false;
    for (const std::uint32_t f : *stack) {
      reached = reached || f == *top_frame;
      if (!reached || filter.ignored(trace.frames[f])) continue;
      if (shown == frames_shown) break;
      out += fmt::format("        {}\n", frame_text(trace.frames[f]));
      ++shown;
    }
  }
  if (!trace.has_frames()) out += "(no stack frames kept: the trace records none, or --frames 0)\n";
  return out;
}

nlohmann::json top_at_peak_json(const Trace& trace, const TopAtPeak& top, const FrameFilter& filter) {
  nlohmann::json j;
  j["basis"] = top.basis;
  if (top.basis == "reserved") {
    j["policy"] = top.policy;
    j["peak_reserved_bytes"] = top.peak_reserved;
  }
  j["event_index"] = top.live.after_event;  // -1: the start
  j["live_requested_bytes"] = top.live.live_bytes;
  j["live_allocations"] = top.live.allocations.size();
  nlohmann::json list = nlohmann::json::array();
  const std::size_t n = std::min(top.count, top.live.allocations.size());
  for (std::size_t k = 0; k < n; ++k) {
    const LiveAllocation& a = top.live.allocations[k];
    nlohmann::json e = {{"id", a.id},
                        {"size", a.size},
                        {"alloc_event", a.alloc_event},
                        {"stream", a.stream},
                        {"free_requested", a.free_requested}};
    nlohmann::json frames = nlohmann::json::array();
    nlohmann::json top_frame = nullptr;
    if (const auto stack = trace.stack_at(a.stack)) {
      for (const std::uint32_t f : *stack) frames.push_back(frame_json(trace.frames[f]));
      if (const auto t = filter.top_frame(trace, *stack)) top_frame = frame_json(trace.frames[*t]);
    }
    e["frames"] = std::move(frames);
    e["top_frame"] = std::move(top_frame);
    list.push_back(std::move(e));
  }
  j["allocations"] = std::move(list);
  return j;
}

}  // namespace fraglab
