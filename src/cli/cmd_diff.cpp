// fraglab diff A B [-p SPEC] [--json FILE]: replays two traces (before / after a change) under
// the same policy and shows where they differ: overall, per step / phase, per tag, and the first
// event at which the timelines part.
#include <fmt/format.h>

#include <iostream>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/diff.hpp"
#include "fraglab/diff_report.hpp"
#include "fraglab/frame_diff.hpp"
#include "fraglab/frame_diff_report.hpp"
#include "fraglab/frames.hpp"
#include "fraglab/run_replay.hpp"

namespace fraglab::cli {

int cmd_diff(int argc, char** argv) {
  po::options_description options("options");
  std::vector<std::string> paths;
  std::string spec, device_spec, json_path, start_option;
  int device_index = -1;
  std::int64_t frames = 0;
  std::vector<std::string> frame_ignores;
  options.add_options()("traces", po::value(&paths)->required()->multitoken(),
                        "the two traces: A (before) and B (after)")(
      "policy,p", po::value(&spec)->default_value("pytorch"), "policy spec both traces are replayed under")(
      "device", po::value(&device_spec),
      "device: sim[:CAPACITY][,external:BYTES], e.g. sim:80GiB: your GPU's memory (default 80GiB)")(
      "device-index", po::value(&device_index), "snapshot device to read (multi-GPU snapshots)")(
      "json", po::value(&json_path), "write the comparison as JSON to FILE (- for stdout)")(
      "start-state", po::value(&start_option)->default_value("auto"), kStartStateHelp)(
      "by-frame",
      "also group the requested bytes of A and B by the top stack frame of each allocation (the first "
      "frame that is not PyTorch's own): which source line's memory changed")(
      "frames", po::value(&frames), "with --by-frame: stack frames to keep per allocation (default 64)")(
      "frame-ignore", po::value(&frame_ignores)->composing(),
      "with --by-frame: a frame whose name or filename contains this text is skipped too (repeatable)");
  po::positional_options_description positional;
  positional.add("traces", 2);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab diff A B [-p SPEC] [--device sim:80GiB] [--json FILE|-] [--by-frame [--frames N]]\n"
      "Replays A (before) and B (after) under the same policy and shows how peak reserved, requested\n"
      "and fragmentation differ overall, per step / phase (mark events) and per allocation tag, and the\n"
      "first event at which the two timelines part.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  if (paths.size() != 2) throw InputError(fmt::format("expected two traces (A and B), got {}", paths.size()));
  // One device for both sides (a recorded oom of either would change what is compared).
  const DeviceChoice device = choose_device(vm.count("device") ? std::optional(device_spec) : std::nullopt);
  check_policy_spec(spec, device.device);  // a bad spec fails before the traces are read
  warn_capacity_options(device, {spec});
  check_start_state_option(start_option);
  const bool by_frame = vm.count("by-frame") > 0;
  if (!by_frame && (vm.count("frames") || !frame_ignores.empty()))
    throw InputError("--frames and --frame-ignore: expected --by-frame with them (diff shows frames only by frame)");
  const TraceReadOptions read_options{.device_index = device_index,
                                      .frames = by_frame ? frames_option(vm, frames, kDefaultFramesKept) : 0};
  const Trace a = load_trace(paths[0], read_options);
  const Trace b = load_trace(paths[1], read_options);
  // Both traces start the same way: cold as soon as either would (README "What-if answers on a snapshot").
  ReplayOptions replay;
  replay.detailed_stats = false;  // a diff shows none
  const StartState start_a = choose_start_state(start_option, a, {spec});
  const StartState start_b = choose_start_state(start_option, b, {spec});
  replay.start_state =
      start_a == StartState::Cold || start_b == StartState::Cold ? StartState::Cold : StartState::Recorded;
  const auto [progress_a, progress_b] = paired_progress(spec, a.events.size() + b.events.size());
  TraceDiff diff = diff_traces(a, b, spec, device.device, replay, progress_a, progress_b);
  diff.device = describe_choice(device);
  std::optional<FrameDiff> frame_diff;
  if (by_frame) {
    FrameFilter filter;
    filter.ignore.insert(filter.ignore.end(), frame_ignores.begin(), frame_ignores.end());
    frame_diff = diff_by_frame(a, b, filter);
  }
  log::note(fmt::format("diff: {} and {} replayed under {} from the {} start state", a.name, b.name, spec,
                        start_state_name(replay.start_state)));
  if (!json_path.empty()) {
    nlohmann::json j = diff_json(a, b, diff);
    j["device"] = device_json(device_description(device));
    j["start_state"] = start_state_name(replay.start_state);
    if (frame_diff) j["by_frame"] = frame_diff_json(*frame_diff);
    write_output(json_path, j.dump(2) + "\n");
  }
  if (json_path != "-") {
    std::cout << diff_report(a, b, diff);
    if (frame_diff) std::cout << frame_diff_report(*frame_diff);
  }
  return 0;
}

}  // namespace fraglab::cli
