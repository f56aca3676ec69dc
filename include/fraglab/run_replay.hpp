// run_replay: the one way a command, a sweep, a benchmark or validation replays a trace. It
// builds a fresh Device from its description and the Policy from its spec, attaches the
// observers asked for, runs the Replayer once and returns its result. Building happens once per
// run, never per event, so the loop costs what the Replayer alone costs.
//
// Observers compose (docs/architecture.md: behaviour added by composition): each is optional, and
// they see the events in this order: the extra observers in the order given (the timeline first),
// then the invariant checker, then the progress callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/device_spec.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

class TimelineWriter;

// Called with (events replayed so far, events in the trace).
using ReplayProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct ReplayObservers {
  // Attach an InvariantChecker (fraglab/invariants.hpp) to the run and its device; its count and
  // first messages go into ReplayResult::invariant_violations / invariant_messages.
  bool check_invariants = false;
  TimelineWriter* timeline = nullptr;
  // Called every `progress_every` events and once at the end (only when set).
  ReplayProgress progress = {};
  std::uint64_t progress_every = std::uint64_t{1} << 16;
  // Anything else that watches the run (a profile recorder, validation's call recorder).
  std::vector<ReplayObserver*> extra = {};
  // Compute ReplayResult::anatomy_at_peak (fraglab/anatomy.hpp): an observer that recomputes it at
  // each new peak of reserved, within a budget linear in the events; past it, a second replay of
  // the trace stops to look at the peak event. Off for sweeps (they do not report it).
  bool anatomy = false;
};

// A policy on its own fresh device, built from their descriptions, for the callers that need
// them around the run: validation hints the recorded addresses to the device before it and reads
// the policy's segments after it. run_replay() is this for everyone else. Movable; run() once.
class PolicyOnDevice {
 public:
  // Throws InputError (one line) on a bad policy spec.
  PolicyOnDevice(std::string_view policy_spec, const DeviceSpec& device);

  Device& device() { return *device_; }
  Policy& policy() { return *policy_; }
  const Policy& policy() const { return *policy_; }

  ReplayResult run(const Trace& trace, const ReplayOptions& options = {}, const ReplayObservers& observers = {});

 private:
  std::string spec_;
  DeviceSpec device_spec_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Policy> policy_;
};

// PolicyOnDevice::run for a trace whose events come in pieces (a trace streamed from its file,
// fraglab/trace_stream.hpp; Replayer::start/feed/finish): the same observers and the same result.
// `header` is the trace without its events (see Replayer::start for what that allows). When the
// anatomy was asked for and AnatomyAtPeak gave up, needs_anatomy_pass() is true and the result has
// none: stream the trace again through a StreamedReplay with `anatomy_at` = the peak event
// (Metrics::peak_reserved_event), as run() replays it again.
class StreamedReplay {
 public:
  StreamedReplay(std::string_view policy_spec, const DeviceSpec& device, const Trace& header,
                 const ReplayOptions& options = {}, const ReplayObservers& observers = {},
                 std::optional<std::int64_t> anatomy_at = std::nullopt);
  ~StreamedReplay();
  StreamedReplay(const StreamedReplay&) = delete;
  StreamedReplay& operator=(const StreamedReplay&) = delete;

  void feed(std::span<const Event> events);
  ReplayResult finish();
  bool needs_anatomy_pass() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One replay of `trace` under `policy_spec` on a fresh device described by `device`. Throws
// InputError (one line) on a bad policy spec.
ReplayResult run_replay(const Trace& trace, std::string_view policy_spec, const DeviceSpec& device,
                        const ReplayOptions& options = {}, const ReplayObservers& observers = {});

// Builds the policy once on a scratch device and drops it: the InputError run_replay would throw
// on a bad spec, before a long trace is read.
void check_policy_spec(std::string_view policy_spec, const DeviceSpec& device);

}  // namespace fraglab
