// fraglab check TRACE --baseline FILE [-p SPEC]... [--max-regress M=V]... [--max M=V]...
//               [--results FILE] [--update-baseline] [--allow-trace-change] [--json FILE] [--junit FILE]
// The CI gate: replays TRACE (or takes a results JSON), compares with the baseline results JSON,
// exits 1 with a table of what regressed (or when the trace is not the baseline's), 0 when
// everything is within its limits, 2 on bad input.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/check.hpp"
#include "fraglab/check_report.hpp"
#include "fraglab/input_file.hpp"
#include "fraglab/memory_budget.hpp"
#include "fraglab/run_replay.hpp"

namespace fraglab::cli {
namespace {

nlohmann::json read_json(const std::string& path, const char* what) {
  const bool is_baseline = std::string(what) == "baseline";
  const std::string expected = fmt::format("the {} as a results JSON (fraglab replay --json{})", what,
                                           is_baseline ? ", check --update-baseline" : "");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError(
        fmt::format("{}: cannot read the {}{}", path, what, is_baseline ? " (record one with --update-baseline)" : ""));
  }
  // The parsed document takes many times the text's size: the text may use a fraction of the budget.
  const std::string text = read_input_file(path, expected, memory_budget() / kJsonDomExpansion);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const JsonErrorAt error = locate_json_error(text, e.byte, e.what());
    throw InputError(fmt::format("{}:{}:{}: the {} is not valid JSON ({}); expected {}", path, error.line, error.column,
                                 what, error.what, expected));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: the {} is not valid JSON; expected {}", path, what, expected));
  }
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array()) {
    throw InputError(fmt::format("{}: the {} has no \"runs\" list (expected the results JSON of fraglab replay --json)",
                                 path, what));
  }
  try {
    require_results_shape(j, what);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  check_results_numbers(j, path);
  return j;
}

// The device the baseline was measured on, as a spec string ("sim:85899345920B,external:0B").
std::string baseline_device(const nlohmann::json& baseline) {
  const auto& d = baseline.value("device", nlohmann::json::object());
  if (d.value("kind", "") != "sim" || !d.contains("capacity_bytes")) return "sim";
  return fmt::format("sim:{}B,external:{}B", d["capacity_bytes"].get<Bytes>(), d.value("external_bytes", Bytes{0}));
}

}  // namespace

int cmd_check(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, baseline_path, results_path, device_spec, json_path, junit_path, start_option;
  std::vector<std::string> specs, max_regress, max, ignored;
  int device_index = -1;
  options.add_options()("trace", po::value(&trace_path), "trace to replay (not needed with --results)")(
      "baseline,b", po::value(&baseline_path)->required(),
      "baseline results JSON (as written by fraglab replay --json)")(
      "policy,p", po::value(&specs)->composing(), "policy spec to replay, repeatable (default: the baseline's runs)")(
      "results", po::value(&results_path), "compare this results JSON instead of replaying a trace")(
      "max-regress", po::value(&max_regress)->composing(),
      "METRIC=N% or METRIC=AMOUNT: the most METRIC may get worse than the baseline, e.g. peak_reserved=2%, "
      "peak_reserved=256MiB, fragmentation_at_peak=0.01 (repeatable)")(
      "max", po::value(&max)->composing(), "METRIC=VALUE: a ceiling on the value itself, e.g. num_alloc_retries=0")(
      "ignore", po::value(&ignored)->composing(), "METRIC: report but do not gate (drops its default limit)")(
      "device", po::value(&device_spec), "device (default: the baseline's)")(
      "device-index", po::value(&device_index), "snapshot device to read (multi-GPU snapshots)")(
      "update-baseline", "write the results to --baseline FILE instead of comparing")(
      "allow-trace-change", "compare even when the trace is not the one the baseline was recorded from")(
      "json", po::value(&json_path), "also write the outcome as JSON to FILE (- for stdout)")(
      "junit", po::value(&junit_path), "also write the outcome as JUnit XML to FILE (- for stdout)")(
      "check-invariants",
      "check every replay with the invariant checker (as fraglab replay does); exit 1 on a violation")(
      "start-state", po::value(&start_option),
      "recorded|cold|auto: where replays of a trace that begins mid-run start (default: the baseline's "
      "start_state, else auto; see fraglab replay --help)");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab check TRACE --baseline FILE [-p SPEC]... [--max-regress METRIC=N%|AMOUNT]...\n"
      "                     [--max METRIC=VALUE]... [--update-baseline] [--allow-trace-change]\n"
      "                     [--json FILE] [--junit FILE]\n"
      "       fraglab check --results RESULTS.json --baseline FILE ...\n"
      "Replays TRACE and compares each run with the baseline. Exit 0 within limits, 1 when a metric\n"
      "regressed, a run is missing or the trace is not the baseline's (its request hash or event count\n"
      "differs; --allow-trace-change accepts that), 2 on bad input. Default limits: peak_reserved_bytes,\n"
      "num_alloc_retries and num_ooms may not rise at all; a limit given for a metric replaces its default.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;

  Thresholds thresholds;
  for (const std::string& t : max_regress) thresholds.add_max_regress(t);
  for (const std::string& t : max) thresholds.add_max(t);
  for (const std::string& m : ignored) thresholds.ignore(m);
  if (results_path.empty() == trace_path.empty()) {
    throw InputError("give either a TRACE to replay or --results FILE, not both or neither");
  }

  if (!results_path.empty() && vm.count("check-invariants")) {
    throw InputError("--check-invariants checks replays, and --results replays nothing: give a TRACE instead");
  }
  const bool update = vm.count("update-baseline") > 0;
  if (update && (!json_path.empty() || !junit_path.empty())) {
    throw InputError("--json and --junit report a comparison; --update-baseline does not compare");
  }
  if (!json_path.empty() && json_path == junit_path) {
    throw InputError(fmt::format("--json and --junit both name {}: give each its own file", json_path));
  }
  nlohmann::json baseline;
  const bool have_baseline = std::filesystem::exists(baseline_path);
  if (!update || have_baseline) baseline = read_json(baseline_path, "baseline");

  nlohmann::json current;
  bool invariants_broken = false;  // --check-invariants found a violation (exit 1 whatever the gate says)
  std::string device_text;         // "; device sim, capacity 80.00 GiB (default)" when a trace was replayed
  if (!results_path.empty()) {
    current = read_json(results_path, "results");
  } else {
    if (specs.empty() && have_baseline && baseline.contains("runs")) {
      for (const auto& run : baseline["runs"]) specs.push_back(run.value("policy", ""));
    }
    if (specs.empty())
      throw InputError(fmt::format("{}: no baseline runs to repeat; name policies with -p", baseline_path));
    // The device: --device, else the baseline's, else what replay would choose (device_choice.hpp).
    const bool from_baseline = device_spec.empty() && have_baseline;
    if (from_baseline) device_spec = baseline_device(baseline);
    const std::optional<std::string> device_option = device_spec.empty() ? std::nullopt : std::optional(device_spec);
    const DeviceSpec early_device = choose_device(device_option).device;
    for (const std::string& spec : specs) check_policy_spec(spec, early_device);  // before the trace is read
    const TraceReadOptions read_options{.device_index = device_index};
    // Like is compared with like: the baseline's start state unless told otherwise.
    if (start_option.empty()) {
      start_option = have_baseline && baseline.contains("start_state") && baseline["start_state"].is_string()
                         ? baseline["start_state"].get<std::string>()
                         : "auto";
    }
    check_start_state_option(start_option);
    const Trace trace = load_trace(trace_path, read_options);
    ReplayOptions replay;
    replay.start_state = choose_start_state(start_option, trace, specs);
    DeviceChoice choice = choose_device(device_option, trace);
    if (from_baseline) {
      const auto recorded = baseline.value("device", nlohmann::json::object());
      choice.source = recorded.value("capacity_source", std::string("baseline"));
      choice.label = "sim";  // not the spec rebuilt from the baseline's bytes
    }
    std::vector<ReplayResult> runs;
    // A baseline is the results JSON `replay --json` writes, anatomy included; a comparison gates
    // on other metrics and skips it.
    for (const std::string& spec : specs) {
      const ReplayObservers observers{
          .check_invariants = vm.count("check-invariants") > 0, .progress = terminal_progress(spec), .anatomy = update};
      runs.push_back(run_replay(trace, spec, choice.device, replay, observers));
    }
    invariants_broken = report_invariant_violations(runs);
    mark_recorded_settings(trace, runs);
    current = results_json(trace, summarize(trace), device_description(choice), runs);
    device_text = fmt::format("; device {}", describe_choice(choice));
  }

  if (update) {
    if (invariants_broken) {  // a policy that broke an invariant measures nothing worth gating on
      log::error(fmt::format("check: {} not written: a replay broke an invariant", baseline_path));
      return 1;
    }
    write_output(baseline_path, current.dump(2) + "\n");
    std::cout << fmt::format("wrote baseline {} ({} run{})\n", baseline_path, current["runs"].size(),
                             current["runs"].size() == 1 ? "" : "s");
    return 0;
  }
  CheckOptions check_options;
  check_options.allow_trace_change = vm.count("allow-trace-change") > 0;
  const CheckOutcome outcome = check_results(baseline, current, thresholds, check_options);
  for (const std::string& w : outcome.warnings) log::warn("check: warning: " + w);
  // With a machine report on stdout, the table goes to stderr so stdout stays parseable.
  std::ostream& table = json_path == "-" || junit_path == "-" ? std::cerr : std::cout;
  table << fmt::format("check {} against {}{}\n", results_path.empty() ? trace_path : results_path, baseline_path,
                       device_text);
  table << check_table(outcome);
  table.flush();
  if (!json_path.empty()) write_output(json_path, check_json(outcome));
  if (!junit_path.empty()) write_output(junit_path, check_junit(outcome));
  return outcome.passed() && !invariants_broken ? 0 : 1;
}

}  // namespace fraglab::cli
