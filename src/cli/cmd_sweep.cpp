// fraglab sweep TRACE... --grid KEY=V1,V2,... [-p NAME[:fixed]] [-j N] [-o FILE.csv|.jsonl]
//               [--resume] [--shard I/N]
// Replays every trace under every point of the grid, streams each finished run to FILE, and ends
// with the ranked table, the Pareto front and the best setting as a PYTORCH_CUDA_ALLOC_CONF line.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/seeded_hash.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab::cli {
namespace {

// Progress on stderr, only on a terminal (replay_progress.hpp): a bar redrawn in place at most 10
// times a second once the command has run a second; its last state is kept.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::size_t total) : total_(total), enabled_(total > 0 && progress_on_terminal()) {}

  void update(std::size_t done) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done != total_ && (!progress_due() || (shown_ && seconds(last_, now) < 0.1))) return;
    if (done == total_ && !shown_) return;  // a sweep that ended within the quiet second shows nothing
    std::cerr << '\r' << format_progress(done, total_, seconds(start_, now), true) << "\x1b[K"
              << (done == total_ ? "\n" : "") << std::flush;
    shown_ = done != total_;
    log::set_progress_line_shown(shown_);
    last_ = now;
  }

 private:
  static double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  std::size_t total_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
};

// Reads the traces in parallel (a large snapshot takes a while); each is parsed exactly once.
std::vector<Trace> read_traces(const std::vector<std::string>& paths, const TraceReadOptions& options,
                               unsigned threads) {
  std::vector<Trace> traces(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < paths.size();) {
      try {
        traces[i] = load_trace(paths[i], options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < std::min<std::size_t>(threads, paths.size()); ++t) pool.emplace_back(worker);
    worker();
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);  // the first failing file in command-line order
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    if (!names.insert(traces[i].name).second) {
      throw InputError(
          fmt::format("{}: another trace of this sweep is also named '{}' (runs are keyed by trace "
                      "name; rename one, e.g. in its JSONL header)",
                      paths[i], traces[i].name));
    }
  }
  return traces;
}

}  // namespace

int cmd_sweep(int argc, char** argv) {
  po::options_description options("options");
  std::vector<std::string> trace_paths, grid_args;
  std::string base_spec, output, shard_text, device_spec, start_option;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  long long jobs_arg = 0;  // signed, so that -j -1 is an error rather than 4294967295 threads
  int device_index = -1;
  std::size_t top = 25;
  options.add_options()("trace", po::value(&trace_paths)->required()->multitoken(),
                        "trace files (fraglab JSONL or PyTorch snapshots)")(
      "policy,p", po::value(&base_spec)->default_value("pytorch"), "policy NAME[:fixed options] the grid varies")(
      "grid,g", po::value(&grid_args)->composing(),
      "KEY=V1,V2,...: a policy option and its values, repeatable; 'none' leaves the option out (the default); "
      "list values keep their commas inside brackets: roundup_power2_divisions=4,[256:1,512:2,>:8]")(
      "jobs,j", po::value(&jobs_arg), "worker threads (default: the number of hardware threads)")(
      "output,o", po::value(&output), "stream results to FILE.csv or FILE.jsonl, one flushed row per finished run")(
      "resume", "skip the runs already in the output file and append the rest")(
      "overwrite", "replace an existing output file (without it, an existing non-empty file is an error)")(
      "shard", po::value(&shard_text), "run only slice I of N (0 <= I < N) of the runs; join with fraglab merge")(
      "device", po::value(&device_spec),
      "device: sim[:CAPACITY][,external:BYTES], e.g. sim:80GiB: your GPU's memory (default per trace: reserved + "
      "device_free at its recorded oom, else 80GiB)")("device-index", po::value(&device_index),
                                                      "snapshot device to read (multi-GPU snapshots)")(
      "stop-on-oom", "end each replay at its first out-of-memory (faster when many settings OOM)")(
      "check-invariants",
      "check every replay with the invariant checker (as fraglab replay does); exit 1 on a violation")(
      "no-share",
      "replay every setting, even one an earlier replay proves would make the same decisions (the results are the "
      "same; a reference for checking that)")("start-state", po::value(&start_option)->default_value("auto"),
                                              kStartStateHelp)(
      "top", po::value(&top), "rows of the final table per trace (0 = all; default 25)");
  po::positional_options_description positional;
  positional.add("trace", -1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab sweep TRACE... --grid KEY=V1,V2,... [--grid ...] [-p NAME[:fixed options]] [-j N]\n"
      "                     [-o FILE.csv|FILE.jsonl [--resume]] [--shard I/N]\n"
      "Replays each trace under every combination of the grid's values and prints the settings ranked by\n"
      "peak reserved memory, the Pareto front, and the best setting as a PYTORCH_CUDA_ALLOC_CONF line.\n"
      "example: fraglab sweep run.pickle --grid max_split_size_mb=none,64,128,256 --grid "
      "expandable_segments=False,True -o sweep.csv";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  if (vm.count("jobs")) {
    if (jobs_arg < 1 || jobs_arg > 4096)
      throw InputError(fmt::format("-j {}: expected 1..4096 worker threads", jobs_arg));
    threads = static_cast<unsigned>(jobs_arg);
  }

  // Everything that can be wrong with the command line fails before a trace is read.
  SweepGrid grid;
  grid.base_spec = base_spec;
  for (const std::string& arg : grid_args) grid.axes.push_back(parse_grid_axis(arg));
  const Shard shard = vm.count("shard") ? parse_shard(shard_text) : Shard{};
  // Counted before anything is expanded or tried: a grid too large to keep its results refused
  // at once, naming its size (validate_grid tries every setting).
  check_sweep_size(grid, trace_paths.size(), shard.count, "--grid");
  validate_grid(grid);
  const std::optional<std::string> device_option = vm.count("device") ? std::optional(device_spec) : std::nullopt;
  choose_device(device_option);
  check_start_state_option(start_option);
  const bool resume = vm.count("resume") > 0;
  if (resume && output.empty()) throw InputError("--resume needs -o FILE (the results file to continue)");
  if (!output.empty()) {
    results_format(output);
    std::error_code ec;
    if (!resume && !vm.count("overwrite") && std::filesystem::exists(output, ec) &&
        std::filesystem::file_size(output, ec) > 0) {
      throw InputError(fmt::format("{}: already exists (--resume continues it, --overwrite replaces it)", output));
    }
  }
  // The settings are streamed: setting n is decoded from n when it is needed, never all held.
  const std::uint64_t setting_count = grid_size(grid);
  const auto setting_at = [&grid](std::uint64_t n) { return grid_setting(grid, n); };
  const auto spec_at = [&grid](std::uint64_t n) { return grid_setting(grid, n).spec; };
  std::vector<std::string> knob_keys;
  for (const GridAxis& axis : grid.axes) knob_keys.push_back(axis.key);

  const TraceReadOptions read_options{.device_index = device_index};
  const std::vector<Trace> traces = read_traces(trace_paths, read_options, threads);
  // One start state per trace for all of its settings (README "What-if answers on a snapshot").
  std::vector<StartState> start_states;
  start_states.reserve(traces.size());
  for (const Trace& trace : traces) {
    // choose_start_state asks whether every spec is the recorded settings: one spec that is not
    // (or, when all are, any one) gives the same answer as the whole grid, without holding it.
    std::vector<std::string> representative{spec_at(0)};
    if (const std::optional<std::string> recorded = recorded_spec(trace)) {
      for (std::uint64_t n = 0; n < setting_count; ++n) {
        if (std::string spec = spec_at(n); !same_policy(spec, *recorded)) {
          representative = {std::move(spec)};
          break;
        }
      }
    }
    start_states.push_back(choose_start_state(start_option, trace, representative));
  }
  // Each trace's device; the device column of its rows is the spec it ran on, so a capacity
  // taken from a recorded oom shows there ("sim:264241152B") and here, where its source is known.
  std::vector<DeviceChoice> devices;
  for (const Trace& trace : traces) {
    devices.push_back(choose_device(device_option, trace));
    const DeviceChoice& d = devices.back();
    if (d.source == kSourceRecordedOom) {
      log::note(
          fmt::format("sweep: {}: device {}: capacity {} from its recorded oom (reserved + device_free); "
                      "--device overrides it",
                      trace.name, d.spec(), format_bytes(d.capacity())));
    }
  }
  // Once for the sweep: on an assumed capacity if any trace has one (it is the same for all).
  const auto assumed = std::find_if(devices.begin(), devices.end(), [](const DeviceChoice& d) { return d.assumed(); });
  if (!devices.empty()) {
    CapacityWarnings warnings(assumed != devices.end() ? *assumed : devices.front());
    for (std::uint64_t n = 0; n < setting_count; ++n) warnings.check(spec_at(n));
  }
  SweepRunOptions run_options;
  run_options.threads = threads;
  run_options.replay.stop_on_oom = vm.count("stop-on-oom") > 0;
  run_options.check_invariants = vm.count("check-invariants") > 0;
  run_options.share = vm.count("no-share") == 0;
  // Every job brings its trace's device (below); this is only the fallback the runner wants.
  run_options.device = choose_device(device_option).device;
  // The runs that broke an invariant (only those: a sweep keeps rows, not results), reported at
  // the end as replay reports them, named by trace too.
  std::vector<ReplayResult> violated;
  auto keep_violations = [&violated](const Trace& trace, const ReplayResult& result) {
    if (result.invariant_violations.value_or(0) == 0) return;
    violated.push_back(result);
    violated.back().policy = fmt::format("{}: {}", trace.name, result.policy);
  };
  // The recorded settings of each recorded trace: the baseline improvements are stated against.
  // A grid point of the same policy is that baseline; otherwise they are replayed here, once, and
  // the run travels in the results file's metadata (so a merge of shards reports the same).
  std::map<std::string, SweepTraceContext> contexts;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    SweepTraceContext& context = contexts[traces[t].name];
    if (!traces[t].initial.empty()) context.start_state = std::string(start_state_name(start_states[t]));
    const std::optional<std::string> recorded = recorded_spec(traces[t]);
    if (!recorded) continue;
    context.recorded_spec = *recorded;
    bool in_grid = false;
    for (std::uint64_t n = 0; n < setting_count && !in_grid; ++n) in_grid = same_policy(spec_at(n), *recorded);
    if (in_grid) continue;
    std::vector<SweepJob> extra{{&traces[t], *recorded, start_states[t], devices[t].device}};
    SweepRunOptions one = run_options;
    one.threads = 1;
    run_sweep(extra, one, [&](std::size_t, const ReplayResult& result) {
      keep_violations(traces[t], result);
      Setting setting;
      setting.values.assign(knob_keys.size(), std::nullopt);
      setting.spec = *recorded;
      context.recorded_run = make_row(traces[t].name, devices[t].spec(), setting, result);
    });
  }
  std::erase_if(contexts, [](const auto& entry) {
    return entry.second.start_state.empty() && entry.second.recorded_spec.empty();
  });

  // The file records its shard, grid and traces (merge checks them); it is opened once the traces
  // are read, since their identities are part of that record.
  std::unique_ptr<ResultsStream> stream;
  if (!output.empty()) {
    std::vector<TraceIdentity> identities;
    identities.reserve(traces.size());
    for (const Trace& trace : traces) identities.push_back(trace_identity(trace));
    const std::string device_text = device_option.value_or("sim");
    SweepMeta meta = sweep_meta(grid, device_text, identities, shard, start_option, contexts);
    // The figures behind every row's device_time_s: resume and merge refuse rows of other figures.
    const CostModelChoice costs = cost_model_choice();
    meta.cost_model = costs.name;
    meta.cost_model_digest = cost_model_digest(costs.model);
    stream = std::make_unique<ResultsStream>(output, knob_keys, resume, std::move(meta));
  }
  // Runs already in the file (resume), by key.
  std::unordered_map<std::string, const SweepRow*, SeededHash, std::equal_to<>> done;  // seeded: keys from a file
  if (stream) {
    for (const SweepRow& row : stream->existing()) done.emplace(row_key(row), &row);
  }

  // Runs in trace-major grid order; the shard takes every N-th one.
  struct Pending {
    std::size_t trace;
    std::uint64_t setting;
  };
  std::vector<Pending> pending;
  std::vector<SweepRow> rows;  // this sweep's results: from the file (resume) and new
  std::size_t in_shard = 0;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    for (std::uint64_t s = 0; s < setting_count; ++s) {
      if (!shard.contains(t * setting_count + s)) continue;
      ++in_shard;
      const auto it = done.find(row_key(traces[t].name, devices[t].spec(), spec_at(s)));
      if (it == done.end())
        pending.push_back({t, s});
      else
        rows.push_back(*it->second);
    }
  }
  std::string plan =
      fmt::format("sweep: {} trace{} x {} setting{} = {} runs", traces.size(), traces.size() == 1 ? "" : "s",
                  setting_count, setting_count == 1 ? "" : "s", traces.size() * setting_count);
  if (shard.count > 1) plan += fmt::format("; shard {}/{}: {} runs", shard.index, shard.count, in_shard);
  if (resume) plan += fmt::format("; {} already in {}", in_shard - pending.size(), output);
  const std::size_t workers = std::max<std::size_t>(1, std::min<std::size_t>(threads, pending.size()));
  log::note(plan + fmt::format("; running {} on {} thread{}", pending.size(), workers, workers == 1 ? "" : "s"));

  // Jobs are made as the workers take them: a job's spec is decoded from its setting's index.
  const auto job_at = [&](std::size_t i) {
    const Pending& p = pending[i];
    return SweepJob{&traces[p.trace], spec_at(p.setting), start_states[p.trace], devices[p.trace].device};
  };
  ProgressPrinter progress(pending.size());
  std::size_t finished = 0;
  const auto started = std::chrono::steady_clock::now();
  const SweepRunStats ran =
      run_sweep(pending.size(), job_at, run_options, [&](std::size_t i, const ReplayResult& result) {
        keep_violations(traces[pending[i].trace], result);
        rows.push_back(make_row(traces[pending[i].trace].name, devices[pending[i].trace].spec(),
                                setting_at(pending[i].setting), result));
        if (stream) stream->append(rows.back());
        progress.update(++finished);
      });
  // Which runs were shared depends on thread timing, so it is said here, never in the results.
  log::info(fmt::format(
      "sweep: {} runs in {:.3f} s: {} replayed, {} answered by a replay that makes the same decisions", pending.size(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), ran.replayed, ran.shared));

  if (stream) {
    // Rows of other sweeps that shared the file stay in it; the file ends in canonical order.
    std::vector<SweepRow> all = stream->existing();
    std::unordered_set<std::string, SeededHash, std::equal_to<>> old;
    for (const SweepRow& row : all) old.insert(row_key(row));
    for (const SweepRow& row : rows) {
      if (old.count(row_key(row)) == 0) all.push_back(row);
    }
    stream->finish(std::move(all));
  }
  SweepReportOptions report;
  report.top = top;
  report.traces = contexts;
  if (!rows.empty()) std::cout << sweep_report(ResultsTable{knob_keys, rows}, report);
  if (!output.empty()) std::cout << fmt::format("\nresults: {} ({} runs)\n", output, rows.size());
  if (shard.count > 1 && !rows.empty()) {
    // A shard's best is the best of part of the grid: say so where it is printed.
    std::cout << fmt::format(
        "\nnote: shard {}/{}: the best above is of this shard's runs only; fraglab merge "
        "checks that all {} shards are there and names the grid's best\n",
        shard.index, shard.count, shard.count);
  }
  return report_invariant_violations(violated) ? 1 : 0;
}

}  // namespace fraglab::cli
