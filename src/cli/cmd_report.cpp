// fraglab report TRACE [-p SPEC]... [--device ...] -o report.html
// fraglab report SWEEP_RESULTS.csv|.jsonl -o report.html
// One self-contained HTML file (README "Report"): what each policy did over the trace, or what a
// sweep found. The page is rendered by src/report/html_report.cpp and html_sweep.cpp.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/frames.hpp"
#include "fraglab/html_report.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab::cli {
namespace {

// A sweep results file rather than a trace: CSV, or JSONL whose first line is the sweep's
// metadata or a results row (a trace's first line is its header or an event).
bool is_sweep_results(const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0) return true;
  if (path.size() < 6 || path.compare(path.size() - 6, 6, ".jsonl") != 0) return false;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  line.resize(32);
  in.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<std::size_t>(in.gcount()));
  return metadata_line(line, ResultsFormat::Jsonl).kind == MetadataKind::Sweep || line.starts_with("{\"trace\"");
}

}  // namespace

int cmd_report(int argc, char** argv) {
  po::options_description options("options");
  std::string input, output, device_spec, start_option;
  std::vector<std::string> specs;
  int device_index = -1;
  std::int64_t frames = 0;
  options.add_options()("input", po::value(&input)->required(),
                        "a trace (fraglab JSONL, .gz ok, or a PyTorch snapshot pickle), or a sweep results file "
                        "(.csv, or .jsonl written by fraglab sweep -o)")("output,o", po::value(&output)->required(),
                                                                         "the HTML file to write (- for stdout)")(
      "policy,p", po::value(&specs)->composing(),
      "policy spec NAME[:OPTIONS], repeatable (default: every policy at its defaults)")(
      "device", po::value(&device_spec),
      "device: sim[:CAPACITY][,external:BYTES] (default: reserved + device_free at the trace's recorded oom, else "
      "80GiB)")("device-index", po::value(&device_index), "snapshot device to read (multi-GPU snapshots)")(
      "start-state", po::value(&start_option)->default_value("auto"), kStartStateHelp)("frames", po::value(&frames),
                                                                                       kFramesHelp);
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab report TRACE [-p SPEC]... [--device sim:80GiB] -o report.html\n"
      "       fraglab report SWEEP.csv|SWEEP.jsonl -o report.html\n"
      "Writes one self-contained HTML file (no script, nothing fetched): for each policy, requested /\n"
      "allocated / reserved over the events with step and phase bands, retries, OOMs and the peak; the\n"
      "fragmentation anatomy at the peak and over time; the segment map and the largest live allocations at\n"
      "the peak, with their stack frames; the run's settings. For a sweep results\n"
      "file: peak reserved vs device calls of every setting, their Pareto front and the recommended\n"
      "PYTORCH_CUDA_ALLOC_CONF line.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;

  // The output is checked first, so an unwritable -o fails before a long replay: opened for
  // appending (an earlier report stays whole if the input then turns out bad), and removed again
  // if it did not exist and no page was written.
  struct NewFileGuard {
    std::string path;
    bool written = false;
    ~NewFileGuard() {
      if (!path.empty() && !written) std::filesystem::remove(path);
    }
  } guard;
  if (output != "-") {
    const bool existed = std::filesystem::exists(output);
    std::ofstream probe(output, std::ios::binary | std::ios::app);
    if (!probe) throw InputError(fmt::format("{}: cannot open for writing (-o)", output));
    if (!existed) guard.path = output;
  }
  auto emit = [&](const std::string& html) {
    guard.written = true;
    if (output == "-") {
      std::cout << html << std::flush;
      return;
    }
    std::ofstream file(output, std::ios::binary | std::ios::trunc);
    file << html;
    file.flush();
    if (!file) throw InputError(fmt::format("{}: write failed (-o)", output));
  };

  if (is_sweep_results(input)) {
    if (!specs.empty() || vm.count("device") || vm.count("device-index")) {
      throw InputError(fmt::format("{}: a sweep results file takes no -p, --device or --device-index", input));
    }
    std::ifstream probe(input, std::ios::binary);
    if (!probe) throw InputError(fmt::format("{}: cannot open (expected a sweep results file)", input));
    const ResultsTable table = read_results(input);
    emit(html_sweep_report(table, input));
    return 0;
  }

  const std::optional<std::string> device_option = vm.count("device") ? std::optional(device_spec) : std::nullopt;
  const DeviceSpec early_device = choose_device(device_option).device;
  for (const std::string& spec : specs) check_policy_spec(spec, early_device);
  check_start_state_option(start_option);
  // The page shows each live allocation's frames: kept by default, as many as reach past PyTorch's
  // own frames to the program's (--frames 0 reads a large snapshot faster, without them).
  const Trace trace = load_trace(
      input, TraceReadOptions{.device_index = device_index, .frames = frames_option(vm, frames, kDefaultFramesKept)});
  std::vector<std::string> skipped;
  if (specs.empty()) specs = default_policy_specs(trace, skipped);
  for (const std::string& line : skipped) log::note(line);
  const DeviceChoice device = choose_device(device_option, trace);
  warn_capacity_options(device, specs);
  ReplayOptions replay;
  replay.start_state = choose_start_state(start_option, trace, specs);
  replay.detailed_stats = false;  // the report shows none

  TraceReport report;
  report.trace_name = trace.name;
  report.trace_source = trace.source;
  report.summary = summarize(trace);
  report.device = describe_choice(device);
  report.start_state = std::string(start_state_name(replay.start_state));
  for (const std::string& spec : specs) {
    report.policies.push_back(gather_policy_report(trace, spec, device.device, replay));
  }
  emit(html_report(report));
  return 0;
}

}  // namespace fraglab::cli
