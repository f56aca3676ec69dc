// Sharded maxbatch runs (include/fraglab/maxbatch_shards.hpp): the metadata line of their results
// files, the streamed file itself, and the merge that re-runs every spec's search over the rows.
#include "fraglab/maxbatch_shards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "results_lines.hpp"

namespace fraglab {

bool MaxbatchMeta::operator==(const MaxbatchMeta& o) const {
  return shard == o.shard && workload == o.workload && generator == o.generator && first_trace == o.first_trace &&
         device == o.device && specs == o.specs && grid_policy == o.grid_policy && grid == o.grid && bounds == o.bounds;
}

std::vector<std::string> maxbatch_specs(const std::vector<std::string>& policies, const SweepGrid& grid) {
  std::vector<std::string> specs = policies;
  if (grid.axes.empty()) return specs;
  const std::uint64_t n = grid_size(grid);
  for (std::uint64_t i = 0; i < n; ++i) specs.push_back(grid_setting(grid, i).spec);
  return specs;
}

std::string maxbatch_meta_line(const MaxbatchMeta& meta) {
  nlohmann::ordered_json j;
  j["fraglab_maxbatch"] = 1;
  j["shard"] = shard_text(meta.shard);
  j["workload"] = meta.workload;
  j["generator"] = meta.generator;
  j["first_trace"] = nlohmann::ordered_json{{"name", meta.first_trace.name},
                                            {"events", meta.first_trace.events},
                                            {"request_hash", meta.first_trace.request_hash}};
  j["device"] = meta.device;
  j["specs"] = meta.specs;
  j["grid_policy"] = meta.grid_policy;
  j["grid"] = meta.grid;
  put_maxbatch_bounds(j, meta.bounds);
  return j.dump();
}

namespace {

const std::vector<std::string> kKnobKeys{"micro_batch"};

std::string head_text(const MaxbatchMeta& meta, ResultsFormat format) {
  return fmt::format("{}{}\n", format == ResultsFormat::Csv ? kCsvMetaPrefix : "", maxbatch_meta_line(meta));
}

void write_or_fail(std::FILE* file, const std::string& text, const std::string& path) {
  if (std::fwrite(text.data(), 1, text.size(), file) != text.size() || std::fflush(file) != 0)
    throw InputError(fmt::format("{}: write failed ({})", path, std::strerror(errno)));
}

MaxbatchMeta parse_meta(std::string_view text, const std::string& path) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  const auto bad = [&](std::string_view what) {
    return InputError(
        fmt::format("{}:1: {} (expected the metadata line fraglab maxbatch -o writes: "
                    "{{\"fraglab_maxbatch\":1,\"shard\":\"I/N\",...}})",
                    path, what));
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("fraglab_maxbatch")) throw bad("not a maxbatch results file");
  if (j["fraglab_maxbatch"] != 1) throw bad("unknown version (this fraglab reads 1)");
  const auto text_of = [&](const nlohmann::json& o, const char* key) {
    if (!o.contains(key) || !o[key].is_string()) throw bad(fmt::format("'{}' must be a string", key));
    return o[key].get<std::string>();
  };
  const auto count_of = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<std::uint64_t>() > UINT32_MAX)
      throw bad(fmt::format("'{}' must be a micro-batch count", key));
    return j[key].get<std::uint32_t>();
  };
  const auto list_of = [&](const char* key) {
    std::vector<std::string> out;
    if (!j.contains(key) || !j[key].is_array()) throw bad(fmt::format("'{}' must be a list of strings", key));
    for (const auto& v : j[key]) {
      if (!v.is_string()) throw bad(fmt::format("'{}' must be a list of strings", key));
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  MaxbatchMeta meta;
  try {
    meta.shard = parse_shard(text_of(j, "shard"));
  } catch (const InputError& e) {
    throw bad(e.what());
  }
  meta.workload = text_of(j, "workload");
  meta.generator = text_of(j, "generator");
  if (!j.contains("first_trace") || !j["first_trace"].is_object() || !j["first_trace"].contains("events") ||
      !j["first_trace"]["events"].is_number_unsigned())
    throw bad("'first_trace' must be {\"name\":S,\"events\":N,\"request_hash\":S}");
  meta.first_trace = {text_of(j["first_trace"], "name"), j["first_trace"]["events"].get<std::uint64_t>(),
                      text_of(j["first_trace"], "request_hash")};
  meta.device = text_of(j, "device");
  meta.specs = list_of("specs");
  meta.grid_policy = text_of(j, "grid_policy");
  meta.grid = list_of("grid");
  for (const auto& [key, bound] : kMaxbatchBoundKeys) meta.bounds.*bound = count_of(key);
  try {
    check_maxbatch_bounds(meta.bounds);
  } catch (const InputError& e) {
    throw bad(e.what());
  }
  return meta;
}

struct ShardFile {
  MaxbatchMeta meta;
  std::vector<SweepRow> rows;
};

// The metadata (the first line) and the complete rows (read_results: lines ending in '\n').
ShardFile read_shard_file(const std::string& path) {
  const ResultsFormat format = results_format(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open (expected a maxbatch results file)", path));
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const MetadataLine meta = metadata_line(line, format);
  if (meta.kind == MetadataKind::Sweep)
    throw InputError(fmt::format(
        "{}:1: a sweep results file (fraglab sweep -o), not a maxbatch run's: merge sweep shards with fraglab merge",
        path));
  if (meta.kind != MetadataKind::Maxbatch)
    throw InputError(
        fmt::format("{}:1: not a maxbatch results file (its first line is not the metadata "
                    "fraglab maxbatch -o writes)",
                    path));
  ShardFile file;
  file.meta = parse_meta(meta.json, path);
  ResultsTable table = read_results(path);
  if (!table.rows.empty() && table.knob_keys != kKnobKeys)
    throw InputError(fmt::format("{}: not a maxbatch results file (its knob column is not micro_batch)", path));
  file.rows = std::move(table.rows);
  return file;
}

std::string first_difference(const MaxbatchMeta& a, const MaxbatchMeta& b) {
  if (a.workload != b.workload || a.generator != b.generator || a.first_trace != b.first_trace)
    return fmt::format("workloads ({}; {} vs {}; {})", a.generator, a.first_trace.request_hash, b.generator,
                       b.first_trace.request_hash);
  if (a.device != b.device) return fmt::format("devices ({} vs {})", a.device, b.device);
  if (a.specs != b.specs || a.grid_policy != b.grid_policy || a.grid != b.grid)
    return fmt::format("specs ({} vs {} specs)", a.specs.size(), b.specs.size());
  if (a.bounds != b.bounds) return "search bounds (--min-batch, --max-batch, --verify-below, --scan-above)";
  if (a.shard.count != b.shard.count) return fmt::format("shard counts ({} vs {})", a.shard.count, b.shard.count);
  return {};
}

}  // namespace

std::vector<SweepRow> rows_to_resume(const std::string& path, const MaxbatchMeta& meta) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0) return {};
  ShardFile file = read_shard_file(path);
  std::string why = first_difference(meta, file.meta);
  if (why.empty() && file.meta.shard != meta.shard)
    why = fmt::format("shards ({} vs {})", shard_text(file.meta.shard), shard_text(meta.shard));
  if (!why.empty())
    throw InputError(
        fmt::format("{}: the results of a different maxbatch run: different {} (--overwrite replaces it)", path, why));
  return std::move(file.rows);
}

MaxbatchResultsFile::MaxbatchResultsFile(std::string path, MaxbatchMeta meta, const std::vector<SweepRow>& rows_so_far)
    : path_(std::move(path)), meta_(std::move(meta)), format_(results_format(path_)) {
  std::string head = head_text(meta_, format_);
  if (format_ == ResultsFormat::Csv) head += csv_header(kKnobKeys) + "\n";
  for (const SweepRow& row : rows_so_far) head += format_row(row, kKnobKeys, format_);
  if (rows_so_far.empty()) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr)
      throw InputError(fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
    write_or_fail(file_, head, path_);
    return;
  }
  // A resumed file is replaced whole (it may end in a run cut off mid-line), by a rename: the runs
  // of the interrupted search are never lost, even if this process is killed here.
  replace_file_with(path_, head);
  file_ = std::fopen(path_.c_str(), "ab");
  if (file_ == nullptr) throw InputError(fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
}

MaxbatchResultsFile::~MaxbatchResultsFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void MaxbatchResultsFile::append(const SweepRow& row) {
  write_or_fail(file_, format_row(row, kKnobKeys, format_), path_);
}

void MaxbatchResultsFile::finish(std::vector<SweepRow> rows) {
  std::fclose(file_);
  file_ = nullptr;
  // The header line, then the rows as write_results() orders them (results_text, no sweep metadata).
  const std::string text = head_text(meta_, format_) + results_text(ResultsTable{kKnobKeys, std::move(rows)}, format_);
  replace_file_with(path_, text);
}

void add_runs_by_batch(const std::vector<SweepRow>& rows, MaxbatchRuns& runs) {
  for (const SweepRow& row : rows) {
    // The micro_batch column as the search asks for it (a decimal count); anything else no search asks for.
    const std::string text = row.knobs.empty() || !row.knobs[0] ? std::string() : *row.knobs[0];
    if (text.empty() || text.size() > 9 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    runs.emplace(std::make_pair(static_cast<std::uint32_t>(std::stoul(text)), row.spec), &row);
  }
}

MaxbatchMerge merge_maxbatch_files(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("--merge: expected one results file per shard");
  std::vector<ShardFile> files;
  for (const std::string& path : paths) files.push_back(read_shard_file(path));
  const MaxbatchMeta& first = files.front().meta;
  std::map<std::size_t, std::string> shard_files;  // shard index -> its file
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string why = first_difference(first, files[f].meta);
    if (!why.empty())
      throw InputError(
          fmt::format("{} and {} are results of different maxbatch runs: different {}", paths.front(), paths[f], why));
    const auto [it, added] = shard_files.emplace(files[f].meta.shard.index, paths[f]);
    if (!added)
      throw InputError(fmt::format("{} and {}: both shard {}", it->second, paths[f], shard_text(files[f].meta.shard)));
  }
  for (std::size_t i = 0; i < first.shard.count; ++i) {
    if (!shard_files.contains(i))
      throw InputError(fmt::format("--merge: shard {} is missing ({} of {} shard files given)",
                                   shard_text(Shard{i, first.shard.count}), files.size(), first.shard.count));
  }
  // (batch, spec) -> the run, from whichever shard ran it (shards of one run agree).
  MaxbatchRuns runs;
  for (const ShardFile& file : files) add_runs_by_batch(file.rows, runs);
  const MaxbatchBounds& bounds = first.bounds;
  // Each spec's search alone first, refusing a run no file holds (a shard that did not finish).
  for (std::size_t i = 0; i < first.specs.size(); ++i) {
    const std::string& spec = first.specs[i];
    find_max_batches({spec}, bounds, [&](std::uint32_t b) {
      const auto it = runs.find({b, spec});
      if (it == runs.end())
        throw InputError(
            fmt::format("--merge: no run of {} at micro-batch {} in the files of shard {} (a shard that "
                        "did not finish?)",
                        spec, b, shard_text(Shard{i % first.shard.count, first.shard.count})));
      return std::vector<Metrics>{it->second->metrics};
    });
  }
  // Every run a search asks for is there: the whole search, as one machine runs it.
  MaxbatchMerge merge;
  merge.meta = first;
  merge.meta.shard = Shard{};
  merge.result = find_max_batches(first.specs, bounds, [&](std::uint32_t b) {
    std::vector<Metrics> m(first.specs.size());
    for (std::size_t i = 0; i < m.size(); ++i) {
      const auto it = runs.find({b, first.specs[i]});
      if (it != runs.end()) m[i] = it->second->metrics;  // absent: a spec whose search does not ask for b
    }
    return m;
  });
  return merge;
}

}  // namespace fraglab
