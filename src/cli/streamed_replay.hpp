// `fraglab replay` of a JSONL trace streamed from its file (fraglab/trace_stream.hpp): the events
// go to every policy's replay a window at a time and are never all held, so a 9 M-event trace
// replays in a fraction of the memory and time of reading it whole (README "Speed").
//
// Invariants:
//  - the output is the whole-trace path's, byte for byte: the same events in the same order reach
//    the same Replayer (Replayer::start/feed/finish), the trace summary comes from the same
//    SummaryBuilder, the JSON's request hash from the same RequestHasher;
//  - it is tried only where that holds without looking at the events first: policies whose
//    prepare() needs no events (not offline, not gemini; an unknown name is not tried), no
//    --timeline, --export-snapshot or --frames, no progress line on a terminal (it counts events
//    against a total only a whole read knows); TraceStream::open refuses files with a start state
//    or stack frames, stdin, gzip and pickles;
//  - a trace with observed events (segment_*, oom) may choose the device (its recorded oom) and
//    infers empty_cache calls from them: at the first one the streamed run is dropped (nothing
//    was printed) and the caller reads the trace whole.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/device_choice.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::cli {

// Policies whose replay may be streamed: their prepare() reads no events of a trace that starts
// from nothing (TraceStream streams no other).
bool streamable_policy(const std::string& spec);

struct StreamedReplayRun {
  Trace header;  // the trace without its events (strings complete)
  TraceSummary summary;
  std::string request_hash;  // set when asked for
  DeviceChoice device;
  StartState start_state = StartState::Recorded;
  std::vector<ReplayResult> results;
};

struct StreamedReplayOptions {
  std::optional<std::string> device_option;  // --device
  std::string start_option;                  // --start-state
  ReplayOptions replay;                      // its start_state is chosen here
  bool check_invariants = false;
  bool anatomy = false;  // and the request hash: what the results JSON needs
};

// The replays of `specs` over the trace at `path`, streamed; nullopt when the file cannot be
// streamed (see above): read it whole instead. Throws the InputError read_trace() would on a bad
// line.
std::optional<StreamedReplayRun> replay_streamed(const std::string& path, const std::vector<std::string>& specs,
                                                 const StreamedReplayOptions& options);

}  // namespace fraglab::cli
