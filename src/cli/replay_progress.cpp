// terminal_progress: see replay_progress.hpp.
#include "cli/replay_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>

namespace fraglab::cli {
namespace {

constexpr double kQuietSeconds = 1.0;  // replays shorter than this show nothing
constexpr double kRedrawSeconds = 0.1;

struct ProgressLine {
  std::string label;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_drawn = start;
  bool shown = false;

  void update(std::uint64_t done, std::uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done >= total) {
      if (shown) std::cerr << "\r\x1b[K" << std::flush;  // the finished run's line is not kept
      shown = false;
      return;
    }
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (elapsed < kQuietSeconds || std::chrono::duration<double>(now - last_drawn).count() < kRedrawSeconds) return;
    last_drawn = now;
    shown = true;
    const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    std::cerr << fmt::format("\rreplay {}: {:3.0f}% ({} of {} events)\x1b[K", label, fraction * 100, done, total)
              << std::flush;
  }
};

}  // namespace

ReplayProgress terminal_progress(const std::string& label) {
  if (::isatty(STDERR_FILENO) == 0) return {};
  auto line = std::make_shared<ProgressLine>();
  line->label = label;
  return [line](std::uint64_t done, std::uint64_t total) { line->update(done, total); };
}

}  // namespace fraglab::cli
