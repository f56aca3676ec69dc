// Running one policy over a trace the way replay and compare do: a fresh device per run, the
// invariant checker attached on request.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/common.hpp"
#include "fraglab/invariants.hpp"
#include "fraglab/policy.hpp"

namespace fraglab::cli {

ReplayResult replay_policy(const Trace& trace, const std::string& spec, const RunSettings& settings,
                           ReplayObserver* extra) {
  std::unique_ptr<Device> device = make_device(settings.device_spec);
  std::unique_ptr<Policy> policy = create_policy(spec, *device);
  Replayer replayer(trace, *policy, *device, settings.replay);
  if (extra != nullptr) replayer.add_observer(extra);
  std::unique_ptr<InvariantChecker> checker;
  if (settings.check_invariants) {
    checker = std::make_unique<InvariantChecker>(*device);
    replayer.add_observer(checker.get());
  }
  ReplayResult result = replayer.run(spec);
  if (checker) {
    result.invariant_violations = checker->violation_count();
    result.invariant_messages = checker->violations();
  }
  return result;
}

std::vector<std::string> default_policy_specs(const Trace& trace, std::vector<std::string>& skipped) {
  const bool tagged = std::any_of(trace.events.begin(), trace.events.end(),
                                  [](const Event& e) { return e.op == Op::Alloc && e.tag != kNoString; });
  std::vector<std::string> specs;
  for (const PolicyInfo* info : PolicyRegistry::instance().all()) {
    if (info->needs_tags && !tagged) {
      skipped.push_back(
          fmt::format("{}: left out: it packs tagged tensors and trace '{}' has no tags", info->name, trace.name));
      continue;
    }
    specs.push_back(info->name);
  }
  return specs;
}

bool report_invariant_violations(const std::vector<ReplayResult>& runs) {
  bool any = false;
  for (const ReplayResult& r : runs) {
    if (!r.invariant_violations || *r.invariant_violations == 0) continue;
    any = true;
    std::cerr << fmt::format("{}: {} invariant violation(s)\n", r.policy, *r.invariant_violations);
    for (const std::string& m : r.invariant_messages) std::cerr << fmt::format("{}: {}\n", r.policy, m);
  }
  return any;
}

}  // namespace fraglab::cli
