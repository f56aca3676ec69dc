// fraglab maxbatch --model M --framework F --world-size N --device sim:80GiB [-p SPEC]... [--steps S]
//                  [--grid KEY=V1,V2...]... [--grid-policy SPEC] [--shard I/N]
//                  [--min-batch A] [--max-batch B] [--json] [-o RESULTS.csv|.jsonl] [-j N]
// fraglab maxbatch --merge SHARD.csv... [--json]
// The largest micro-batch each policy spec fits without an OOM and without a retry. The search is
// the sweep layer's (fraglab/maxbatch.hpp); each micro-batch it asks for is generated once (the
// `gen` generator, same flags) and replayed under every spec by run_sweep, its rows streamed to
// the results file as they finish.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "cli/workload_flags.hpp"
#include "fraglab/maxbatch.hpp"
#include "fraglab/maxbatch_report.hpp"
#include "fraglab/maxbatch_shards.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/trace_identity.hpp"
#include "fraglab/workload.hpp"

namespace fraglab::cli {

namespace {

// --merge: the shards' results files (fraglab/maxbatch_shards.hpp) back into the single-machine
// table or JSON. Here rather than in `fraglab merge`: that joins sweep rows into a results file,
// while this re-runs the search over the rows and prints maxbatch's own report.
int maxbatch_merge(int argc, char** argv) {
  std::vector<std::string> inputs;
  po::options_description options("options");
  options.add_options()("merge", po::value(&inputs)->required()->multitoken(),
                        "results files of fraglab maxbatch --shard I/N -o FILE, one per shard")(
      "json", "print the results as JSON");
  po::positional_options_description positional;
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab maxbatch --merge SHARD.csv... [--json]\n"
      "Prints what the unsharded run would print, from the results files of every shard of a\n"
      "`fraglab maxbatch --shard I/N -o FILE` run.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  const MaxbatchMerge merged = merge_maxbatch_files(inputs);
  MaxbatchContext context;
  context.workload = merged.meta.workload;
  context.device = merged.meta.device;
  context.bounds = merged.meta.bounds;
  std::cout << (vm.count("json") ? maxbatch_json(merged.result, context) : maxbatch_table(merged.result, context));
  return 0;
}

}  // namespace

int cmd_maxbatch(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--merge" || std::string_view(argv[i]).starts_with("--merge="))
      return maxbatch_merge(argc, argv);
  }
  WorkloadFlags flags;
  WorkloadOptions& o = flags.options();
  o.steps = 2;  // step 1 creates the optimizer state lazily; step 2 is the first steady one (wm §6)
  std::vector<std::string> specs{"pytorch", "pytorch:expandable_segments:True"};
  std::string device_spec = "sim:80GiB", output, shard_arg, grid_policy = "pytorch";
  std::vector<std::string> grid_args;
  MaxbatchBounds bounds;
  long long jobs_arg = 0;  // signed, so that -j -1 is an error
  po::options_description search_opts("search");
  search_opts.add_options()("steps", po::value(&o.steps)->default_value(o.steps), "training steps of each run")(
      "policy,p", po::value<std::vector<std::string>>()->composing(),
      "policy spec, repeatable (default: pytorch and pytorch:expandable_segments:True)")(
      "device", po::value(&device_spec)->default_value(device_spec), "device: sim:CAPACITY[,external:BYTES]")(
      "min-batch", po::value(&bounds.min_batch)->default_value(bounds.min_batch), "smallest micro-batch tried")(
      "max-batch", po::value(&bounds.max_batch)->default_value(bounds.max_batch), "largest micro-batch tried")(
      "verify-below", po::value(&bounds.verify_below)->default_value(bounds.verify_below),
      "batches under the boundary replayed to check monotonicity")(
      "scan-above", po::value(&bounds.scan_above)->default_value(bounds.scan_above),
      "batches past the first failure replayed to check monotonicity")(
      "jobs,j", po::value(&jobs_arg), "worker threads replaying the specs (default: the hardware threads)")(
      "json", "print the results as JSON")("output,o", po::value(&output),
                                           "stream every run to FILE.csv or FILE.jsonl (a micro_batch column)")(
      "overwrite", "replace an existing output file")(
      "resume", "continue the search whose results file -o is: its runs are not replayed again")(
      "grid,g", po::value(&grid_args)->composing(),
      "KEY=V1,V2,... (repeatable, as fraglab sweep's): every point of the grid is one more spec searched")(
      "grid-policy", po::value(&grid_policy)->default_value(grid_policy),
      "the policy NAME[:fixed options] the grid's points vary")(
      "shard", po::value(&shard_arg),
      "search only share I of N of the specs (spec k when k mod N = I); join with maxbatch --merge")(
      "merge", "FILE...: the results files of every shard, printed as the unsharded run would be");
  po::options_description options;
  flags.add_to(options);
  options.add(search_opts);
  po::positional_options_description positional;
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab maxbatch --model M [--framework F] [--world-size N] [--device sim:80GiB] [-p SPEC]...\n"
      "                        [--grid KEY=V1,V2,...]... [--grid-policy SPEC] [--shard I/N]\n"
      "                        [--steps S] [--min-batch A] [--max-batch B] [--json] [-o RESULTS.csv [--resume]]\n"
      "                        [gen options]\n"
      "       fraglab maxbatch --merge SHARD.csv... [--json]\n"
      "Finds, for each policy spec, the largest micro-batch whose generated run (as fraglab gen makes it)\n"
      "completes without an OOM, and the largest without a cudaMalloc retry, generating as few traces as\n"
      "it can: a doubling probe, a binary search, then a window around the boundary that checks the\n"
      "monotonicity the search assumes (README \"Largest micro-batch\").";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (vm.count("jobs")) {
    if (jobs_arg < 1 || jobs_arg > 4096)
      throw InputError(fmt::format("-j {}: expected 1..4096 worker threads", jobs_arg));
    threads = static_cast<unsigned>(jobs_arg);
  }
  SweepGrid grid;
  grid.base_spec = grid_policy;
  for (const std::string& arg : grid_args) grid.axes.push_back(parse_grid_axis(arg));
  // With a grid and no -p, the grid's points are the specs; -p adds specs before them.
  if (vm.count("policy"))
    specs = vm["policy"].as<std::vector<std::string>>();
  else if (!grid.axes.empty())
    specs.clear();
  const Shard shard = vm.count("shard") ? parse_shard(shard_arg) : Shard{};
  // Everything that can be wrong with the command line fails before a trace is generated.
  check_maxbatch_bounds(bounds);
  if (!grid.axes.empty()) {
    check_sweep_size(grid, 1, shard.count, "--grid");
    validate_grid(grid);
  }
  for (const std::string& spec : specs) validate_grid(SweepGrid{spec, {}});
  const std::vector<std::string> all_specs = maxbatch_specs(specs, grid);
  // This shard's specs: spec k belongs to shard k mod N, as sweep assigns runs (one "trace" here).
  specs.clear();
  for (std::size_t k = 0; k < all_specs.size(); ++k) {
    if (shard.contains(k)) specs.push_back(all_specs[k]);
  }
  if (specs.empty())
    throw InputError(fmt::format("--shard {}: no spec falls to it ({} specs in all)", shard_arg, all_specs.size()));
  const DeviceChoice device = choose_device(device_spec);
  warn_capacity_options(device, specs);
  const std::string chosen = flags.read(vm, "maxbatch");
  o.micro_batch = bounds.min_batch;
  check_options(o);  // the flags, before any generation
  // The largest batch the search may ask for must be one the generator makes (its range and
  // tensor sizes), so the search never stops halfway on a refusal.
  try {
    WorkloadOptions largest = o;
    largest.micro_batch = bounds.max_batch;
    check_options(largest);
    check_sizes(resolved_options(largest));
  } catch (const InputError& e) {
    throw InputError(fmt::format("--max-batch {}: the generator refuses it: {}", bounds.max_batch, e.what()));
  }
  const bool resume = vm.count("resume") > 0;
  if (resume && output.empty()) throw InputError("--resume needs -o FILE (the results file to continue)");
  if (resume && vm.count("overwrite")) throw InputError("--resume and --overwrite: give one of them");
  if (!output.empty()) {
    results_format(output);
    std::error_code ec;
    if (!resume && !vm.count("overwrite") && std::filesystem::exists(output, ec) &&
        std::filesystem::file_size(output, ec) > 0)
      throw InputError(fmt::format("{}: already exists (--resume continues it, --overwrite replaces it)", output));
  }
  if (!chosen.empty()) log::note(chosen);
  MaxbatchContext context;
  context.workload = fmt::format("{} {}, world size {}, {} step{}", o.model.name, name_of(o.framework), o.world_size,
                                 o.steps, o.steps == 1 ? "" : "s");
  context.device = device.spec();
  context.bounds = bounds;
  // Every search starts at --min-batch, so its trace is generated first and identifies the
  // workload in the results file (its request hash covers every gen option that shapes it).
  std::optional<Trace> first_trace;
  std::unique_ptr<MaxbatchResultsFile> stream;
  std::vector<SweepRow> done;  // --resume: the complete rows already in the file
  if (!output.empty()) {
    WorkloadOptions at = o;
    at.micro_batch = bounds.min_batch;
    first_trace = generate_trace(at);
    MaxbatchMeta meta;
    meta.shard = shard;
    meta.workload = context.workload;
    meta.generator = describe_options(resolved_options(at));
    meta.first_trace = trace_identity(*first_trace);
    meta.device = context.device;
    meta.specs = all_specs;
    meta.grid_policy = grid.base_spec;
    for (const GridAxis& axis : grid.axes) meta.grid.push_back(grid_axis_text(axis));
    meta.bounds = bounds;
    if (resume) done = rows_to_resume(output, meta);
    stream = std::make_unique<MaxbatchResultsFile>(output, std::move(meta), done);
  }
  // Runs of the interrupted search (--resume), by (micro-batch, spec): answered from the file.
  MaxbatchRuns done_runs;
  add_runs_by_batch(done, done_runs);
  if (resume) log::note(fmt::format("maxbatch: {} runs already in {}", done_runs.size(), output));
  std::vector<SweepRow> rows;

  SweepRunOptions run_options;
  run_options.threads = threads;
  run_options.device = device.device;
  // Only whether a run OOMs matters past its first OOM; peak and retries are reported at passing
  // batches, which run to the end.
  run_options.replay.stop_on_oom = true;
  const BatchEvaluator evaluate = [&](std::uint32_t batch) {
    std::vector<Metrics> metrics(specs.size());
    std::vector<std::size_t> to_run;  // the specs whose run at this batch is not in the file yet
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto it = done_runs.find({batch, specs[i]});
      if (it == done_runs.end()) {
        to_run.push_back(i);
        continue;
      }
      metrics[i] = it->second->metrics;
      rows.push_back(*it->second);
    }
    if (to_run.empty()) return metrics;
    WorkloadOptions at = o;
    at.micro_batch = batch;
    std::optional<Trace> generated;
    if (!first_trace || batch != bounds.min_batch) generated = generate_trace(at);
    const Trace& trace = generated ? *generated : *first_trace;
    std::vector<SweepJob> jobs;
    for (std::size_t i : to_run) jobs.push_back({&trace, specs[i], StartState::Recorded, device.device});
    run_sweep(jobs, run_options, [&](std::size_t j, const ReplayResult& result) {
      const std::size_t i = to_run[j];
      metrics[i] = result.metrics;
      rows.push_back(make_row(trace.name, device.spec(), Setting{{std::to_string(batch)}, specs[i]}, result));
      if (stream) stream->append(rows.back());
    });
    log::info(fmt::format("maxbatch: micro-batch {}: {}", batch, trace.name));
    if (!generated) first_trace.reset();  // evaluated once: its memory is not needed again
    return metrics;
  };
  const MaxbatchResult result = find_max_batches(specs, bounds, evaluate);
  if (stream) stream->finish(rows);
  // A shard's table is its specs' answers only; --merge of every shard's file prints the whole.
  if (shard.count > 1)
    log::note(fmt::format("maxbatch: shard {}: {} of {} specs", shard_text(shard), specs.size(), all_specs.size()));

  std::cout << (vm.count("json") ? maxbatch_json(result, context) : maxbatch_table(result, context));
  if (!output.empty() && !vm.count("json")) std::cout << fmt::format("\nresults: {} ({} runs)\n", output, rows.size());
  return 0;
}

}  // namespace fraglab::cli
