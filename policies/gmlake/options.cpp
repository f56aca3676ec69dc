// Option parsing for the gmlake policy (the table is in options.hpp; names, defaults and the
// unknown-option error come from the registration in policy.cpp, through kit::OptionReader).
#include "gmlake/options.hpp"

#include <fmt/format.h>

#include "fraglab/policy_kit.hpp"

namespace fraglab::gmlake {

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("gmlake", text);
  return Options{
      reader.flag("vmm_defragment"),
      reader.get<Bytes>("frag_limit", "a whole number of MiB >= 0",
                        [](std::string_view v) { return kit::parse_whole_units(v, MiB); }),
      reader.get<double>("reuse_limit", "a number > 0",
                         [](std::string_view v) -> std::optional<double> {
                           const std::optional<double> limit = kit::parse_number(v);
                           if (!limit || *limit <= 0) return std::nullopt;
                           return limit;
                         }),
      static_cast<int>(reader.choice("defrag_level", {"0", "1", "2"})),
      reader.get<std::uint64_t>("auto_gc", "a whole number of GiB >= 0",
                                [](std::string_view v) { return kit::parse_whole(v, UINT64_MAX / GiB); }),
      reader.flag("re_alloc"),
      reader.flag("self_check"),
  };
}

}  // namespace fraglab::gmlake
