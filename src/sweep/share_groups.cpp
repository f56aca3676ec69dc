// ShareGroup / ShareGroups: see share_groups.hpp.
#include "share_groups.hpp"

namespace fraglab {

std::optional<ReplayResult> ShareGroup::answer(std::string_view spec) const {
  std::lock_guard lock(mutex_);
  if (finished_.empty()) return std::nullopt;
  // Any coverage of the policy parses its settings; parsed once, tested against each replay.
  const std::unique_ptr<SettingCoverage::Candidate> candidate = finished_.front().coverage->candidate(spec);
  if (!candidate) return std::nullopt;
  // Newest first: a sweep walks its grid in order, and the last replay is the likeliest to cover
  // the next setting.
  for (std::size_t k = finished_.size(); k-- > 0;) {
    const Finished& finished = finished_[k];
    if (!finished.coverage->covers(*candidate)) continue;
    const ReplayResult& from = finished.result;
    ReplayResult result;
    result.policy = std::string(spec);
    result.start_state = from.start_state;
    result.recorded_settings = from.recorded_settings;
    result.metrics = from.metrics;
    result.ooms = from.ooms;
    result.stopped_on_oom = from.stopped_on_oom;
    result.events_replayed = from.events_replayed;
    return result;
  }
  return std::nullopt;
}

void ShareGroup::add(std::unique_ptr<SettingCoverage> coverage, const ReplayResult& result) {
  if (!coverage) return;
  std::lock_guard lock(mutex_);
  finished_.push_back({std::move(coverage), result});
}

ShareGroup& ShareGroups::of(const SweepJob& job, const DeviceSpec& device) {
  std::lock_guard lock(mutex_);
  return groups_[{job.trace, device.text, job.start_state, std::string(policy_name(job.spec))}];
}

}  // namespace fraglab
