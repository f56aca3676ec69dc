// Where two Traces differ, for the harnesses' messages (event by event, then the rest).
#pragma once

#include <string>

#include <fmt/format.h>

#include "fraglab/trace.hpp"

namespace fraglab::fuzz {

// Empty when a == b.
inline std::string trace_difference(const Trace& a, const Trace& b) {
  if (a == b) return {};
  const std::size_t n = std::min(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < n; ++i) {
    const Event& x = a.events[i];
    const Event& y = b.events[i];
    if (!(x == y))
      return fmt::format(
          "event {}: op {} id {} size {} addr {} stream {} t {} tag {} vs op {} id {} size {} addr {} "
          "stream {} t {} tag {}",
          i, op_name(x.op), x.id, x.size, x.addr, x.stream, x.time_us, x.tag, op_name(y.op), y.id, y.size, y.addr,
          y.stream, y.time_us, y.tag);
  }
  if (a.events.size() != b.events.size()) return fmt::format("{} vs {} events", a.events.size(), b.events.size());
  if (a.name != b.name || a.source != b.source)
    return fmt::format("name/source {}/{} vs {}/{}", a.name, a.source, b.name, b.source);
  if (a.allocator_conf != b.allocator_conf || a.allocator_conf_known != b.allocator_conf_known)
    return fmt::format("allocator_conf '{}' vs '{}'", a.allocator_conf, b.allocator_conf);
  if (a.source_entries != b.source_entries)
    return fmt::format("source_entries {} vs {}", a.source_entries, b.source_entries);
  if (a.strings != b.strings) return "string tables differ";
  if (a.initial.segments != b.initial.segments) return "initial segments differ";
  return "initial allocations differ";
}

}  // namespace fraglab::fuzz
