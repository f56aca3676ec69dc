// Pieces shared by the subcommands: command lines, trace loading, output files.
#pragma once

#include <boost/program_options.hpp>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/report.hpp"
#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab::cli {

namespace po = boost::program_options;

// A subcommand: parses its own arguments (argv[0] is the subcommand name), returns an exit code.
using Command = int (*)(int argc, char** argv);

int cmd_replay(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_policies(int argc, char** argv);
int cmd_validate(int argc, char** argv);
int cmd_gen(int argc, char** argv);
int cmd_maxbatch(int argc, char** argv);
int cmd_sweep(int argc, char** argv);
int cmd_merge(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_diff(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);

// Parses argv against `options` (+ positional), handling --help. Returns false if help was
// printed (the caller returns 0).
bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& options,
                        const po::positional_options_description& positional, po::variables_map& vm);

// Every registered policy at its defaults, less those the trace cannot feed (a policy that needs
// tags, on an untagged trace): one line each on why goes to `skipped`.
std::vector<std::string> default_policy_specs(const Trace& trace, std::vector<std::string>& skipped);
// Prints every invariant violation of `runs` to stderr; true when there was one (exit 1).
bool report_invariant_violations(const std::vector<ReplayResult>& runs);

// ---- reading traces and the what-if rule (what_if.cpp; README "What-if answers on a snapshot") -----

// read_trace() followed by infer_unrecorded_events(): every command sees the events validate
// infers (an empty_cache() call shown only by a burst of segment frees).
Trace load_trace(const std::string& path, const TraceReadOptions& options = {});
// The trace load_trace() (or a streamed replay) read last ("<stdin>" for "-"), empty before any:
// what an error that arises after reading (the memory budget running out in a replay) names.
// `sweep` reads its traces on several threads at once, so both calls lock.
void remember_trace_path(std::string path);
std::string last_trace_path();

// "pytorch[:<conf>]" for a trace recorded by PyTorch's allocator (a snapshot, or a conversion of
// one); nullopt for other traces.
std::optional<std::string> recorded_spec(const Trace& trace);
// --start-state: "recorded", "cold", or "auto": recorded when the trace starts from nothing or
// every spec is the recorded settings (a faithful reproduction), cold otherwise (a what-if).
inline constexpr const char* kStartStateHelp =
    "recorded|cold|auto: recorded adopts the segments the run held when its trace began (faithful only under "
    "the recorded settings); cold starts from an empty device, each policy allocating the allocations live "
    "at the start (in address order) first; auto (default) = recorded when every policy is the recorded "
    "settings, cold otherwise";
void check_start_state_option(const std::string& option);
StartState choose_start_state(const std::string& option, const Trace& trace, const std::vector<std::string>& specs);
// "; start state cold (N allocations, X reserved before the trace began)" for headers; empty for a
// trace that starts from nothing.
std::string start_state_header(const Trace& trace, StartState state);
// Sets ReplayResult::recorded_settings on the runs of the trace's own settings.
void mark_recorded_settings(const Trace& trace, std::vector<ReplayResult>& runs);
// A warning on stderr for each run whose result is set by memory reserved before the trace
// began (recorded start state; the peak reached at the start, or more than half of it).
void warn_about_start(const Trace& trace, const std::vector<ReplayResult>& runs);

// --frames N (README "Stack frames"): how many innermost stack frames of each allocation to keep.
inline constexpr const char* kFramesHelp =
    "keep the N innermost stack frames of each allocation a snapshot (or a JSONL trace) records (0: none, "
    "the fastest read)";
// The --frames value, checked (0 .. 2^20, else an InputError naming the option); `absent` when the
// option was not given.
std::uint32_t frames_option(const po::variables_map& vm, std::int64_t value, std::uint32_t absent);

// Writes `text` to FILE, or to stdout when FILE is "-".
void write_output(const std::string& path, const std::string& text);

}  // namespace fraglab::cli
