// Option parsing for the gmlake policy (the table is in options.hpp).
#include "gmlake/options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "fraglab/policy.hpp"

namespace fraglab::gmlake {
namespace {

[[noreturn]] void reject(std::string_view key, std::string_view value, std::string_view accepted) {
  throw InputError(fmt::format("gmlake: {}: '{}' is not accepted (expected {})", key, value, accepted));
}

bool parse_flag(std::string_view key, std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  reject(key, value, "true, false, 1 or 0");
}

std::uint64_t parse_whole(std::string_view key, std::string_view value, std::string_view accepted) {
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc{} || end != value.data() + value.size()) reject(key, value, accepted);
  return number;
}

}  // namespace

Options parse_options(std::string_view text) {
  Options o;
  for (const OptionItem& item : split_options(text, "gmlake")) {
    const std::string_view key = item.key;
    const std::string_view value = item.value;
    if (key == "vmm_defragment") {
      o.vmm_defragment = parse_flag(key, value);
    } else if (key == "re_alloc") {
      o.re_alloc = parse_flag(key, value);
    } else if (key == "self_check") {
      o.self_check = parse_flag(key, value);
    } else if (key == "frag_limit") {
      constexpr std::string_view kAccepted = "a whole number of MiB >= 0";
      const std::uint64_t mib = parse_whole(key, value, kAccepted);
      if (mib > std::numeric_limits<Bytes>::max() / MiB) reject(key, value, kAccepted);
      o.frag_limit = mib * MiB;
    } else if (key == "reuse_limit") {
      double limit = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc{} || end != value.data() + value.size() || !std::isfinite(limit) || limit <= 0) {
        reject(key, value, "a number > 0");
      }
      o.reuse_limit = limit;
    } else if (key == "defrag_level") {
      if (value == "0" || value == "1" || value == "2") {
        o.defrag_level = value[0] - '0';
      } else {
        reject(key, value, "0, 1 or 2");
      }
    } else if (key == "auto_gc") {
      constexpr std::string_view kAccepted = "a whole number of GiB >= 0";
      o.auto_gc_gib = parse_whole(key, value, kAccepted);
      if (o.auto_gc_gib > std::numeric_limits<Bytes>::max() / GiB) reject(key, value, kAccepted);
    } else {
      throw InputError(
          fmt::format("gmlake: unknown option '{}' (accepted: vmm_defragment, frag_limit, reuse_limit, defrag_level, "
                      "auto_gc, re_alloc, self_check)",
                      key));
    }
  }
  return o;
}

}  // namespace fraglab::gmlake
