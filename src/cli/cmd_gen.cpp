// fraglab gen --model M --framework F --world-size N --micro-batch B --steps S ... -o TRACE.jsonl
// Thin: flags → WorkloadOptions (every spelling checked by the parse_* functions, which name the
// flag and the accepted values), generate_trace(), write_jsonl_file().
#include <fmt/format.h>

#include <iostream>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "cli/output_guard.hpp"
#include "cli/replay_progress.hpp"
#include "cli/workload_flags.hpp"
#include "fraglab/workload.hpp"

namespace fraglab::cli {

int cmd_gen(int argc, char** argv) {
  WorkloadFlags flags;
  WorkloadOptions& o = flags.options();
  std::string output, name;
  po::options_description run_opts("trace");
  run_opts.add_options()("micro-batch", po::value(&o.micro_batch)->required(), "micro-batch per GPU")(
      "steps", po::value(&o.steps)->required(), "training steps")("output,o", po::value(&output)->required(),
                                                                  "trace file to write (.jsonl, or .jsonl.gz)")(
      "name", po::value(&name), "trace name (default: derived from the options)")(
      "overwrite", "replace an existing output file (without it, an existing non-empty file is an error)");
  po::options_description options;
  options.add(run_opts);  // first in --help: the options every gen needs
  flags.add_to(options);
  po::positional_options_description positional;
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab gen --model M --micro-batch B --steps S -o TRACE.jsonl [--overwrite]\n"
      "                   [--framework F] [--world-size N] [--seq-len L | --src-len L --tgt-len L]\n"
      "                   [--precision bf16|fp32] [--recompute|--no-recompute] [--seed X]\n"
      "Writes the allocation stream of one rank for S training steps of a transformer under sharded\n"
      "data parallelism (docs/workload-model.md): tags param/grad/act/opt/comm/temp, marks step/phase,\n"
      "side-stream allocations and record_stream frees as free_requested/free_completed.\n"
      "Every option not given has a default that works for every model (a choice that depends on the\n"
      "model is printed). M: a built-in name, a model .json file or a Hugging Face config.json.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  refuse_overwrite(output, vm.count("overwrite") > 0);

  const std::string chosen = flags.read(vm, "gen");
  o.name = name;

  const Trace trace = generate_trace(o, progress_callback("generating", "steps"));
  write_jsonl_file(trace, output);
  const TraceSummary s = summarize(trace);
  if (!chosen.empty()) log::note(chosen);
  log::note(fmt::format("wrote {}: {} events, {} allocs, peak requested {:.2f} GiB", output, s.events, s.allocs,
                        static_cast<double>(s.peak_requested) / static_cast<double>(GiB)));
  return 0;
}

}  // namespace fraglab::cli
