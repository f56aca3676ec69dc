// When two policy specs build the same policy: canonical_spec() (fraglab/policy.hpp). `compare`
// and `sweep` use it to find the run of a trace's own recorded settings among the settings they
// were given, and the start state to use (README "What-if answers on a snapshot").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "fraglab/policy.hpp"

namespace fraglab {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Values a user writes differently for the same setting: booleans in any case ("true", "True").
bool same_value(std::string_view a, std::string_view b) {
  if (a == b) return true;
  const std::string la = lower(a), lb = lower(b);
  return (la == "true" || la == "false") && la == lb;
}

}  // namespace

std::string canonical_spec(std::string_view spec) {
  const std::string_view name = policy_name(spec);
  const std::string_view options = spec.size() > name.size() ? spec.substr(name.size() + 1) : std::string_view{};
  const PolicyInfo* info = PolicyRegistry::instance().find(name);
  std::vector<OptionItem> items = split_options(options, name);
  // The last of a repeated key wins, as when the policy parses it.
  std::vector<OptionItem> kept;
  // Backwards by iterator: clang 14 (the fuzz build, tests/fuzz) cannot compile libstdc++ 12's
  // std::ranges::reverse_view.
  for (auto it = items.rbegin(); it != items.rend(); ++it) {  // NOLINT(modernize-loop-convert)
    const OptionItem& item = *it;
    if (std::none_of(kept.begin(), kept.end(), [&](const OptionItem& k) { return k.key == item.key; })) {
      kept.push_back(item);
    }
  }
  std::erase_if(kept, [&](const OptionItem& item) {
    if (info == nullptr) return false;
    const auto option = std::find_if(info->options.begin(), info->options.end(),
                                     [&](const PolicyOption& o) { return o.name == item.key; });
    return option != info->options.end() && same_value(option->default_value, item.value);
  });
  std::sort(kept.begin(), kept.end(), [](const OptionItem& a, const OptionItem& b) { return a.key < b.key; });
  std::string out(name);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::string value =
        lower(kept[i].value) == "true" || lower(kept[i].value) == "false" ? lower(kept[i].value) : kept[i].value;
    out += fmt::format("{}{}:{}", i == 0 ? ":" : ",", kept[i].key, value);
  }
  return out;
}

bool same_policy(std::string_view a, std::string_view b) { return canonical_spec(a) == canonical_spec(b); }

}  // namespace fraglab
