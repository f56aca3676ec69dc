// Version names (the `version:` option) <-> Version values. See version.hpp for the behaviours.
#include "pytorch/version.hpp"

#include <array>
#include <utility>

namespace fraglab::cca {
namespace {
constexpr std::array<std::pair<std::string_view, Version>, 8> kNames{{
    {"1.13", Version::V1_13},
    {"2.0", Version::V2_0},
    {"2.1", Version::V2_1},
    {"2.4", Version::V2_4},
    {"2.6", Version::V2_6},
    {"2.8", Version::V2_8},
    {"2.9", Version::V2_9},
    {"newest", Version::Newest},
}};
}  // namespace

std::optional<Version> parse_version(std::string_view text) {
  for (const auto& [name, v] : kNames) {
    if (name == text) return v;
  }
  return std::nullopt;
}

std::string_view version_name(Version v) {
  for (const auto& [name, value] : kNames) {
    if (value == v) return name;
  }
  return "?";
}

}  // namespace fraglab::cca
