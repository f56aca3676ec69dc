// fraglab compare TRACE [-p SPEC]... [--json FILE|-]: every policy (or those given) on one trace,
// side by side with the lower bound.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"

namespace fraglab::cli {

int cmd_compare(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, device_spec, json_path, start_option;
  std::vector<std::string> specs;
  int device_index = -1;
  options.add_options()("trace", po::value(&trace_path)->required(),
                        "trace file: fraglab JSONL (.gz ok) or a PyTorch snapshot pickle")(
      "policy,p", po::value(&specs)->composing(),
      "policy spec NAME[:OPTIONS], repeatable (default: every policy at its defaults, plus "
      "pytorch:expandable_segments:True)")(
      "device", po::value(&device_spec),
      "device: sim[:CAPACITY][,external:BYTES], e.g. sim:80GiB: your GPU's memory (default: reserved + device_free "
      "at the trace's recorded oom, else 80GiB)")("device-index", po::value(&device_index),
                                                  "snapshot device to read (multi-GPU snapshots)")(
      "json", po::value(&json_path),
      "write the results JSON (with lower_bound_bytes and overheads) to FILE (- for stdout)")(
      "stats", "add each policy's detailed statistics to the JSON")(
      "anatomy",
      "also print each run's fragmentation anatomy at its peak: reserved - requested split into rounding, usable "
      "cached free, stream-bound, oversize-locked, small-pool and other bytes")(
      "check-invariants", "check every replay with the invariant checker; exit 1 on a violation")(
      "start-state", po::value(&start_option)->default_value("auto"), kStartStateHelp)(
      "timing", "add each run's replay time in seconds (not deterministic)")(
      "no-timing", "accepted and ignored: timing is off unless --timing (kept so older scripts run)");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab compare TRACE [-p SPEC]... [--device sim:80GiB] [--json FILE|-] [--anatomy]\n"
      "Replays TRACE through every policy (or those given) on identical fresh devices and prints them side by\n"
      "side, sorted by peak reserved (runs that hit OOM last), with the lower bound no policy can beat:\n"
      "peak requested bytes. over_bound = peak_reserved / lower_bound - 1.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;

  const std::optional<std::string> device_option = vm.count("device") ? std::optional(device_spec) : std::nullopt;
  const DeviceSpec early_device = choose_device(device_option).device;
  for (const std::string& spec : specs) check_policy_spec(spec, early_device);  // before a long trace loads
  check_start_state_option(start_option);
  const Trace trace = load_trace(trace_path, TraceReadOptions{.device_index = device_index});
  const TraceSummary summary = summarize(trace);
  std::vector<std::string> skipped;
  if (specs.empty()) {
    specs = default_policy_specs(trace, skipped);
    specs.emplace_back("pytorch:expandable_segments:True");
  }
  // On a recorded run, what the job did is a row of its own: the baseline to compare against.
  if (const std::optional<std::string> recorded = recorded_spec(trace)) {
    const bool listed =
        std::any_of(specs.begin(), specs.end(), [&](const std::string& s) { return same_policy(s, *recorded); });
    if (!listed) specs.push_back(*recorded);
  }
  const DeviceChoice device = choose_device(device_option, trace);
  check_fits(device, trace.name, summary.peak_requested);
  warn_capacity_options(device, specs);

  ReplayOptions replay;
  replay.start_state = choose_start_state(start_option, trace, specs);
  replay.detailed_stats = vm.count("stats") > 0;  // read only by the report's --stats
  std::vector<ReplayResult> runs;
  runs.reserve(specs.size());
  for (const std::string& spec : specs) {
    ReplayObservers observers;
    observers.check_invariants = vm.count("check-invariants") > 0;
    observers.progress = terminal_progress(spec);
    observers.anatomy = !json_path.empty() || vm.count("anatomy") > 0;
    runs.push_back(run_replay(trace, spec, device.device, replay, observers));
  }
  mark_recorded_settings(trace, runs);
  warn_about_start(trace, runs);
  runs = order_for_comparison(std::move(runs));

  // Like replay: wall-clock figures only on request, so the default output is the same bytes on
  // every run.
  ReportOptions report;
  report.include_stats = vm.count("stats") > 0;
  report.include_timing = vm.count("timing") > 0;
  if (!json_path.empty()) {
    write_output(json_path, compare_json(trace, summary, device_description(device), runs, report).dump(2) + "\n");
  }
  if (json_path != "-") {
    std::cout << fmt::format("trace {}: {} events, {} allocs; device {}{}\n", trace.name, summary.events,
                             summary.allocs, describe_choice(device), start_state_header(trace, replay.start_state));
    std::cout << compare_table(summary, runs, report);
    if (vm.count("anatomy") > 0) {
      std::cout << '\n' << anatomy_table(runs);
    }
    for (const std::string& line : skipped) std::cout << line << '\n';
    for (const ReplayResult& r : runs) {
      if (!r.ooms.empty()) {
        std::cout << fmt::format("{}: {} out-of-memory; first at event {}: {}\n", r.policy, r.ooms.size(),
                                 r.ooms.front().event_index, r.ooms.front().message);
      }
    }
  }
  note_assumed_capacity_ooms(
      device, std::any_of(runs.begin(), runs.end(), [](const ReplayResult& r) { return r.metrics.num_ooms > 0; }));
  return report_invariant_violations(runs) ? 1 : 0;
}

}  // namespace fraglab::cli
