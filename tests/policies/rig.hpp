// Test rig for allocator policies: replays a hand-built trace through a policy spec on a fresh
// SimDevice with the invariant checker attached, and keeps what a test wants to assert: the
// address each alloc got, every device call, the metrics and any invariant violation.
//
// Addresses: the SimDevice places ranges with a bump pointer from kBaseAddress (2 MiB aligned for
// ranges of at least a page), so expected addresses can be derived by hand.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fraglab/invariants.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"
#include "support/events.hpp"

namespace fraglab::test {

inline constexpr Addr kBase = SimDevice::kBaseAddress;

struct DeviceCallRecord {
  DeviceCall call;
  Addr addr;
  Bytes size;
  bool operator==(const DeviceCallRecord&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const DeviceCallRecord& c) {
  static const char* names[] = {"Malloc", "Free", "Map", "Unmap", "MapAlias", "UnmapAlias"};
  return os << names[static_cast<int>(c.call)] << "(0x" << std::hex << c.addr << std::dec << ", " << c.size << ")";
}

struct CallLog final : DeviceListener {
  std::vector<DeviceCallRecord> calls;
  void on_device_call(DeviceCall call, Addr addr, Bytes size) override { calls.push_back({call, addr, size}); }
};

// Collects the block of every alloc event (nullopt for OOM and other events).
struct BlockLog final : ReplayObserver {
  std::vector<std::optional<Block>> blocks;
  void on_start(const Trace& trace, const Policy&) override { blocks.assign(trace.events.size(), std::nullopt); }
  void on_event(const ReplayPoint& p) override {
    if (p.block != nullptr) blocks[p.event_index] = *p.block;
  }
};

struct PolicyRun {
  ReplayResult result;
  std::vector<std::optional<Block>> blocks;  // per event index
  std::vector<DeviceCallRecord> calls;       // device calls during the events (not the start state)
  std::vector<std::string> violations;
  Bytes reserved_at_end = 0;

  // The address the alloc at event `index` got (fails the test when it got none).
  Addr addr(std::size_t index) const {
    EXPECT_LT(index, blocks.size());
    if (index >= blocks.size() || !blocks[index]) {
      ADD_FAILURE() << "event " << index << " got no block";
      return 0;
    }
    return blocks[index]->addr;
  }
};

inline Trace make_trace(std::vector<Event> events, std::initializer_list<std::string> strings = {}) {
  Trace t;
  t.name = "hand-built";
  t.events = std::move(events);
  for (const std::string& s : strings) t.strings.push_back(s);
  return t;
}

// An alloc carrying a tag (an index into the trace's strings).
inline Event tagged_alloc(AllocId id, Bytes size, std::uint32_t tag, StreamId stream = 0) {
  Event e = alloc(id, size, stream);
  e.tag = tag;
  return e;
}

inline Event free_of(AllocId id) { return with_op(Op::Free, id); }

inline Event mark(std::uint32_t label, std::uint32_t value) {
  Event e;
  e.op = Op::Mark;
  e.id = label;
  e.size = value;
  return e;
}

// The InputError text creating `spec` gives, or "(no error)".
inline std::string spec_error(const std::string& spec) {
  SimDevice device;
  try {
    create_policy(spec, device);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

inline Event empty_cache_event() { return with_op(Op::EmptyCache, 0); }

// The invariant checker found nothing.
inline void expect_clean(const PolicyRun& run) { EXPECT_TRUE(run.violations.empty()) << run.violations.front(); }

// A seeded random single-stream trace of `steps` steps: 55 % allocs (one in `large_one_in` of
// 1 .. large_max bytes, the others of 1 .. small_max), 43 % frees of a random live allocation,
// 2 % empty_cache; at the end everything is freed and the cache emptied, so a policy must be
// back at 0 reserved.
inline std::vector<Event> random_alloc_free_events(std::uint64_t seed, Bytes small_max, Bytes large_max,
                                                   std::uint64_t large_one_in, int steps = 3000) {
  Rng rng(seed);
  std::vector<Event> events;
  std::vector<AllocId> live;
  AllocId next_id = 1;
  for (int i = 0; i < steps; ++i) {
    const std::uint64_t roll = rng.below(100);
    if (roll < 55 || live.empty()) {
      const Bytes size = rng.below(large_one_in) == 0 ? rng.below(large_max) + 1 : rng.below(small_max) + 1;
      events.push_back(alloc(next_id, size));
      live.push_back(next_id++);
    } else if (roll < 98) {
      const std::size_t k = rng.below(live.size());
      events.push_back(free_of(live[k]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      events.push_back(empty_cache_event());
    }
  }
  for (AllocId id : live) events.push_back(free_of(id));
  events.push_back(empty_cache_event());
  return events;
}

inline PolicyRun run_policy(const std::string& spec, const Trace& trace, Bytes capacity = 80 * GiB) {
  SimDevice device(SimDeviceConfig{capacity, 0});
  std::unique_ptr<Policy> policy = create_policy(spec, device);
  InvariantChecker checker(device);
  CallLog log;
  BlockLog blocks;
  Replayer replayer(trace, *policy, device);
  replayer.add_observer(&checker);
  replayer.add_observer(&blocks);
  struct StartCalls final : ReplayObserver {  // device calls count from event 0 on
    Device* device;
    CallLog* log;
    void on_start(const Trace&, const Policy&) override { device->add_listener(log); }
    void on_event(const ReplayPoint&) override {}
  } start;
  start.device = &device;
  start.log = &log;
  replayer.add_observer(&start);
  PolicyRun run;
  run.result = replayer.run(spec);
  device.remove_listener(&log);
  run.blocks = std::move(blocks.blocks);
  run.calls = std::move(log.calls);
  run.violations = checker.violations();
  run.reserved_at_end = device.reserved();
  return run;
}

}  // namespace fraglab::test
