// `merge`'s completeness check (check_shards in include/fraglab/sweep.hpp): a merge that names a
// "best" setting must have seen the whole grid, so shards of other sweeps, a shard given twice, a
// shard left out or a shard that did not finish are each reported, naming the files and shards.
#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_map>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

std::string traces_text(const std::vector<TraceIdentity>& traces) {
  std::string out;
  for (const TraceIdentity& t : traces) out += fmt::format("{}{}", out.empty() ? "" : ", ", describe(t));
  return out.empty() ? std::string("none") : out;
}

// Why two files are not shards of one sweep; empty if they are.
std::string difference(const SweepMeta& a, const SweepMeta& b) {
  if (a.policy != b.policy || a.grid != b.grid)
    return fmt::format("grids ({} vs {})", grid_command(a), grid_command(b));
  if (a.traces != b.traces) return fmt::format("traces ({} vs {})", traces_text(a.traces), traces_text(b.traces));
  if (a.device != b.device) return fmt::format("devices ({} vs {})", a.device, b.device);
  return {};
}

// Sets present[k] for every run k of the grid (trace-major: k = trace index * settings + setting
// index) that a row holds: the row's trace name is the run's trace and its spec is the run's spec.
// The setting is read off the row's knobs (one value per axis, in the grid's order) and then
// checked against the spec, so a row whose knobs and spec disagree holds no run.
void mark_present_runs(const SweepGrid& grid, const SweepMeta& meta, const std::vector<SweepRow>& rows,
                       std::vector<bool>& present) {
  const std::uint64_t setting_count = grid_size(grid);
  std::unordered_map<std::string, std::vector<std::size_t>, SeededHash, std::equal_to<>> traces_named;
  for (std::size_t t = 0; t < meta.traces.size(); ++t) traces_named[meta.traces[t].name].push_back(t);
  // Per axis: value -> its index ("none" is the empty optional; values of an axis are distinct).
  std::vector<std::map<std::optional<std::string>, std::uint64_t>> index_of(grid.axes.size());
  for (std::size_t a = 0; a < grid.axes.size(); ++a) {
    for (std::size_t v = 0; v < grid.axes[a].values.size(); ++v) index_of[a].emplace(grid.axes[a].values[v], v);
  }
  for (const SweepRow& row : rows) {
    const auto named = traces_named.find(row.trace);
    if (named == traces_named.end() || row.knobs.size() != grid.axes.size()) continue;
    std::uint64_t setting = 0;
    bool in_grid = true;
    for (std::size_t a = 0; a < grid.axes.size() && in_grid; ++a) {
      const auto it = index_of[a].find(row.knobs[a]);
      in_grid = it != index_of[a].end();
      if (in_grid) setting = setting * grid.axes[a].values.size() + it->second;
    }
    if (!in_grid || grid_setting(grid, setting).spec != row.spec) continue;
    for (const std::size_t t : named->second) present[t * setting_count + setting] = true;
  }
}

}  // namespace

std::vector<std::string> sweep_mismatches(const std::vector<std::pair<std::string, std::optional<SweepMeta>>>& files) {
  std::vector<std::string> problems;
  const std::pair<std::string, std::optional<SweepMeta>>* first = nullptr;
  for (const auto& file : files) {
    if (!file.second) continue;
    if (first == nullptr) {
      first = &file;
      continue;
    }
    const std::string why = difference(*first->second, *file.second);
    if (!why.empty()) {
      problems.push_back(
          fmt::format("{} and {} are shards of different sweeps: different {}", first->first, file.first, why));
    }
  }
  return problems;
}

ShardCheck check_shards(const std::vector<std::pair<std::string, std::optional<SweepMeta>>>& files,
                        const std::vector<SweepRow>& rows) {
  ShardCheck out;
  const std::pair<std::string, std::optional<SweepMeta>>* first = nullptr;
  bool all_known = true;
  for (const auto& file : files) {
    if (!file.second) {
      all_known = false;
      out.warnings.push_back(
          fmt::format("{}: no sweep metadata (written before fraglab recorded shards and grids): "
                      "the merge cannot tell whether runs of its sweep are missing",
                      file.first));
    } else if (first == nullptr) {
      first = &file;
    }
  }
  out.problems = sweep_mismatches(files);
  if (first == nullptr || !out.problems.empty()) return out;
  const SweepMeta& meta = *first->second;

  // Each shard once.
  std::map<std::pair<std::size_t, std::size_t>, std::string> shard_file;  // (count, index) -> file
  for (const auto& [path, m] : files) {
    if (!m) continue;
    const auto [it, fresh] = shard_file.emplace(std::make_pair(m->shard.count, m->shard.index), path);
    if (!fresh) {
      out.problems.push_back(
          fmt::format("duplicated shard {}: in {} and in {}", shard_text(m->shard), it->second, path));
    }
  }

  // The shards given cover the grid: run k (trace-major grid order) belongs to shard k mod N.
  // The metadata's grid is counted first: one too large for a sweep to have run within the memory
  // budget is refused, naming the file, before a run of it is listed. Specs are decoded on demand.
  const SweepGrid grid = meta_grid(meta);
  const std::size_t runs =
      check_sweep_size(grid, meta.traces.size(), 1, fmt::format("{}: the sweep metadata's grid", first->first));
  const std::uint64_t setting_count = grid_size(grid);
  std::vector<const std::pair<std::string, std::optional<SweepMeta>>*> owner(runs, nullptr);
  std::size_t uncovered = 0;
  for (std::size_t k = 0; k < runs; ++k) {
    for (const auto& file : files) {
      if (file.second && file.second->shard.contains(k)) {
        owner[k] = &file;
        break;
      }
    }
    uncovered += owner[k] == nullptr ? 1 : 0;
  }
  if (uncovered > 0) {
    std::set<std::size_t> counts;
    for (const auto& [key, path] : shard_file) counts.insert(key.first);
    if (counts.size() == 1) {
      const std::size_t n = *counts.begin();
      // N comes from the files ("0/333333333" reads): name the first few missing shards only.
      constexpr std::size_t kNamed = 10;
      const std::size_t absent = n - shard_file.size();  // every file's shard is one of the N
      std::string missing;
      std::size_t named = 0;
      for (std::size_t i = 0; i < n && named < kNamed; ++i) {
        if (shard_file.count({n, i}) == 0) missing += fmt::format("{}{}/{}", named++ == 0 ? "" : ", ", i, n);
      }
      if (absent > named) missing += fmt::format(" and {} more", absent - named);
      out.problems.push_back(fmt::format("missing shard{} {} of the sweep {} ({} of its {} runs)",
                                         absent == 1 ? "" : "s", missing, grid_command(meta), uncovered, runs));
    } else {
      out.problems.push_back(fmt::format("{} of the {} runs of the sweep {} are in none of the shards given", uncovered,
                                         runs, grid_command(meta)));
    }
  }

  // Every run of a shard given is there (a shard that was killed and not resumed lacks some).
  // Keyed by trace and spec: each trace's rows carry the device it ran on (a capacity from its
  // recorded oom differs from trace to trace), so the sweep's device option is not their key.
  // The runs the rows hold are found from each row's own knob values (the setting's index), not by
  // listing every run of the grid: the metadata may declare millions of runs a file does not hold,
  // so the work here is one spec per row plus one per file that lacks runs.
  std::vector<bool> present(runs, false);
  mark_present_runs(grid, meta, rows, present);
  std::vector<std::size_t> missing_runs(files.size(), 0), first_missing(files.size(), 0);
  for (std::size_t k = 0; k < runs; ++k) {
    if (owner[k] == nullptr || present[k]) continue;
    const auto file = static_cast<std::size_t>(owner[k] - files.data());
    if (missing_runs[file]++ == 0) first_missing[file] = k;
  }
  std::map<std::string, std::pair<std::size_t, std::string>> lacking;  // file -> count, first missing run
  for (std::size_t f = 0; f < files.size(); ++f) {
    if (missing_runs[f] == 0) continue;
    auto& entry = lacking[files[f].first];
    if (entry.first == 0) {
      const std::size_t k = first_missing[f];
      entry.second = fmt::format("trace {}, spec {}", meta.traces[k / setting_count].name,
                                 grid_setting(grid, k % setting_count).spec);
    }
    entry.first += missing_runs[f];
  }
  for (const auto& [path, entry] : lacking) {
    out.problems.push_back(
        fmt::format("{} lacks {} run{} of its shard (e.g. {}): the sweep did not finish; resume it "
                    "with the same command and --resume",
                    path, entry.first, entry.first == 1 ? "" : "s", entry.second));
  }
  if (out.problems.empty() && all_known) {
    out.merged = meta;
    out.merged->shard = Shard{};
  }
  return out;
}

}  // namespace fraglab
