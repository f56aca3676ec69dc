// run_replay and PolicyOnDevice: see fraglab/run_replay.hpp.
#include "fraglab/run_replay.hpp"

#include <memory>
#include <optional>

#include "fraglab/anatomy.hpp"
#include "fraglab/invariants.hpp"
#include "fraglab/timeline.hpp"

namespace fraglab {
namespace {

// Reports progress every `every` events and once when the replay ends. One counter compare per
// event, so attaching it costs nothing measurable.
class ProgressObserver final : public ReplayObserver {
 public:
  ProgressObserver(const ReplayProgress& report, std::uint64_t every)
      : report_(report), every_(every > 0 ? every : 1) {}

  void on_start(const Trace& trace, const Policy& /*policy*/) override { total_ = trace.events.size(); }
  void on_event(const ReplayPoint& /*point*/) override {
    if (++done_ % every_ == 0) report_(done_, total_);
  }
  void on_finish() override { report_(done_, total_); }

 private:
  const ReplayProgress& report_;
  std::uint64_t every_;
  std::uint64_t done_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace

PolicyOnDevice::PolicyOnDevice(std::string_view policy_spec, const DeviceSpec& device)
    : spec_(policy_spec),
      device_spec_(device),
      device_(make_device(device)),
      policy_(create_policy(policy_spec, *device_)) {}

ReplayResult PolicyOnDevice::run(const Trace& trace, const ReplayOptions& options, const ReplayObservers& observers) {
  ReplayResult result;
  bool anatomy_pass = false;
  {
    Replayer replayer(trace, *policy_, *device_, options);
    if (observers.timeline != nullptr) replayer.add_observer(observers.timeline);
    for (ReplayObserver* observer : observers.extra) replayer.add_observer(observer);
    // Registers itself with the device for the run, and unregisters when it goes out of scope.
    std::optional<InvariantChecker> checker;
    if (observers.check_invariants) replayer.add_observer(&checker.emplace(*device_));
    std::optional<ProgressObserver> progress;
    if (observers.progress) replayer.add_observer(&progress.emplace(observers.progress, observers.progress_every));
    std::optional<AnatomyAtPeak> anatomy;
    if (observers.anatomy) replayer.add_observer(&anatomy.emplace(*device_));

    result = replayer.run(spec_);
    if (anatomy && !anatomy->stale()) result.anatomy_at_peak = anatomy->anatomy();
    anatomy_pass = anatomy && anatomy->stale();
    if (checker) {
      result.invariant_violations = checker->violation_count();
      result.invariant_messages = checker->violations();
    }
  }
  if (anatomy_pass) {
    // Too many new peaks to look at each: the replay is deterministic, so a second one on a fresh
    // policy and device reaches the same state at the peak event. A real GPU cannot hold the
    // memory of both runs: there the first gives its memory back before the second, and the
    // second, which ends in the same state, takes its place.
    const bool one_at_a_time = device_spec_.is_cuda();
    if (one_at_a_time) {
      policy_.reset();
      device_.reset();
    }
    PolicyOnDevice again(spec_, device_spec_);
    AnatomyAtEvent at_peak(*again.device_, result.metrics.peak_reserved_event);
    ReplayObservers only_anatomy;
    only_anatomy.extra.push_back(&at_peak);
    again.run(trace, options, only_anatomy);
    result.anatomy_at_peak = at_peak.anatomy();
    if (one_at_a_time) {
      policy_ = std::move(again.policy_);
      device_ = std::move(again.device_);
    }
  }
  return result;
}

struct StreamedReplay::Impl {
  Impl(std::string_view policy_spec, const DeviceSpec& device, const Trace& header, const ReplayOptions& options)
      : run(policy_spec, device), replayer(header, run.policy(), run.device(), options), spec(policy_spec) {}
  PolicyOnDevice run;
  Replayer replayer;
  std::string spec;
  std::optional<InvariantChecker> checker;
  std::optional<ProgressObserver> progress;
  std::optional<AnatomyAtPeak> anatomy;
  std::optional<AnatomyAtEvent> at_event;
};

StreamedReplay::StreamedReplay(std::string_view policy_spec, const DeviceSpec& device, const Trace& header,
                               const ReplayOptions& options, const ReplayObservers& observers,
                               std::optional<std::int64_t> anatomy_at)
    : impl_(std::make_unique<Impl>(policy_spec, device, header, options)) {
  Impl& s = *impl_;
  // The observers of PolicyOnDevice::run, in its order.
  if (observers.timeline != nullptr) s.replayer.add_observer(observers.timeline);
  for (ReplayObserver* observer : observers.extra) s.replayer.add_observer(observer);
  if (observers.check_invariants) s.replayer.add_observer(&s.checker.emplace(s.run.device()));
  if (observers.progress) s.replayer.add_observer(&s.progress.emplace(observers.progress, observers.progress_every));
  if (observers.anatomy) s.replayer.add_observer(&s.anatomy.emplace(s.run.device()));
  if (anatomy_at) s.replayer.add_observer(&s.at_event.emplace(s.run.device(), *anatomy_at));
  s.replayer.start(s.spec);
}

StreamedReplay::~StreamedReplay() = default;

void StreamedReplay::feed(std::span<const Event> events) { impl_->replayer.feed(events); }

ReplayResult StreamedReplay::finish() {
  Impl& s = *impl_;
  ReplayResult result = s.replayer.finish();
  if (s.anatomy && !s.anatomy->stale()) result.anatomy_at_peak = s.anatomy->anatomy();
  if (s.at_event) result.anatomy_at_peak = s.at_event->anatomy();
  if (s.checker) {
    result.invariant_violations = s.checker->violation_count();
    result.invariant_messages = s.checker->violations();
  }
  return result;
}

bool StreamedReplay::needs_anatomy_pass() const { return impl_->anatomy && impl_->anatomy->stale(); }

ReplayResult run_replay(const Trace& trace, std::string_view policy_spec, const DeviceSpec& device,
                        const ReplayOptions& options, const ReplayObservers& observers) {
  return PolicyOnDevice(policy_spec, device).run(trace, options, observers);
}

void check_policy_spec(std::string_view policy_spec, const DeviceSpec& device) {
  const PolicyOnDevice scratch(policy_spec, device);
}

}  // namespace fraglab
