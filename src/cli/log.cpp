// The command's logger: see log.hpp.
#include "cli/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace fraglab::cli::log {
namespace {

std::atomic<bool> progress_shown{false};

// stderr, erasing a progress line in the way first (log.hpp set_progress_line_shown).
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (progress_shown.exchange(false)) std::fputs("\r\x1b[K", stderr);
    spdlog::memory_buf_t text;
    formatter_->format(msg, text);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

// Levels: error = error, warning = warn, note = info, detail (-v) = debug.
spdlog::level::level_enum level_of(Verbosity v) {
  switch (v) {
    case Verbosity::Quiet:
      return spdlog::level::err;
    case Verbosity::Verbose:
      return spdlog::level::debug;
    case Verbosity::Normal:
      break;
  }
  return spdlog::level::info;
}

struct State {
  Verbosity verbosity = Verbosity::Normal;
  bool asked_verbose = false;
  bool asked_quiet = false;
  bool progress = true;
  std::string command;
  spdlog::logger logger{"fraglab", std::make_shared<StderrSink>()};

  State() {
    logger.set_pattern("%v");  // the line exactly as given (log.hpp)
    logger.set_level(level_of(verbosity));
    logger.flush_on(spdlog::level::trace);
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void set_verbosity(Verbosity verbosity) {
  state().asked_verbose = state().asked_verbose || verbosity == Verbosity::Verbose;
  state().asked_quiet = state().asked_quiet || verbosity == Verbosity::Quiet;
  state().verbosity = verbosity;
  state().logger.set_level(level_of(verbosity));
}

Verbosity verbosity() { return state().verbosity; }

bool verbose_and_quiet() { return state().asked_verbose && state().asked_quiet; }

void disable_progress() { state().progress = false; }
bool progress_allowed() { return state().progress; }

void set_command(std::string_view name) { state().command = std::string(name); }
const std::string& command() { return state().command; }

bool apply_global_option(std::string_view arg) {
  if (arg == "-v" || arg == "--verbose") {
    set_verbosity(Verbosity::Verbose);
  } else if (arg == "-q" || arg == "--quiet") {
    set_verbosity(Verbosity::Quiet);
  } else if (arg == "--no-progress") {
    disable_progress();
  } else {
    return false;
  }
  return true;
}

void error(std::string_view line) { state().logger.error("{}", line); }
void warn(std::string_view line) { state().logger.warn("{}", line); }
void note(std::string_view line) { state().logger.info("{}", line); }
void info(std::string_view line) { state().logger.debug("{}", line); }

void set_progress_line_shown(bool shown) { progress_shown = shown; }

}  // namespace fraglab::cli::log
