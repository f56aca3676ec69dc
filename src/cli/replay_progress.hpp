// Progress of one long replay, for a person watching a terminal: a line on stderr redrawn in
// place, shown only when stderr is a terminal and the replay has run for a second, and erased when
// it ends. stdout and non-terminal stderr never see it, so every command's output stays the same
// bytes from run to run (README "Same input and options, same output bytes").
#pragma once

#include <string>

#include "fraglab/run_replay.hpp"

namespace fraglab::cli {

// A progress callback for run_replay's observers, labelled with the policy spec; empty (no
// observer at all) when stderr is not a terminal.
ReplayProgress terminal_progress(const std::string& label);

}  // namespace fraglab::cli
