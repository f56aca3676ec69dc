// Running the built fraglab binary from tests: to completion (exit status, stdout, stderr) or in
// the background (a pid the test can kill). Shared by the end-to-end suites.
#pragma once

#include <signal.h>  // NOLINT(modernize-deprecated-headers): kill() is POSIX, not in <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fraglab::testing {

namespace fs = std::filesystem;

struct CommandResult {
  int status = -1;  // exit status; -1 if killed by a signal or not started
  std::string out;
  std::string err;
};

// This process's own folder under the system temp dir, made by mkdtemp on first use and removed
// when the process exits. Not named by pid: a pid is reused, and a folder left by an earlier run
// (another build, an older fraglab, a crash) must never be mistaken for this run's files.
inline const fs::path& scratch_root() {
  static const fs::path root = [] {
    std::string pattern = (fs::temp_directory_path() / "fraglab-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    static const fs::path to_remove = pattern;
    static const pid_t owner = ::getpid();
    std::atexit([] {
      if (::getpid() != owner) return;  // a forked child that exits normally leaves the folder alone
      std::error_code ignored;
      fs::remove_all(to_remove, ignored);
    });
    return fs::path(pattern);
  }();
  return root;
}

// A fresh folder of this process for one use (`name`), inside scratch_root().
inline fs::path scratch_dir(const std::string& name) {
  const fs::path dir = scratch_root() / name;
  fs::create_directories(dir);
  return dir;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A shell command line, waiting for it to end: its stdout, its stderr (through a scratch file) and
// its exit status.
inline CommandResult run_command(const std::string& command_line) {
  static int counter = 0;
  const fs::path err = scratch_dir("cmd") / ("stderr-" + std::to_string(counter++) + ".txt");
  CommandResult result;
  FILE* pipe = ::popen((command_line + " 2>" + err.string()).c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.err = read_text(err);
  return result;
}

// `fraglab ARGS` through the shell (ARGS are shell words), waiting for it to end.
inline CommandResult run_fraglab(const std::string& args) {
  return run_command(std::string(FRAGLAB_BINARY) + " " + args);
}

// Starts `fraglab ARGS...` (no shell) with stdout and stderr sent to `log`; returns its pid.
inline pid_t spawn_fraglab(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  FILE* f = std::fopen(log.c_str(), "wb");
  if (f != nullptr) {
    ::dup2(::fileno(f), STDOUT_FILENO);
    ::dup2(::fileno(f), STDERR_FILENO);
  }
  std::vector<char*> argv;
  std::string binary = FRAGLAB_BINARY;
  argv.push_back(binary.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  ::_exit(127);
}

// Waits for a spawned process; its exit status, or -1 if a signal ended it.
inline int wait_for(pid_t pid) {
  int raw = 0;
  if (::waitpid(pid, &raw, 0) != pid) return -1;
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

inline size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

}  // namespace fraglab::testing
