// The policy registry, spec-string parsing ("NAME[:OPTIONS]") and Policy's out-of-line defaults
// (adopt, allocate_into, free).
#include <fmt/format.h>

#include <algorithm>

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

namespace {

// Levenshtein distance, for "did you mean" on a mistyped policy name.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// What an unknown NAME probably meant: an option of a policy given without the policy (as in
// PYTORCH_CUDA_ALLOC_CONF, "expandable_segments:True" -> "pytorch:expandable_segments:True",
// pytorch first since its option names are PyTorch's), or a policy name one or two edits away.
std::string suggestion(std::string_view spec, std::string_view name) {
  const std::vector<const PolicyInfo*> all = PolicyRegistry::instance().all();
  const PolicyInfo* owner = nullptr;
  for (const PolicyInfo* p : all) {
    for (const PolicyOption& o : p->options) {
      if (o.name == name && (owner == nullptr || p->name == "pytorch")) owner = p;
    }
  }
  if (owner != nullptr) return fmt::format(": did you mean '{}:{}'?", owner->name, spec);
  const PolicyInfo* nearest = nullptr;
  std::size_t best = 3;  // at most two edits, and fewer than half the name
  for (const PolicyInfo* p : all) {
    const std::size_t d = edit_distance(name, p->name);
    if (d < best && 2 * d < p->name.size()) best = d, nearest = p;
  }
  if (nearest == nullptr) return "";
  const std::string_view rest = spec.substr(name.size());
  return fmt::format(": did you mean '{}{}'?", nearest->name, rest);
}

}  // namespace

std::unique_ptr<Policy> create_policy(std::string_view spec, Device& device) {
  const std::string_view name = policy_name(spec);
  const PolicyInfo* info = PolicyRegistry::instance().find(name);
  if (info == nullptr) {
    std::string known;
    for (const PolicyInfo* p : PolicyRegistry::instance().all()) {
      known += known.empty() ? "" : ", ";
      known += p->name;
    }
    throw InputError(fmt::format("unknown policy '{}'{} (known: {})", name, suggestion(spec, name), known));
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

bool Policy::allocate_into(Bytes size, StreamId stream, Block& out) {
  std::optional<Block> block = allocate(size, stream);
  if (!block) return false;
  out = *block;
  return true;
}

void Policy::free(const Block& block) {
  free_requested(block);
  free_completed(block);
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
