// Which policies replay and compare run by default, and how they report invariant violations
// (the runs themselves go through run_replay, fraglab/run_replay.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "fraglab/policy.hpp"

namespace fraglab::cli {

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
    log::error(fmt::format("{}: {} invariant violation(s)", r.policy, *r.invariant_violations));
    for (const std::string& m : r.invariant_messages) log::error(fmt::format("{}: {}", r.policy, m));
  }
  return any;
}

}  // namespace fraglab::cli
