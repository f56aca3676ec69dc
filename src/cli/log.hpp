// The command's diagnostics: every note, warning and error line goes to stderr through one spdlog
// logger, so -q / -v (global options, README "Global options") decide what is shown, and stdout
// carries only results (`--json -` stays clean JSON). Lines are printed exactly as given: no
// timestamp or level prefix, since tests and scripts match the "fraglab replay: error: ..." and
// "warning: ..." texts the commands have always printed.
#pragma once

#include <string>
#include <string_view>

namespace fraglab::cli::log {

// -q: errors only; default: errors, warnings and notes; -v: also details (files read, settings
// chosen, timing).
enum class Verbosity { Quiet, Normal, Verbose };

void set_verbosity(Verbosity verbosity);
Verbosity verbosity();
// Both -v and -q were given (before the command, after it, or both): a usage error.
bool verbose_and_quiet();
inline constexpr const char* kVerboseAndQuiet = "-v (--verbose) and -q (--quiet): expected one of them";

// --no-progress (and the default on a non-terminal stderr): no progress lines at all.
void disable_progress();
bool progress_allowed();

// The subcommand being run ("replay"), for progress lines; set by main.
void set_command(std::string_view name);
const std::string& command();

// Applies a global option given before the subcommand ("-v", "--quiet", "--no-progress"); false
// (and nothing changes) when `arg` is not one.
bool apply_global_option(std::string_view arg);

// One line each (no trailing newline). error: shown always, even under -q; warn and note: not
// under -q; info: only under -v.
void error(std::string_view line);
void warn(std::string_view line);
void note(std::string_view line);
void info(std::string_view line);

// The progress line (progress.cpp) tells the logger while it is drawn, so that a diagnostic
// printed meanwhile first erases it instead of running on from its end.
void set_progress_line_shown(bool shown);

}  // namespace fraglab::cli::log
