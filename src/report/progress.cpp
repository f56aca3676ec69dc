// Progress text for long sweeps: a bar redrawn in place on a terminal, plain lines in logs (a
// Slurm log or a CI console shows every line, so redrawing with '\r' would only add noise).
#include <fmt/format.h>

#include <cmath>

#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<std::uint64_t>(std::llround(seconds));
  const std::uint64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{}:{:02}", m, s);
}

std::string format_progress(std::size_t done, std::size_t total, double elapsed_seconds, bool terminal) {
  const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  const double rate = elapsed_seconds > 0 ? static_cast<double>(done) / elapsed_seconds : 0.0;
  const std::string eta = done == 0 || rate <= 0 ? "?" : format_duration(static_cast<double>(total - done) / rate);
  const std::string figures = fmt::format("{}/{} {:3.0f}% {:.1f} runs/s elapsed {} ETA {}", done, total, fraction * 100,
                                          rate, format_duration(elapsed_seconds), eta);
  if (!terminal) return "sweep: " + figures;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  return fmt::format("[{}{}] {}", std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(kWidth - filled), '.'), figures);
}

}  // namespace fraglab
