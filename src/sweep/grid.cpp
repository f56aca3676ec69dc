// The sweep grid: `--grid KEY=V1,V2,...` axes, their validation against the policy registry, the
// cartesian product as spec strings, and `--shard I/N`.
//
// Invariant: expand_grid() is a pure function of the grid, so every process that is given the
// same command line enumerates the same runs in the same order (shards and resume rely on it).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "fraglab/memory_budget.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string with_option(std::string_view spec, std::string_view key, std::string_view value) {
  std::string out(spec);
  if (out.find(':') == std::string::npos)
    out += ':';
  else if (out.back() != ':')
    out += ',';
  return fmt::format("{}{}:{}", out, key, value);
}

// Builds the policy on a scratch device; the policy's own InputError says what is wrong.
void try_spec(const std::string& spec) {
  SimDevice scratch;
  create_policy(spec, scratch);
}

}  // namespace

GridAxis parse_grid_axis(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    throw InputError(fmt::format("--grid '{}': expected KEY=V1,V2,... (e.g. max_split_size_mb=none,128,256)", text));
  }
  GridAxis axis;
  axis.key = std::string(trim(text.substr(0, eq)));
  if (axis.key.empty()) throw InputError(fmt::format("--grid '{}': the option name before '=' is empty", text));
  const std::string_view list = text.substr(eq + 1);
  // Values end at commas outside brackets: "[256:1,>:8]" is one value.
  std::set<std::string> seen;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size()) {
      if (list[i] == '[') ++depth;
      if (list[i] == ']' && --depth < 0) {
        throw InputError(fmt::format("--grid {}: unbalanced ']' in '{}'", axis.key, list));
      }
      if (list[i] != ',' || depth > 0) continue;
    }
    const std::string_view value = trim(list.substr(start, i - start));
    start = i + 1;
    if (value.empty()) {
      throw InputError(fmt::format("--grid {}: empty value in '{}' (expected V1,V2,...; 'none' leaves the option out)",
                                   axis.key, list));
    }
    if (!seen.insert(std::string(value)).second) {
      throw InputError(fmt::format("--grid {}: value '{}' is listed twice", axis.key, value));
    }
    if (value == "none")
      axis.values.emplace_back(std::nullopt);
    else
      axis.values.emplace_back(std::string(value));
  }
  if (depth != 0) throw InputError(fmt::format("--grid {}: unbalanced '[' in '{}'", axis.key, list));
  return axis;
}

void validate_grid(const SweepGrid& grid) {
  try_spec(grid.base_spec);  // unknown policy or bad fixed option: the registry's own message
  const std::string_view name = policy_name(grid.base_spec);
  const PolicyInfo* info = PolicyRegistry::instance().find(name);
  const std::string_view fixed =
      name.size() < grid.base_spec.size() ? std::string_view(grid.base_spec).substr(name.size() + 1) : "";
  std::set<std::string> fixed_keys;
  for (const OptionItem& item : split_options(fixed, name)) fixed_keys.insert(item.key);

  std::set<std::string> swept;
  for (const GridAxis& axis : grid.axes) {
    const bool known = std::any_of(info->options.begin(), info->options.end(),
                                   [&](const PolicyOption& o) { return o.name == axis.key; });
    if (!known) {
      std::string names;
      for (const PolicyOption& o : info->options) names += fmt::format("{}{}", names.empty() ? "" : ", ", o.name);
      throw InputError(fmt::format("--grid {}: policy '{}' has no option '{}' (options: {})", axis.key, name, axis.key,
                                   names.empty() ? "none" : names));
    }
    if (fixed_keys.count(axis.key) != 0) {
      throw InputError(fmt::format("--grid {}: the option is also fixed in -p '{}' (sweep it or fix it, not both)",
                                   axis.key, grid.base_spec));
    }
    if (!swept.insert(axis.key).second) {
      throw InputError(
          fmt::format("--grid {}: the option is swept twice (give all its values in one --grid)", axis.key));
    }
    if (axis.values.empty()) throw InputError(fmt::format("--grid {}: no values", axis.key));
    for (const auto& value : axis.values) {
      if (!value) continue;
      try {
        try_spec(with_option(grid.base_spec, axis.key, *value));
      } catch (const InputError& e) {
        throw InputError(fmt::format("--grid {}={}: {}", axis.key, *value, e.what()));
      }
    }
  }
  // Values that are fine alone can clash together (e.g. expandable_segments on a version that
  // lacks it): try every combination now rather than fail in the middle of a sweep.
  const std::uint64_t settings = grid_size(grid);
  for (std::uint64_t n = 0; n < settings; ++n) {
    const Setting setting = grid_setting(grid, n);
    try {
      try_spec(setting.spec);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--grid: the setting '{}' is invalid: {}", setting.spec, e.what()));
    }
  }
}

std::vector<Setting> expand_grid(const SweepGrid& grid) {
  const std::uint64_t n = grid_size(grid);
  check_memory_estimate(n * sweep_run_bytes(grid) / 4, "--grid: every setting of the grid");
  std::vector<Setting> settings;
  settings.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) settings.push_back(grid_setting(grid, i));
  return settings;
}

std::uint64_t grid_size(const SweepGrid& grid) {
  std::uint64_t n = 1;
  for (const GridAxis& axis : grid.axes) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(axis.values.size()), &n)) {
      std::string counts;
      for (const GridAxis& a : grid.axes)
        counts += fmt::format("{}{} {}", counts.empty() ? "" : " x ", a.values.size(), a.key);
      throw InputError(fmt::format("--grid: {} settings is more than 2^64", counts));
    }
  }
  return n;
}

Setting grid_setting(const SweepGrid& grid, std::uint64_t n) {
  Setting s;
  s.values.resize(grid.axes.size());
  for (std::size_t a = grid.axes.size(); a-- > 0;) {
    const std::uint64_t radix = grid.axes[a].values.size();
    s.values[a] = grid.axes[a].values.at(static_cast<std::size_t>(n % radix));
    n /= radix;
  }
  s.spec = grid.base_spec;
  for (std::size_t a = 0; a < grid.axes.size(); ++a) {
    if (s.values[a]) s.spec = with_option(s.spec, grid.axes[a].key, *s.values[a]);
  }
  return s;
}

std::uint64_t sweep_run_bytes(const SweepGrid& grid) {
  // The longest spec and knob values a row of this grid holds (each string's heap part; short
  // ones fit in the string itself, counted by sizeof).
  std::uint64_t spec = grid.base_spec.size() + 1, knobs = 0;
  for (const GridAxis& axis : grid.axes) {
    std::uint64_t longest = 0;
    for (const auto& value : axis.values) longest = std::max<std::uint64_t>(longest, value ? value->size() + 1 : 0);
    spec += axis.key.size() + 2 + longest;
    knobs += sizeof(std::optional<std::string>) + longest;
  }
  // A row: its strings (trace and device names are short: 64 bytes for both), knobs and metrics.
  const std::uint64_t row = sizeof(SweepRow) + spec + knobs + 64;
  // The sweep's rows, the results file's final list, the sorted copies the file and the ranking
  // make (4 rows), the job with its spec, the pending index and the resume map's share.
  return 4 * row + sizeof(SweepJob) + spec + 64;
}

std::uint64_t check_sweep_size(const SweepGrid& grid, std::uint64_t traces, std::uint64_t shard_count,
                               std::string_view what) {
  const std::uint64_t settings = grid_size(grid);
  std::uint64_t runs = 0;
  const bool overflow = __builtin_mul_overflow(settings, traces, &runs);
  const std::uint64_t kept = overflow ? 0 : runs / std::max<std::uint64_t>(shard_count, 1) + 1;
  std::uint64_t bytes = 0;
  const std::string description =
      fmt::format("{}: {} setting{} x {} trace{} = {} runs{}, each kept as a results row for the ranking", what,
                  settings, settings == 1 ? "" : "s", traces, traces == 1 ? "" : "s",
                  overflow ? std::string("more than 2^64") : fmt::format("{}", runs),
                  shard_count > 1 ? fmt::format(" ({} in a shard of {})", kept, shard_count) : std::string());
  if (overflow || __builtin_mul_overflow(kept, sweep_run_bytes(grid), &bytes)) bytes = ~std::uint64_t{0};
  check_memory_estimate(bytes, description);
  return runs;
}

Shard parse_shard(std::string_view text) {
  const auto bad = [&] {
    return InputError(fmt::format("--shard '{}': expected I/N with 0 <= I < N (e.g. 0/4 ... 3/4)", text));
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) throw bad();
  Shard shard;
  const std::string_view i = text.substr(0, slash), n = text.substr(slash + 1);
  auto parse = [&](std::string_view s, size_t& out) {
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size()) throw bad();
  };
  parse(i, shard.index);
  parse(n, shard.count);
  if (shard.count == 0 || shard.index >= shard.count) throw bad();
  return shard;
}

}  // namespace fraglab
