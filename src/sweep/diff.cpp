// Comparing two replays: the first event where the inputs part, the first where reserved memory
// parts, and the replay of both traces side by side.
#include <fmt/format.h>

#include <limits>
#include <thread>
#include <unordered_map>

#include "fraglab/diff.hpp"
#include "fraglab/seeded_hash.hpp"

namespace fraglab {
namespace {

// For each free event, which allocation it frees, as the ordinal of its alloc event (initial
// allocations: -1, -2, ...). Ids are only names: two traces may number the same program
// differently and still be the same program.
std::vector<std::int64_t> freed_ordinals(const Trace& trace) {
  std::vector<std::int64_t> out(trace.events.size(), 0);
  std::unordered_map<AllocId, std::int64_t, SeededHash> live;  // seeded: ids come from the trace
  for (size_t i = 0; i < trace.initial.allocations.size(); ++i) {
    live[trace.initial.allocations[i].id] = -static_cast<std::int64_t>(i) - 1;
  }
  std::int64_t ordinal = 0;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Alloc) {
      live[e.id] = ordinal++;
    } else if (e.op == Op::Free || e.op == Op::FreeRequested || e.op == Op::FreeCompleted) {
      auto it = live.find(e.id);
      out[i] = it == live.end() ? std::numeric_limits<std::int64_t>::min() : it->second;
      if (e.op != Op::FreeRequested && it != live.end()) live.erase(it);
    }
  }
  return out;
}

std::string_view string_or_empty(const Trace& trace, std::uint32_t index) {
  return index == kNoString ? std::string_view{} : trace.string_at(index);
}

bool same_event(const Trace& a, const Event& ea, std::int64_t ra, const Trace& b, const Event& eb, std::int64_t rb) {
  if (ea.op != eb.op) return false;
  switch (ea.op) {
    case Op::Alloc:
      return ea.size == eb.size && ea.stream == eb.stream && string_or_empty(a, ea.tag) == string_or_empty(b, eb.tag);
    case Op::Free:
    case Op::FreeRequested:
    case Op::FreeCompleted:
      return ra == rb;
    case Op::Mark:
      return a.string_at(static_cast<std::uint32_t>(ea.id)) == b.string_at(static_cast<std::uint32_t>(eb.id)) &&
             a.string_at(static_cast<std::uint32_t>(ea.size)) == b.string_at(static_cast<std::uint32_t>(eb.size));
    case Op::EmptyCache:
      return true;
    default:  // observed events: not inputs of a replay
      return ea.size == eb.size;
  }
}

std::string unquote(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return std::string(v);
}

}  // namespace

TraceDivergence first_divergence(const Trace& a, const ReplayProfile& pa, const Trace& b, const ReplayProfile& pb) {
  TraceDivergence d;
  const std::vector<std::int64_t> ra = freed_ordinals(a), rb = freed_ordinals(b);
  const size_t common = std::min(a.events.size(), b.events.size());
  for (size_t i = 0; i < common; ++i) {
    if (!same_event(a, a.events[i], ra[i], b, b.events[i], rb[i])) {
      d.input_event = i;
      break;
    }
  }
  if (!d.input_event && a.events.size() != b.events.size()) d.input_event = common;
  const size_t states = std::min(pa.timeline.size(), pb.timeline.size());
  for (size_t i = 0; i < states; ++i) {
    if (pa.timeline[i].reserved != pb.timeline[i].reserved) {
      d.reserved_event = i;
      break;
    }
  }
  return d;
}

TraceDiff diff_traces(const Trace& a, const Trace& b, const std::string& spec, const DeviceSpec& device,
                      const ReplayOptions& options, const ReplayProgress& progress_a,
                      const ReplayProgress& progress_b) {
  TraceDiff diff;
  diff.policy = spec;
  diff.name_a = a.name;
  diff.name_b = b.name;
  // The two replays are independent (own device, own policy, read-only traces): run them at once.
  std::exception_ptr error_b;
  {
    std::jthread other([&] {
      try {
        diff.b = profile_replay(b, spec, device, options, progress_b);
      } catch (...) {
        error_b = std::current_exception();
      }
    });
    diff.a = profile_replay(a, spec, device, options, progress_a);
  }
  if (error_b) std::rethrow_exception(error_b);
  diff.divergence = first_divergence(a, diff.a, b, diff.b);
  return diff;
}

std::string describe_event(const Trace& trace, std::uint64_t index) {
  if (index >= trace.events.size()) return fmt::format("the trace has ended ({} events)", trace.events.size());
  // The step and phase in force: the latest marks before the event.
  std::string step, phase;
  for (std::uint64_t i = 0; i <= index; ++i) {
    const Event& m = trace.events[i];
    if (m.op != Op::Mark) continue;
    const std::string_view label = trace.string_at(static_cast<std::uint32_t>(m.id));
    if (label == "step") step = unquote(trace.string_at(static_cast<std::uint32_t>(m.size)));
    if (label == "phase") phase = unquote(trace.string_at(static_cast<std::uint32_t>(m.size)));
  }
  const Event& e = trace.events[index];
  std::string what;
  switch (e.op) {
    case Op::Alloc:
      what = fmt::format("alloc {} ({} B)", format_bytes(e.size), e.size);
      if (e.tag != kNoString) what += fmt::format(" tag {}", trace.string_at(e.tag));
      if (e.stream != 0) what += fmt::format(" stream {}", e.stream);
      break;
    case Op::Free:
    case Op::FreeRequested:
    case Op::FreeCompleted:
      what = fmt::format("{} id {}", op_name(e.op), e.id);
      break;
    case Op::Mark:
      what = fmt::format("mark {}={}", trace.string_at(static_cast<std::uint32_t>(e.id)),
                         unquote(trace.string_at(static_cast<std::uint32_t>(e.size))));
      break;
    default:
      what = std::string(op_name(e.op));
      break;
  }
  std::string where;
  if (!step.empty()) where += "step " + step;
  if (!phase.empty()) where += fmt::format("{}phase {}", where.empty() ? "" : ", ", phase);
  return fmt::format("event {}: {}{}", index, what, where.empty() ? "" : " (" + where + ")");
}

}  // namespace fraglab
