// ProgressLine and terminal_progress: see replay_progress.hpp.
#include "cli/replay_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "cli/log.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab::cli {
namespace {

using Clock = std::chrono::steady_clock;

// When the command started: progress waits for it to have run a second, whatever part of the
// work is under way then (reading a trace counts too).
const Clock::time_point kCommandStart = Clock::now();
const std::thread::id kMainThread = std::this_thread::get_id();  // static initialisation runs on it
constexpr double kRedrawSeconds = 0.1;

double quiet_seconds() {
  static const double seconds = [] {
    const char* text = std::getenv("FRAGLAB_PROGRESS_AFTER");  // testing knob (replay_progress.hpp)
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    return end != nullptr && *end == '\0' && value >= 0 ? value : 1.0;
  }();
  return seconds;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "1.9M" for a rate: three significant figures at most, so the line does not jitter.
std::string short_count(double value) {
  if (value >= 1e9) return fmt::format("{:.1f}G", value / 1e9);
  if (value >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

}  // namespace

bool progress_on_terminal() { return log::progress_allowed() && ::isatty(STDERR_FILENO) != 0; }

std::thread::id main_thread_id() { return kMainThread; }

bool progress_due() { return seconds_between(kCommandStart, Clock::now()) >= quiet_seconds(); }

ProgressLine::ProgressLine(std::string label, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      enabled_(progress_on_terminal()),
      start_(Clock::now()),
      last_drawn_(start_) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::clear() {
  if (!shown_) return;
  shown_ = false;
  log::set_progress_line_shown(false);
  std::fputs("\r\x1b[K", stderr);  // the finished work's line is not kept
  std::fflush(stderr);
}

void ProgressLine::update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_) return;
  if (done >= total) {
    clear();
    return;
  }
  if (!progress_due()) return;
  const Clock::time_point now = Clock::now();
  if (shown_ && seconds_between(last_drawn_, now) < kRedrawSeconds) return;
  last_drawn_ = now;
  const double elapsed = seconds_between(start_, now);
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const std::string eta = done == 0 || rate <= 0 ? "?" : format_duration(static_cast<double>(total - done) / rate);
  const double percent = total == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total);
  const std::string line = fmt::format("\r{}: {:3.0f}% ({} of {} {}, {} {}/s, ETA {})\x1b[K", label_, percent, done,
                                       total, unit_, short_count(rate), unit_, eta);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
  log::set_progress_line_shown(true);
}

std::function<void(std::uint64_t, std::uint64_t)> progress_callback(const std::string& label, const std::string& unit) {
  if (!progress_on_terminal()) return {};
  auto line = std::make_shared<ProgressLine>(log::command() + " " + label, unit);
  return [line](std::uint64_t done, std::uint64_t total) { line->update(done, total); };
}

ReplayProgress terminal_progress(const std::string& label) {
  const bool verbose = log::verbosity() == log::Verbosity::Verbose;
  if (!progress_on_terminal() && !verbose) return {};
  const std::string command = log::command().empty() ? "replay" : log::command();
  auto line = std::make_shared<ProgressLine>(command + " " + label, "events");
  const Clock::time_point start = Clock::now();
  return [line, start, verbose, name = command + " " + label](std::uint64_t done, std::uint64_t total) {
    line->update(done, total);
    if (verbose && done >= total) {
      const double seconds = seconds_between(start, Clock::now());
      log::info(fmt::format("{}: {} events in {:.2f} s ({} events/s)", name, total, seconds,
                            short_count(seconds > 0 ? static_cast<double>(total) / seconds : 0.0)));
    }
  };
}

std::pair<ReplayProgress, ReplayProgress> paired_progress(const std::string& label, std::uint64_t total) {
  if (!progress_on_terminal()) return {};
  struct Pair {
    std::mutex mutex;
    ProgressLine line;
    std::uint64_t total;
    std::uint64_t done[2] = {0, 0};
    Pair(std::string text, std::uint64_t events) : line(std::move(text), "events"), total(events) {}
  };
  auto pair = std::make_shared<Pair>(log::command() + " " + label, total);
  const auto side = [pair](int i) {
    return [pair, i](std::uint64_t done, std::uint64_t /*total of this side*/) {
      const std::lock_guard<std::mutex> lock(pair->mutex);
      pair->done[i] = done;
      pair->line.update(pair->done[0] + pair->done[1], pair->total);
    };
  };
  return {side(0), side(1)};
}

}  // namespace fraglab::cli
