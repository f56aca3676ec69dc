// Progress of long work, for a person watching a terminal: a line on stderr redrawn in place
// ("replay pytorch: 42% (1234567 of 2939445 events, 1.9M events/s, ETA 0:01)"), shown only when
// stderr is a terminal, --no-progress was not given and the command has run for a second, and
// erased when the work ends. stdout and non-terminal stderr never see it, so every command's
// output stays the same bytes from run to run (README "Same input and options, same output bytes").
//
// FRAGLAB_PROGRESS_AFTER=SECONDS (a testing knob, README "Global options") replaces the one second.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "fraglab/run_replay.hpp"

namespace fraglab::cli {

// True when progress may be drawn at all: stderr is a terminal and --no-progress was not given.
bool progress_on_terminal();
// True once the command has run its quiet second (FRAGLAB_PROGRESS_AFTER): progress may be drawn.
bool progress_due();

// One progress line: `label` (e.g. "replay pytorch") and the `unit` counted (e.g. "events").
class ProgressLine {
 public:
  ProgressLine(std::string label, std::string unit);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // `done` of `total` units; redraws at most ten times a second, erases the line when done >= total.
  void update(std::uint64_t done, std::uint64_t total);
  // Erases the line if it is shown.
  void clear();

 private:
  std::string label_;
  std::string unit_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_drawn_;
};

// A progress callback drawing one ProgressLine "<command> <label>" of `unit`; empty when
// progress_on_terminal() is false. (The signature of ReplayProgress and ReadProgress.)
std::function<void(std::uint64_t, std::uint64_t)> progress_callback(const std::string& label, const std::string& unit);

// A progress callback for run_replay's observers, labelled "<command> <spec>"; under -v it also
// says on stderr how long the replay took. Empty (no observer at all) when progress_on_terminal()
// is false and -v was not given.
ReplayProgress terminal_progress(const std::string& label);

// The thread main() runs on (set before main starts).
std::thread::id main_thread_id();

// Two callbacks, one per replay of a pair run on two threads at once (diff), drawing one line
// "<command> <label>" of the events of both: `total`, the events of both traces.
std::pair<ReplayProgress, ReplayProgress> paired_progress(const std::string& label, std::uint64_t total);

}  // namespace fraglab::cli
