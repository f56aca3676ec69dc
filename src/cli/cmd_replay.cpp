// fraglab replay TRACE [-p SPEC]... [--device ...] [--json FILE|-] [--timeline FILE [--timeline-anatomy]] [--stats]
//                [--check-invariants] [--export-snapshot FILE]
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/replay_progress.hpp"
#include "cli/streamed_replay.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/snapshot_export.hpp"
#include "fraglab/timeline.hpp"

namespace fraglab::cli {

int cmd_replay(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, device_spec, json_path, timeline_path, start_option, export_path;
  std::vector<std::string> specs;
  int device_index = -1;
  std::int64_t frames = 0;
  std::uint64_t timeline_every = 1;
  double memory_fraction = -1;
  options.add_options()("trace", po::value(&trace_path)->required(),
                        "trace file: fraglab JSONL (.gz ok) or a PyTorch snapshot pickle")(
      "policy,p", po::value(&specs)->composing(),
      "policy spec NAME[:OPTIONS], repeatable (default: every policy at its defaults); e.g. "
      "pytorch:expandable_segments:True,max_split_size_mb:128")(
      "device", po::value(&device_spec),
      "device: sim[:CAPACITY][,external:BYTES], e.g. sim:80GiB: your GPU's memory (default: reserved + device_free "
      "at the trace's recorded oom, else 80GiB)")("device-index", po::value(&device_index),
                                                  "snapshot device to read (multi-GPU snapshots)")(
      "memory-fraction", po::value(&memory_fraction),
      "torch.cuda.set_per_process_memory_fraction for pytorch policies (adds per_process_memory_fraction)")(
      "json", po::value(&json_path), "write the results JSON to FILE (- for stdout)")(
      "timeline", po::value(&timeline_path), "write a CSV timeline (one row per event) to FILE")(
      "timeline-every", po::value(&timeline_every), "sample the timeline every N events (segment changes always kept)")(
      "timeline-anatomy",
      "add the fragmentation anatomy's six parts to every timeline row (README \"Fragmentation anatomy\")")(
      "stats", "print the policy's detailed statistics (torch.cuda.memory_stats() names for pytorch)")(
      "stop-on-oom", "end a replay at its first out-of-memory")(
      "start-state", po::value(&start_option)->default_value("auto"), kStartStateHelp)(
      "check-invariants",
      "check after every event that no live blocks overlap, blocks lie in reserved memory and are at least "
      "the request, and reserved <= capacity; exit 1 on a violation")(
      "timing", "add replay time and events/s (not deterministic)")(
      "export-snapshot", po::value(&export_path),
      "write the run (one -p) as a PyTorch memory snapshot pickle to FILE, for memory_viz and `fraglab validate`")(
      "frames", po::value(&frames), kFramesHelp);
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab replay TRACE [-p SPEC]... [--device sim:80GiB] [--json FILE|-] [--timeline FILE]\n"
      "Replays TRACE through each policy on a fresh simulated device and prints peak reserved memory,\n"
      "fragmentation at peak, retries and OOMs.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;

  const bool default_policies = specs.empty();
  if (vm.count("memory-fraction")) {
    for (std::string& spec : specs) {
      if (policy_name(spec) != "pytorch") continue;
      spec += spec.find(':') == std::string::npos ? ":" : ",";
      spec += fmt::format("per_process_memory_fraction:{}", memory_fraction);
    }
  }
  // Check every policy spec and the device first: a bad option fails before a long trace loads.
  const std::optional<std::string> device_option = vm.count("device") ? std::optional(device_spec) : std::nullopt;
  const DeviceSpec early_device = choose_device(device_option).device;
  for (const std::string& spec : specs) check_policy_spec(spec, early_device);
  check_start_state_option(start_option);
  const bool exporting = vm.count("export-snapshot") > 0;
  if (exporting && specs.size() != 1)
    throw InputError(fmt::format("--export-snapshot: expected exactly one -p SPEC (a snapshot records one run), got {}",
                                 specs.size()));
  if (exporting && export_path == "-")
    throw InputError("--export-snapshot -: expected a file path (the snapshot is a binary pickle, not for stdout)");
  std::ofstream export_file;
  if (exporting) {  // before the trace loads: a bad path fails at once
    export_file.open(export_path, std::ios::binary);
    if (!export_file) throw InputError(fmt::format("{}: cannot open for writing (--export-snapshot)", export_path));
  }
  const bool timeline_anatomy = vm.count("timeline-anatomy") > 0;
  if (timeline_anatomy && timeline_path.empty()) throw InputError("--timeline-anatomy: expected --timeline FILE too");
  const TraceReadOptions read_options{.device_index = device_index, .frames = frames_option(vm, frames, 0)};
  ReportOptions report;
  report.include_stats = vm.count("stats") > 0;
  report.include_timing = vm.count("timing") > 0;
  ReplayOptions replay;
  replay.stop_on_oom = vm.count("stop-on-oom") > 0;
  replay.detailed_stats = report.include_stats;  // the only reader: the text and JSON reports

  // A JSONL trace is streamed into the replays when nothing asked for needs it whole
  // (streamed_replay.hpp); otherwise, or when the file turns out to need it, it is read whole.
  std::optional<StreamedReplayRun> streamed;
  // (Not on a GPU: its replays wait for the whole trace, whose peak must fit first.)
  if (!exporting && timeline_path.empty() && read_options.frames == 0 && !early_device.is_cuda()) {
    StreamedReplayOptions how{device_option, start_option, replay, vm.count("check-invariants") > 0,
                              !json_path.empty()};
    streamed = replay_streamed(trace_path, specs, how);
  }
  Trace loaded;
  TraceSummary summary;
  std::vector<std::string> skipped;
  std::vector<ReplayResult> results;
  std::optional<DeviceChoice> chosen;
  if (streamed) {
    loaded = std::move(streamed->header);
    summary = streamed->summary;
    chosen = streamed->device;
    replay.start_state = streamed->start_state;
    results = std::move(streamed->results);
  } else {
    loaded = load_trace(trace_path, read_options);
    summary = summarize(loaded);
  }
  const Trace& trace = loaded;
  if (!streamed) {
    if (exporting && !trace.events.empty() && trace.events.front().device > SnapshotRecorder::kMaxDevice)
      throw InputError(
          fmt::format("{}: device {} is beyond {} (--export-snapshot writes a trace list for every device "
                      "up to the trace's; expected a CUDA device index)",
                      trace_path, trace.events.front().device, SnapshotRecorder::kMaxDevice));
    if (default_policies) specs = default_policy_specs(trace, skipped);
    chosen = choose_device(device_option, trace);
    check_fits(*chosen, trace.name, summary.peak_requested);
    warn_capacity_options(*chosen, specs);
    replay.start_state = choose_start_state(start_option, trace, specs);
  }
  const DeviceChoice& device = *chosen;

  std::ofstream timeline;
  if (!timeline_path.empty()) {
    timeline.open(timeline_path, std::ios::binary);
    if (!timeline) throw InputError(fmt::format("{}: cannot open for writing", timeline_path));
    TimelineWriter::write_header(timeline, timeline_anatomy);
  }
  for (const std::string& spec : streamed ? std::vector<std::string>{} : specs) {
    std::unique_ptr<TimelineWriter> writer;
    if (timeline.is_open()) writer = std::make_unique<TimelineWriter>(timeline, spec, timeline_every, timeline_anatomy);
    ReplayObservers observers;
    observers.check_invariants = vm.count("check-invariants") > 0;
    observers.timeline = writer.get();
    observers.progress = terminal_progress(spec);
    observers.anatomy = !json_path.empty();  // only the JSON shows it
    if (!exporting) {
      results.push_back(run_replay(trace, spec, device.device, replay, observers));
      continue;
    }
    PolicyOnDevice run(spec, device.device);
    SnapshotRecorder recorder(run.device());
    run.device().add_listener(&recorder);
    observers.extra.push_back(&recorder);
    results.push_back(run.run(trace, replay, observers));
    run.device().remove_listener(&recorder);
    export_file << recorder.snapshot(run.policy());
    export_file.close();
    if (!export_file) throw InputError(fmt::format("{}: write failed (--export-snapshot)", export_path));
  }
  mark_recorded_settings(trace, results);
  warn_about_start(trace, results);

  const bool json_to_stdout = json_path == "-";
  if (!json_path.empty()) {
    const nlohmann::json j =
        streamed ? results_json(trace, summary, streamed->request_hash, device_description(device), results, report)
                 : results_json(trace, summary, device_description(device), results, report);
    write_output(json_path, j.dump(2) + "\n");
  }
  if (!json_to_stdout) {
    std::cout << fmt::format("trace {}: {} events, {} allocs; device {}{}\n", trace.name, summary.events,
                             summary.allocs, describe_choice(device), start_state_header(trace, replay.start_state));
    std::cout << results_table(summary, results, report);
    for (const std::string& line : skipped) std::cout << line << '\n';
    for (const ReplayResult& r : results) {
      for (const std::string& note : r.notes) std::cout << fmt::format("{}: note: {}\n", r.policy, note);
      if (!r.ooms.empty()) {
        std::cout << fmt::format("{}: {} out-of-memory; first at event {}: {}\n", r.policy, r.ooms.size(),
                                 r.ooms.front().event_index, r.ooms.front().message);
      }
      if (report.include_stats && !r.detailed_stats.empty()) {
        std::cout << "\nstats of " << r.policy << ":\n";
        for (const auto& [key, value] : r.detailed_stats) std::cout << fmt::format("  {:<45} {}\n", key, value);
      }
    }
  }
  note_assumed_capacity_ooms(device, std::any_of(results.begin(), results.end(),
                                                 [](const ReplayResult& r) { return r.metrics.num_ooms > 0; }));
  return report_invariant_violations(results) ? 1 : 0;
}

}  // namespace fraglab::cli
