// `fraglab diff A B`: replays two traces (before and after a change) under the same policy and
// shows where they differ: overall, per step / phase (from `mark` events labelled "step" and
// "phase"), per allocation tag, and the first event at which the two timelines part.
//
// A ReplayProfile is what one replay looked like, gathered by a ReplayObserver (ProfileRecorder)
// from the state after every event; the diff is a pure function of two profiles and their traces.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fraglab/device_spec.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

// The events between marks that share one (step, phase) pair. A pair that comes back later
// (phase "forward" of the same step after a mark of another label) extends the same span.
struct SpanProfile {
  std::string step;               // value of the latest "step" mark, "" before the first
  std::string phase;              // value of the latest "phase" mark, "" before the first
  std::uint64_t first_event = 0;  // index of the mark that opened it (0 for the start)
  std::uint64_t events = 0;       // events other than marks
  Bytes peak_reserved = 0;        // after an event of the span
  Bytes peak_requested = 0;
  Bytes peak_allocated = 0;
  Bytes allocated_at_peak_reserved = 0;
  double fragmentation_at_peak() const;  // 1 - allocated/reserved when the span's reserved peaked
};

// Requested bytes of one allocation tag ("(untagged)" for allocs without one, "(initial)" for
// the allocations live when the trace starts), counted until the free completes.
struct TagProfile {
  std::string tag;
  std::uint64_t allocs = 0;
  Bytes peak_live = 0;              // most bytes of this tag live at once
  Bytes live_at_peak_reserved = 0;  // live when the replay's reserved bytes peaked
};

struct StatePoint {
  Bytes requested = 0;
  Bytes allocated = 0;
  Bytes reserved = 0;
};

struct ReplayProfile {
  ReplayResult result;
  std::vector<SpanProfile> spans;    // in order of first appearance
  std::vector<TagProfile> tags;      // by tag name
  std::vector<StatePoint> timeline;  // after each event
  std::int64_t peak_event = -1;      // first event after which reserved was highest (-1: the start)
};

// Gathers a ReplayProfile; add it to a Replayer, run, then take() with the run's result.
class ProfileRecorder final : public ReplayObserver {
 public:
  ProfileRecorder();
  ~ProfileRecorder() override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;
  ReplayProfile take(ReplayResult result);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The first place where two replays part.
// Not `Divergence`: validate.hpp has a struct of that name in this namespace, and two classes of
// one name in one program break the one-definition rule (the linker keeps one of their inline
// constructors for both).
struct TraceDivergence {
  // First event index at which the inputs differ: another op, size, stream, tag or mark, a free
  // of another allocation (compared by the alloc it frees, not by id), or one trace has ended.
  std::optional<std::uint64_t> input_event;
  // First event index after which reserved bytes differ.
  std::optional<std::uint64_t> reserved_event;
};

struct TraceDiff {
  std::string policy;
  std::string device;  // "sim, capacity 80.00 GiB (default)": named in the report's header when set
  std::string name_a, name_b;
  ReplayProfile a, b;
  TraceDivergence divergence;
};

// Replays one trace with a ProfileRecorder on a fresh device (run_replay).
ReplayProfile profile_replay(const Trace& trace, const std::string& spec, const DeviceSpec& device,
                             const ReplayOptions& options = {}, const ReplayProgress& progress = {});
TraceDivergence first_divergence(const Trace& a, const ReplayProfile& pa, const Trace& b, const ReplayProfile& pb);
// Replays both traces (on two threads) and compares them.
// Both start the same way (options.start_state).
// `progress_a` / `progress_b` (optional) follow each replay, each on its own thread.
TraceDiff diff_traces(const Trace& a, const Trace& b, const std::string& spec, const DeviceSpec& device,
                      const ReplayOptions& options = {}, const ReplayProgress& progress_a = {},
                      const ReplayProgress& progress_b = {});

// "alloc 40.00 MiB tag grad (step 0, phase backward)": one event in words, for reports.
std::string describe_event(const Trace& trace, std::uint64_t index);

}  // namespace fraglab
