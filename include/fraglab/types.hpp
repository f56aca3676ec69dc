// Basic vocabulary shared by every part of fraglab.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fraglab {

using Bytes = std::uint64_t;     // a byte count
using Addr = std::uint64_t;      // a device virtual address
using StreamId = std::uint64_t;  // a CUDA stream, compared by raw pointer value as PyTorch does
using AllocId = std::uint64_t;   // identifies one allocation inside a trace

inline constexpr Bytes KiB = 1024;
inline constexpr Bytes MiB = 1024 * KiB;
inline constexpr Bytes GiB = 1024 * MiB;

// "1.50 GiB", "512.00 MiB", "12 B": binary units, two decimals (src/core/format_bytes.cpp).
std::string format_bytes(Bytes bytes);

// Bad input (trace, option, command line). Carries a one-line message that names the file,
// line or event and what was expected; the CLI prints it and exits with status 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fraglab
