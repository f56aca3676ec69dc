// fraglab convert TRACE -o OUT.jsonl: any readable trace (a PyTorch snapshot) as fraglab JSONL.
// The initial state travels in the header (initial_segments, initial_allocations).
#include <iostream>

#include "cli/common.hpp"
#include "cli/output_guard.hpp"

namespace fraglab::cli {

int cmd_convert(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, out_path;
  int device_index = -1;
  std::int64_t frames = 0;
  options.add_options()("trace", po::value(&trace_path)->required(),
                        "input: a PyTorch snapshot pickle or fraglab JSONL")(
      "output,o", po::value(&out_path)->required(), "output JSONL file (.gz to compress, - for stdout)")(
      "device-index", po::value(&device_index), "snapshot device to read (multi-GPU snapshots)")(
      "overwrite", "replace an existing output file (without it, an existing non-empty file is an error)")(
      "frames", po::value(&frames), kFramesHelp);
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, "usage: fraglab convert TRACE -o OUT.jsonl[.gz] [--frames N]", options,
                          positional, vm)) {
    return 0;
  }
  refuse_overwrite(out_path, vm.count("overwrite") > 0);  // before the (slow) read
  const TraceReadOptions read_options{.device_index = device_index, .frames = frames_option(vm, frames, 0)};
  const Trace trace = load_trace(trace_path, read_options);
  if (out_path == "-") {
    write_jsonl(trace, std::cout);
  } else {
    write_jsonl_file(trace, out_path);
  }
  return 0;
}

}  // namespace fraglab::cli
