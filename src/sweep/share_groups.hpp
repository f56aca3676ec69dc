// The finished replays of a sweep that later jobs may be answered from (run_sweep, runner.cpp).
//
// A replay's coverage (Policy::coverage) speaks only of replays of the same trace, from the same
// start state, on the same device, of the same policy: a group is one such combination, and a job
// is only ever answered from its own group. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fraglab/policy.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {

class ShareGroup {
 public:
  // The result of a finished replay whose coverage covers `spec`, as the job's own: Metrics, OOMs
  // and events replayed are the covering replay's, `policy` is `spec`; detailed_stats and notes,
  // which echo the covering setting, are left empty. nullopt: no finished replay covers it.
  std::optional<ReplayResult> answer(std::string_view spec) const;
  // A finished replay and its coverage (nullptr covers nothing and is not kept).
  void add(std::unique_ptr<SettingCoverage> coverage, const ReplayResult& result);

 private:
  struct Finished {
    std::unique_ptr<SettingCoverage> coverage;
    ReplayResult result;
  };
  mutable std::mutex mutex_;
  std::vector<Finished> finished_;
};

class ShareGroups {
 public:
  ShareGroup& of(const SweepJob& job, const DeviceSpec& device);

 private:
  std::mutex mutex_;
  // (trace, device text, start state, policy name) -> its group; std::map keeps references valid.
  std::map<std::tuple<const Trace*, std::string, StartState, std::string>, ShareGroup> groups_;
};

}  // namespace fraglab
