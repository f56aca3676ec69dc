// Test helpers: walk a generated trace and measure it, independently of the generator's code.
//  - "requested" bytes: an allocation counts from its alloc until its free completes (the
//    definition of README "Metrics");
//  - "allocated" bytes: until the free is requested (what the program still uses).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "fraglab/trace.hpp"
#include "fraglab/workload.hpp"

namespace fraglab::testing {

inline constexpr std::uint64_t kGB = 1'000'000'000;

struct Position {
  std::int64_t step = 0;  // 0 before the first step mark
  std::string phase;
};

// Walks the events, tracking live allocations, the current step/phase and per-tag bytes.
class TraceWalk {
 public:
  explicit TraceWalk(const Trace& t) : t_(t) {}

  // Calls f(event index, position) after applying each event.
  template <typename F>
  void run(F&& f) {
    for (std::size_t i = 0; i < t_.events.size(); ++i) {
      const Event& e = t_.events[i];
      switch (e.op) {
        case Op::Mark: {
          const std::string label(t_.string_at(static_cast<std::uint32_t>(e.id)));
          std::string value(t_.string_at(static_cast<std::uint32_t>(e.size)));
          if (label == "step") {
            pos.step = std::stoll(value);
            pos.phase.clear();
          }
          if (label == "phase") pos.phase = value.substr(1, value.size() - 2);
          break;
        }
        case Op::Alloc:
          live[e.id] = {e.size, e.tag == kNoString ? std::string() : std::string(t_.string_at(e.tag)), e.stream, false};
          requested += e.size;
          allocated += e.size;
          allocated_by_tag[live[e.id].tag] += e.size;
          break;
        case Op::FreeRequested: {
          Live& l = live.at(e.id);
          l.requested_free = true;
          allocated -= l.size;
          allocated_by_tag[l.tag] -= l.size;
          break;
        }
        case Op::Free:
        case Op::FreeCompleted: {
          const Live l = live.at(e.id);
          live.erase(e.id);
          requested -= l.size;
          if (!l.requested_free) {
            allocated -= l.size;
            allocated_by_tag[l.tag] -= l.size;
          }
          break;
        }
        default:
          break;
      }
      f(i, e);
    }
  }

  struct Live {
    Bytes size = 0;
    std::string tag;
    StreamId stream = 0;
    bool requested_free = false;
  };
  Position pos;
  std::unordered_map<AllocId, Live> live;
  Bytes requested = 0, allocated = 0;
  std::map<std::string, Bytes> allocated_by_tag;

 private:
  const Trace& t_;
};

// Most bytes requested at once from the first event of step `from_step` on.
inline Bytes peak_requested_from(const Trace& t, std::int64_t from_step, const char* phase = nullptr) {
  TraceWalk w(t);
  Bytes peak = 0;
  w.run([&](std::size_t, const Event& e) {
    if (e.op != Op::Alloc || w.pos.step < from_step) return;
    if (phase != nullptr && w.pos.phase != phase) return;
    peak = std::max(peak, w.requested);
  });
  return peak;
}

// Most bytes allocated (held by the program: frees count when requested) in a phase of steps >= from_step.
inline Bytes peak_allocated_from(const Trace& t, std::int64_t from_step, const char* phase) {
  TraceWalk w(t);
  Bytes peak = 0;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Alloc && w.pos.step >= from_step && w.pos.phase == phase) peak = std::max(peak, w.allocated);
  });
  return peak;
}

// Allocated bytes per tag when the mark (step, phase) is reached.
inline std::map<std::string, Bytes> allocated_at(const Trace& t, std::int64_t step, const std::string& phase) {
  TraceWalk w(t);
  std::optional<std::map<std::string, Bytes>> at;
  w.run([&](std::size_t, const Event& e) {
    if (!at && e.op == Op::Mark && w.pos.step == step && w.pos.phase == phase) at = w.allocated_by_tag;
  });
  return at.value_or(std::map<std::string, Bytes>{});
}

inline Bytes model_state_bytes(const std::map<std::string, Bytes>& by_tag) {
  auto get = [&](const char* k) { return by_tag.count(k) ? by_tag.at(k) : 0; };
  return get("param") + get("grad") + get("opt");
}

// The options of workload-model §5.1: N=2, bf16, block recomputation, FSDP1 FULL_SHARD.
inline WorkloadOptions reference_options(const std::string& model, std::uint32_t micro_batch, std::uint32_t steps = 2) {
  WorkloadOptions o;
  o.model = builtin_model(model);
  o.framework = Framework::Fsdp1;
  o.world_size = 2;
  o.micro_batch = micro_batch;
  o.steps = steps;
  return o;
}

}  // namespace fraglab::testing
