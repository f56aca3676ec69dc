// What every harness of tests/fuzz shares: the contract that bad input is an InputError and
// nothing else, checks of properties that abort (so libFuzzer reports the input), and scratch
// files for readers that take a path.
//
// A harness defines fuzz_one(); this file defines LLVMFuzzerTestOneInput around it:
//  - fraglab::InputError is the readers' answer to bad input: accepted, the input is just bad;
//  - any other exception (std::out_of_range, nlohmann::json::type_error, std::bad_alloc, ...) is a
//    bug: it is printed and the process aborts, which libFuzzer reports as a crash with the input;
//  - require() failing (a property that does not hold) aborts the same way.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab::fuzz {

// The harness body: read `data` with the reader under test and check its properties.
void fuzz_one(std::string_view data);

[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fraglab fuzz: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline void require(bool ok, std::string_view what) {
  if (!ok) fail(what);
}

// Calls f(); returns the InputError message, or "" when f() returned normally. Any other
// exception escapes (to LLVMFuzzerTestOneInput, which aborts).
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    std::string what = e.what();
    if (what.empty()) fail("an InputError with an empty message");
    return what;
  }
  return {};
}

// A file in a scratch folder of this process, removed when the process exits: for the readers
// that take a path (read_trace, read_results). The same path is rewritten on every input.
inline std::string scratch_file(const std::string& name, std::string_view data) {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("fraglab-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path to_remove = d;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return d;
  }();
  const std::filesystem::path path = dir / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) fail("cannot write the scratch file " + path.string());
  return path.string();
}

}  // namespace fraglab::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    fraglab::fuzz::fuzz_one(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const fraglab::InputError&) {
    // Bad input, refused as it should be.
  } catch (const std::exception& e) {
    fraglab::fuzz::fail(std::string("an exception other than InputError escaped: ") + e.what());
  } catch (...) {
    fraglab::fuzz::fail("a non-std exception escaped");
  }
  return 0;
}
