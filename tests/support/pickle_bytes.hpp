// Writing pickle bytes in tests: string literals with embedded NULs, and hex dumps of what
// CPython's pickle module wrote. Shared by the pickle reader's suites.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fraglab::testing {

// Bytes of a string literal, embedded NULs included (no hand-counted lengths).
template <std::size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

inline std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

}  // namespace fraglab::testing
