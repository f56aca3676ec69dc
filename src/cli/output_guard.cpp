#include "cli/output_guard.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "fraglab/types.hpp"

namespace fraglab::cli {

void refuse_overwrite(const std::string& path, bool overwrite) {
  if (overwrite || path == "-") return;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  throw InputError(fmt::format("{}: already exists (--overwrite replaces it)", path));
}

}  // namespace fraglab::cli
