// fraglab validate SNAPSHOT [--device-index N] [--json FILE|-]: replay a recorded run under its own
// allocator settings and compare with the record. Exit 0 exact, 1 divergent, 2 bad input.
#include <iostream>

#include "cli/common.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/validate.hpp"

namespace fraglab::cli {

int cmd_validate(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, json_path, capacity, available, version;
  int device_index = -1;
  ValidateOptions vo;
  options.add_options()
      ("trace", po::value(&trace_path)->required(), "a PyTorch snapshot pickle (or a JSONL trace with observed events)")
      ("device-index", po::value(&device_index), "snapshot device to validate (multi-GPU snapshots)")
      ("json", po::value(&json_path), "write the report as JSON to FILE (- for stdout)")
      ("policy,p", po::value(&vo.policy_spec), "policy spec (default: pytorch with the snapshot's allocator settings)")
      ("pytorch-version", po::value(&version), "PyTorch release whose behaviour to emulate, e.g. 2.1 (default newest)")
      ("capacity", po::value(&capacity), "the GPU's total memory, e.g. 80GiB (memory fraction, GC limit)")
      ("available", po::value(&available),
       "memory the allocator could obtain (default: the recorded peak reserved, or reserved + device_free at an oom)")
      ("context", po::value(&vo.context_events)->default_value(4), "events shown around the first divergence");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab validate SNAPSHOT.pickle [--device-index N] [--json FILE|-]\n"
      "Replays the snapshot's requests through the pytorch policy under the snapshot's own allocator\n"
      "settings, from the rebuilt start state, and compares every segment action, alloc address and\n"
      "reserved byte count with the record. Exit 0 when exact, 1 when not, 2 on bad input.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  if (!capacity.empty()) vo.capacity = parse_byte_size(capacity, "--capacity");
  if (!available.empty()) vo.available = parse_byte_size(available, "--available");
  if (!version.empty()) vo.extra_options = "version:" + version;

  TraceReadOptions read_options;
  read_options.device_index = device_index;
  const Trace trace = read_trace(trace_path, read_options);
  const ValidationReport report = validate_replay(trace, vo);
  if (!json_path.empty()) write_output(json_path, validation_json(report).dump(2) + "\n");
  if (json_path != "-") std::cout << trace.name << ": " << validation_text(report);
  return report.exact ? 0 : 1;
}

}  // namespace fraglab::cli
