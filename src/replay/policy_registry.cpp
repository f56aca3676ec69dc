// The policy registry, spec-string parsing ("NAME[:OPTIONS]") and the default adopt().
#include <fmt/format.h>

#include "fraglab/policy.hpp"

namespace fraglab {

PolicyRegistry& PolicyRegistry::instance() {
  // Filled once during static initialisation by PolicyRegistration objects, read-only after.
  static PolicyRegistry registry;
  return registry;
}

void PolicyRegistry::add(PolicyInfo info) {
  std::string name = info.name;
  policies_.insert_or_assign(std::move(name), std::move(info));
}

const PolicyInfo* PolicyRegistry::find(std::string_view name) const {
  auto it = policies_.find(name);
  return it == policies_.end() ? nullptr : &it->second;
}

std::vector<const PolicyInfo*> PolicyRegistry::all() const {
  std::vector<const PolicyInfo*> out;
  for (const auto& [name, info] : policies_) out.push_back(&info);
  return out;
}

std::string_view policy_name(std::string_view spec) { return spec.substr(0, spec.find(':')); }

std::unique_ptr<Policy> create_policy(std::string_view spec, Device& device) {
  const std::string_view name = policy_name(spec);
  const PolicyInfo* info = PolicyRegistry::instance().find(name);
  if (info == nullptr) {
    std::string known;
    for (const PolicyInfo* p : PolicyRegistry::instance().all()) {
      known += known.empty() ? "" : ", ";
      known += p->name;
    }
    throw InputError(fmt::format("unknown policy '{}' (known: {})", name, known));
  }
  const std::string_view options = name.size() < spec.size() ? spec.substr(name.size() + 1) : "";
  return info->create(options, device);
}

std::vector<OptionItem> split_options(std::string_view options, std::string_view policy) {
  std::vector<OptionItem> items;
  size_t pos = 0;
  while (pos < options.size()) {
    // A key runs to ':'; a value runs to the next ',' outside brackets.
    const size_t colon = options.find(':', pos);
    const size_t comma = options.find(',', pos);
    if (colon == std::string_view::npos || (comma != std::string_view::npos && comma < colon)) {
      const std::string_view key = options.substr(pos, std::min(comma, options.size()) - pos);
      throw InputError(fmt::format("{}: option '{}' has no value (expected {}:VALUE)", policy, key, key));
    }
    OptionItem item;
    item.key = std::string(options.substr(pos, colon - pos));
    size_t end = colon + 1;
    int depth = 0;
    while (end < options.size() && (depth > 0 || options[end] != ',')) {
      if (options[end] == '[') ++depth;
      if (options[end] == ']') --depth;
      ++end;
    }
    item.value = std::string(options.substr(colon + 1, end - colon - 1));
    if (item.value.empty()) {
      throw InputError(fmt::format("{}: option '{}' has no value (expected {}:VALUE)", policy, item.key, item.key));
    }
    items.push_back(std::move(item));
    pos = end + 1;
  }
  return items;
}

std::vector<std::optional<Block>> Policy::adopt(const InitialState& initial) { return allocate_initial(initial); }

std::vector<std::optional<Block>> Policy::allocate_initial(const InitialState& initial) {
  std::vector<std::optional<Block>> blocks;
  blocks.reserve(initial.allocations.size());
  for (const InitialAllocation& a : initial.allocations) {
    std::optional<Block> block = allocate(a.requested, a.stream);
    if (block && a.free_requested) free_requested(*block);
    blocks.push_back(block);
  }
  return blocks;
}

}  // namespace fraglab
