// Running fraglab (or the backend in this process) on the fake CUDA driver of fake/: the
// environment that makes the backend load it, and its ledger.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "cuda/fake/fake_cuda_ledger.h"
#include "support/command.hpp"

namespace fraglab::testing {

inline constexpr const char* kFakeDriver = FRAGLAB_FAKE_CUDA_DRIVER;

// "FRAGLAB_CUDA_DRIVER=<fake> FRAGLAB_FAKE_CUDA_LEDGER=<ledger> " + extra, as shell words
// to put before the command.
inline std::string fake_env(const fs::path& ledger, const std::string& extra = "") {
  return "env FRAGLAB_CUDA_DRIVER=" + std::string(kFakeDriver) + " FRAGLAB_FAKE_CUDA_LEDGER=" + ledger.string() + " " +
         extra + " ";
}

// `fraglab ARGS` with `env` before it (run_fraglab puts the binary first, so this builds the
// command line itself).
inline CommandResult run_with_env(const std::string& env, const std::string& args) {
  return run_command(env + std::string(FRAGLAB_BINARY) + " " + args);
}

// The ledger file a process left ("key=value ..."), as a map.
inline std::map<std::string, unsigned long long> read_ledger(const fs::path& path) {
  std::map<std::string, unsigned long long> values;
  std::istringstream in(read_text(path));
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) values[item.substr(0, eq)] = std::stoull(item.substr(eq + 1));
  }
  return values;
}

// The fake driver loaded in this process (the backend dlopens the same file, so this is its
// instance): its ledger and its memory thief.
struct FakeDriverHandle {
  void* handle = ::dlopen(kFakeDriver, RTLD_NOW | RTLD_LOCAL);
  FakeCudaLedger ledger() const {
    auto f = reinterpret_cast<FakeCudaLedger (*)()>(::dlsym(handle, "fake_cuda_ledger"));
    return f();
  }
  void take_memory(std::int64_t bytes) const {
    auto f = reinterpret_cast<void (*)(std::int64_t)>(::dlsym(handle, "fake_cuda_take_memory"));
    f(bytes);
  }
};

}  // namespace fraglab::testing
