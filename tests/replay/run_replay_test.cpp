// run_replay, the one replay entry point: it gives what a Replayer built by hand gives, every
// observer it attaches sees every event, its invariant findings are the InvariantChecker's, and a
// bad policy spec or device description is a one-line InputError.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "fraglab/invariants.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/timeline.hpp"
#include "fraglab/trace_io.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

using test::alloc;
using test::with_op;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

// Hands out every block at the start of one 64 MiB arena: the second live block overlaps the
// first, which the checker must report. Registered here only, for this test binary.
class SameAddressPolicy final : public Policy {
 public:
  explicit SameAddressPolicy(Device& device) : device_(device) {}
  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    if (!arena_) arena_ = device_.malloc(64 * MiB);
    return Block{*arena_, size, size, stream, 0};
  }
  void free_requested(const Block&) override {}
  void free_completed(const Block&) override {}
  PolicyCounters counters() const override { return {}; }

 private:
  Device& device_;
  std::optional<Addr> arena_;
};

const PolicyRegistration kSameAddress{PolicyInfo{"test-same-address",
                                                 "test only: every block at one address",
                                                 "tests/replay/run_replay_test.cpp",
                                                 {},
                                                 [](std::string_view, Device& device) -> std::unique_ptr<Policy> {
                                                   return std::make_unique<SameAddressPolicy>(device);
                                                 }}};

// 1 MiB, then 2 MiB while the first is live, then both freed: two allocations live at once.
Trace two_live() {
  Trace t;
  t.name = "two-live";
  t.events = {alloc(1, 1 * MiB), alloc(2, 2 * MiB), with_op(Op::Free, 1), with_op(Op::Free, 2)};
  return t;
}

struct EventLog final : ReplayObserver {
  std::vector<std::uint64_t> indices;
  void on_event(const ReplayPoint& point) override { indices.push_back(point.event_index); }
};

TEST(RunReplay, GivesWhatAReplayerBuiltByHandGives) {
  const Trace trace = read_trace(kSamples + "two-phase.jsonl");
  for (const std::string spec : {"pytorch", "pytorch:expandable_segments:True", "nocache", "bestfit"}) {
    SimDevice device(parse_sim_device("sim:40GiB"));
    std::unique_ptr<Policy> policy = create_policy(spec, device);
    const ReplayResult by_hand = Replayer(trace, *policy, device).run(spec);
    const ReplayResult r = run_replay(trace, spec, parse_device_spec("sim:40GiB"));
    EXPECT_EQ(r.policy, spec);
    EXPECT_EQ(r.metrics.peak_reserved, by_hand.metrics.peak_reserved) << spec;
    EXPECT_EQ(r.metrics.peak_allocated, by_hand.metrics.peak_allocated) << spec;
    EXPECT_EQ(r.metrics.num_device_alloc, by_hand.metrics.num_device_alloc) << spec;
    EXPECT_EQ(r.metrics.fragmentation_at_peak, by_hand.metrics.fragmentation_at_peak) << spec;
    EXPECT_EQ(r.events_replayed, trace.events.size());
    EXPECT_FALSE(r.invariant_violations.has_value()) << "no checker was asked for";
  }
}

TEST(RunReplay, TheDeviceDescriptionSetsTheCapacity) {
  // nocache asks the device for exactly each request (rounded to 512 B): 2 MiB fits in 3 MiB, and
  // a 1 MiB request next to it does too, but not on a 2.5 MiB device.
  const Trace t = two_live();
  EXPECT_EQ(run_replay(t, "nocache", parse_device_spec("sim:3MiB")).metrics.num_ooms, 0u);
  const ReplayResult small = run_replay(t, "nocache", parse_device_spec("sim:2.5MiB"));
  EXPECT_EQ(small.metrics.num_ooms, 1u);
  ASSERT_EQ(small.ooms.size(), 1u);
  EXPECT_EQ(small.ooms[0].event_index, 1u);  // the 2 MiB request, with 1 MiB already held
}

TEST(RunReplay, InvariantViolationsAreTheCheckersOwn) {
  const Trace t = two_live();
  // The checker attached by hand to a Replayer built by hand.
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("test-same-address", device);
  InvariantChecker checker(device);
  Replayer replayer(t, *policy, device);
  replayer.add_observer(&checker);
  replayer.run("test-same-address");

  const ReplayResult r = run_replay(t, "test-same-address", DeviceSpec{}, {}, {.check_invariants = true});
  ASSERT_TRUE(r.invariant_violations.has_value());
  EXPECT_GT(*r.invariant_violations, 0u);  // event 1 puts a block on top of a live one
  EXPECT_EQ(*r.invariant_violations, checker.violation_count());
  EXPECT_EQ(r.invariant_messages, checker.violations());
  ASSERT_FALSE(r.invariant_messages.empty());
  EXPECT_NE(r.invariant_messages.front().find("event 1"), std::string::npos) << r.invariant_messages.front();

  // A policy that keeps them: counted, and zero.
  const ReplayResult clean = run_replay(t, "nocache", DeviceSpec{}, {}, {.check_invariants = true});
  ASSERT_TRUE(clean.invariant_violations.has_value());
  EXPECT_EQ(*clean.invariant_violations, 0u);
  EXPECT_TRUE(clean.invariant_messages.empty());
}

TEST(RunReplay, EveryObserverSeesEveryEvent) {
  const Trace t = two_live();
  EventLog first, second;
  std::ostringstream csv;
  TimelineWriter timeline(csv, "nocache");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> progress;
  ReplayObservers observers;
  observers.check_invariants = true;
  observers.timeline = &timeline;
  observers.extra = {&first, &second};
  observers.progress = [&](std::uint64_t done, std::uint64_t total) { progress.emplace_back(done, total); };
  observers.progress_every = 3;
  const ReplayResult r = run_replay(t, "nocache", DeviceSpec{}, {}, observers);

  const std::vector<std::uint64_t> all{0, 1, 2, 3};
  EXPECT_EQ(first.indices, all);
  EXPECT_EQ(second.indices, all);
  // One timeline row per event (every = 1), no header (the caller writes it once per file).
  const std::string rows = csv.str();
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 4) << rows;
  // Every 3 events, then once at the end.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected{{3, 4}, {4, 4}};
  EXPECT_EQ(progress, expected);
  EXPECT_EQ(r.invariant_violations, 0u);
}

TEST(RunReplay, PolicyOnDeviceLendsItsDeviceAndPolicy) {
  const Trace t = two_live();
  PolicyOnDevice replay("pytorch", parse_device_spec("sim:1GiB,external:256MiB"));
  EXPECT_EQ(replay.device().capacity(), 1 * GiB);
  EXPECT_EQ(replay.device().free_memory(), 768 * MiB);  // before the run: all but the external bytes
  const ReplayResult r = replay.run(t);
  // allocator-model §3: 1 MiB is a small request (<= 1 MiB) and gets a 2 MiB small segment; 2 MiB is a
  // large one under 10 MiB and gets a 20 MiB segment. Both stay cached after the frees, and the
  // lent device and policy still show them after the run.
  EXPECT_EQ(r.metrics.peak_reserved, 22 * MiB);
  EXPECT_EQ(replay.device().reserved(), 22 * MiB);
  std::vector<Bytes> sizes;
  for (const SegmentView& s : replay.policy().segments()) sizes.push_back(s.size);
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<Bytes>{2 * MiB, 20 * MiB}));
}

// The error text of a throwing call, which must be one line.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RunReplay, BadDescriptionsAreOneLineErrors) {
  EXPECT_EQ(error_of([] { parse_device_spec("gpu"); }),
            "--device 'gpu': unknown device (expected sim[:CAPACITY][,external:BYTES] or cuda[:N])");
  EXPECT_EQ(error_of([] { parse_device_spec("cuda:x"); }),
            "--device 'cuda:x': expected cuda or cuda:N, N a device ordinal (e.g. cuda:0)");
  // (What cuda:0 says depends on the build and the machine: tests/cuda covers it.)
  const std::string bad_size = error_of([] { parse_device_spec("sim:40"); });
  EXPECT_NE(bad_size.find("--device 'sim:40'"), std::string::npos) << bad_size;
  EXPECT_EQ(bad_size.find('\n'), std::string::npos) << bad_size;

  const Trace t = two_live();
  for (const std::string& text : {error_of([&] { run_replay(t, "no-such-policy", DeviceSpec{}); }),
                                  error_of([] { check_policy_spec("no-such-policy", DeviceSpec{}); })}) {
    EXPECT_NE(text.find("no-such-policy"), std::string::npos) << text;
    EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  }
  EXPECT_EQ(error_of([] { check_policy_spec("nocache", DeviceSpec{}); }), "(no error)");
}

TEST(DeviceSpec, TextOfAConfigurationParsesBackToIt) {
  const DeviceSpec spec = device_spec(SimDeviceConfig{.capacity = 3 * GiB, .external = 5 * MiB});
  EXPECT_EQ(spec.text, "sim:3221225472B,external:5242880B");
  const DeviceSpec back = parse_device_spec(spec.text);
  EXPECT_EQ(back.capacity(), 3 * GiB);
  EXPECT_EQ(back.external(), 5 * MiB);
  // The default description is the default sim device.
  EXPECT_EQ(DeviceSpec{}.capacity(), parse_device_spec("sim").capacity());
}

}  // namespace
}  // namespace fraglab
