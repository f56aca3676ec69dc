// format_bytes: byte counts in words, for every part's messages and reports (fraglab/types.hpp).
#include <fmt/format.h>

#include "fraglab/types.hpp"

namespace fraglab {

std::string format_bytes(Bytes bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < KiB) return fmt::format("{} B", bytes);
  if (bytes < MiB) return fmt::format("{:.2f} KiB", b / KiB);
  if (bytes < GiB) return fmt::format("{:.2f} MiB", b / MiB);
  return fmt::format("{:.2f} GiB", b / GiB);
}

}  // namespace fraglab
