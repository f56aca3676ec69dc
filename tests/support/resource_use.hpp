// Running the built fraglab binary and measuring what it used: peak resident memory and CPU time
// (from wait4's rusage of the child alone). For the tests that hold hostile inputs to a memory
// and time bound (README "Reliability").
//
// CPU time, not wall time, so that a loaded machine (ctest -j) does not fail a bound; bounds are
// set far from the measured figures and far below what the quadratic or unbounded behaviour each
// test guards against would take. Under AddressSanitizer both figures are larger (shadow memory,
// the free quarantine, slower code): FRAGLAB_ASAN_BUILD lets a test use the sanitizer's allowance.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/command.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define FRAGLAB_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FRAGLAB_ASAN_BUILD 1
#endif
#endif
#ifndef FRAGLAB_ASAN_BUILD
#define FRAGLAB_ASAN_BUILD 0
#endif

namespace fraglab::testing {

struct MeasuredRun {
  int status = -1;  // exit status; -1 if a signal ended it or it did not start
  int signal = 0;   // the signal that ended it, if one did
  std::string out;
  std::string err;
  double cpu_seconds = 0;           // user + system
  std::uint64_t max_rss_bytes = 0;  // peak resident set size
};

// Memory a test may allow on top of its bound for the sanitizer's own use: ASan's shadow and its
// quarantine of freed blocks (256 MiB by default) count in the child's resident set.
inline constexpr std::uint64_t kSanitizerAllowance = FRAGLAB_ASAN_BUILD ? (std::uint64_t{400} << 20) : 0;
// How much slower sanitized code may be than a Release build, for CPU-time bounds.
inline constexpr double kSanitizerSlowdown = FRAGLAB_ASAN_BUILD ? 4.0 : 1.0;

// Runs `fraglab ARGS...` (no shell), stdin from `stdin_path` (or /dev/null), and measures it.
// `address_limit` (bytes, 0: none) caps the child's address space (RLIMIT_AS), so every allocation
// beyond it fails: not under AddressSanitizer, whose shadow memory alone exceeds any such cap.
inline MeasuredRun run_fraglab_measured(const std::vector<std::string>& args, const fs::path& stdin_path = {},
                                        std::uint64_t address_limit = 0) {
  static int counter = 0;
  const fs::path dir = scratch_dir("measured");
  const fs::path out_path = dir / ("out-" + std::to_string(counter) + ".txt");
  const fs::path err_path = dir / ("err-" + std::to_string(counter) + ".txt");
  ++counter;
  MeasuredRun run;
  const pid_t pid = ::fork();
  if (pid < 0) return run;
  if (pid == 0) {
    const std::string in = stdin_path.empty() ? std::string("/dev/null") : stdin_path.string();
    const int in_fd = ::open(in.c_str(), O_RDONLY);
    const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(126);
    if (address_limit != 0) {
      const struct rlimit limit { address_limit, address_limit };
      ::setrlimit(RLIMIT_AS, &limit);
    }
    ::dup2(in_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    std::vector<std::string> copy = args;
    std::string binary = FRAGLAB_BINARY;
    std::vector<char*> argv{binary.data()};
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  int raw = 0;
  struct rusage usage {};
  if (::wait4(pid, &raw, 0, &usage) != pid) return run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
  run.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  run.max_rss_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  run.out = read_text(out_path);
  run.err = read_text(err_path);
  return run;
}

// True when `err` is exactly one line (one message, ending in a newline).
inline bool is_one_line(const std::string& err) { return !err.empty() && count_lines(err) == 1 && err.back() == '\n'; }

}  // namespace fraglab::testing
