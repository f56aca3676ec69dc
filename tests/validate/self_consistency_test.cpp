// Self-consistency of validation: a replay of the pytorch policy is recorded the way PyTorch
// records a run (segment actions as entries before the request they served, alloc addresses,
// `oom` entries for failed requests, empty_cache() calls leaving only their bursts), and
// validate_replay() must reproduce that record exactly from what a snapshot would hold. This
// does not prove fidelity to PyTorch (the real snapshots do that); it proves the inference of
// what snapshots omit (flushes, retries, obtainable memory, VA ranges) under expandable
// segments, several streams, deferred frees, memory pressure and OOMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <string>

#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"

namespace fraglab {
namespace {

// Builds the record while the replay runs.
class Recorder final : public DeviceListener, public ReplayObserver {
 public:
  explicit Recorder(Trace& out) : out_(out) {}
  void on_device_call(DeviceCall call, Addr addr, Bytes size) override {
    if (!started_ || call > DeviceCall::Unmap) return;
    static constexpr Op kOps[] = {Op::SegmentAlloc, Op::SegmentFree, Op::SegmentMap, Op::SegmentUnmap};
    Event e;
    e.op = kOps[static_cast<int>(call)];
    e.addr = addr;
    e.size = size;
    e.has_addr = true;
    pending_.push_back(e);
  }
  void on_start(const Trace&, const Policy&) override { started_ = true; }
  void on_event(const ReplayPoint& p) override {
    Event e = *p.event;
    for (Event& s : pending_) s.stream = e.stream;
    out_.events.insert(out_.events.end(), pending_.begin(), pending_.end());
    pending_.clear();
    if (e.op == Op::EmptyCache || is_observed(e.op)) return;  // a record shows only the burst
    if (e.op == Op::Alloc) {
      if (p.block == nullptr) {  // the request failed: PyTorch records an oom entry instead
        Event oom;
        oom.op = Op::Oom;
        oom.size = e.size;  // sizes below are multiples of 512 above 1 MiB: already rounded
        oom.stream = e.stream;
        oom.addr = 0;
        out_.events.push_back(oom);
        failed_.push_back(e.id);
        return;
      }
      e.addr = p.block->addr;
      e.has_addr = true;
    }
    if (e.op != Op::Alloc && std::find(failed_.begin(), failed_.end(), e.id) != failed_.end()) return;
    out_.events.push_back(e);
  }

 private:
  Trace& out_;
  bool started_ = false;
  std::vector<Event> pending_;
  std::vector<AllocId> failed_;
};

Trace record(const Trace& input, const std::string& options, Bytes capacity) {
  Trace out;
  out.name = input.name + "-recorded";
  out.allocator_conf = options;
  out.allocator_conf_known = true;
  out.strings = input.strings;
  SimDevice device({.capacity = capacity, .external = 0});
  auto policy = create_policy(options.empty() ? "pytorch" : "pytorch:" + options, device);
  Recorder recorder(out);
  device.add_listener(&recorder);
  Replayer replayer(input, *policy, device);
  replayer.add_observer(&recorder);
  replayer.run("pytorch");
  return out;
}

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

struct Case {
  std::string sample;
  std::string options;
  Bytes capacity;
};

// "80GiB", "300MiB": the capacities below are whole GiB or whole MiB.
std::string capacity_text(Bytes capacity) {
  return capacity % GiB == 0 ? std::to_string(capacity / GiB) + "GiB" : std::to_string(capacity / MiB) + "MiB";
}

// Printed by gtest as the case's fields, not as its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.sample << " \"" << c.options << "\" " << capacity_text(c.capacity);
}

class SelfConsistency : public ::testing::TestWithParam<Case> {};

TEST_P(SelfConsistency, RecordedReplayValidatesExactly) {
  const Case& c = GetParam();
  const Trace input = read_trace(kSamples + c.sample);
  const Trace rec = record(input, c.options, c.capacity);
  const ValidationReport r = validate_replay(rec);
  EXPECT_TRUE(r.exact) << c.sample << " " << c.options << "\n" << validation_text(r);
  EXPECT_EQ(r.segment_events_matched, r.segment_events_recorded);
  EXPECT_GT(r.segment_events_recorded, 0u);
  std::printf(
      "[ info ] %s %s %llu MiB: %llu segment events, %llu retries, %llu empty_cache inferred, %llu ooms\n",
      c.sample.c_str(), c.options.c_str(), static_cast<unsigned long long>(c.capacity / MiB),
      static_cast<unsigned long long>(r.segment_events_recorded), static_cast<unsigned long long>(r.retries_simulated),
      static_cast<unsigned long long>(r.empty_cache_inferred), static_cast<unsigned long long>(r.ooms_recorded));
}

INSTANTIATE_TEST_SUITE_P(
    Samples, SelfConsistency,
    ::testing::Values(Case{"two-phase.jsonl", "", 80 * GiB},
                      Case{"two-phase.jsonl", "", 300 * MiB},  // memory pressure: a retry
                      Case{"two-phase.jsonl", "expandable_segments:True", 80 * GiB},
                      Case{"two-phase.jsonl", "expandable_segments:True", 240 * MiB},  // retries and ooms
                      Case{"two-phase.jsonl", "max_split_size_mb:21", 300 * MiB},
                      Case{"two-phase.jsonl", "roundup_power2_divisions:[1:4,>:8]", 80 * GiB},
                      Case{"streams.jsonl", "", 80 * GiB},  // two streams, deferred frees
                      Case{"streams.jsonl", "", 120 * MiB}, Case{"streams.jsonl", "expandable_segments:True", 80 * GiB},
                      Case{"streams.jsonl", "expandable_segments:True", 80 * MiB},  // retries
                      Case{"streams.jsonl", "max_split_size_mb:21", 90 * MiB}),
    // {"two-phase.jsonl", "expandable_segments:True", 240 MiB} -> two_phase_expandable_segments_True_240MiB
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      std::string name = c.sample.substr(0, c.sample.rfind(".jsonl"));
      // (Appended piece by piece: g++ 12 warns, wrongly, of an overlapping memcpy in "_" + string.)
      if (!c.options.empty()) name.append("_").append(c.options);
      name.append("_").append(capacity_text(c.capacity));
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// Too little memory for the sample's peak: requests fail, and the record holds oom entries.
TEST(SelfConsistencyOom, OutOfMemoryRunsValidate) {
  const Trace input = read_trace(kSamples + "two-phase.jsonl");
  for (const std::string& options : {std::string(), std::string("expandable_segments:True")}) {
    const Trace rec = record(input, options, 200 * MiB);
    const ValidationReport r = validate_replay(rec);
    EXPECT_GT(r.ooms_recorded, 0u) << options;
    EXPECT_TRUE(r.exact) << options << "\n" << validation_text(r);
  }
}

}  // namespace
}  // namespace fraglab
