// fraglab merge FILE... -o OUT.csv|OUT.jsonl: joins the results files of sweep shards (or of
// resumed, split or repeated sweeps) into one file in canonical order, then prints the summary.
// A run present in several files must have the same figures everywhere (the replay is
// deterministic; different figures mean different traces or fraglab versions were mixed).
// The files must make up one whole sweep (check_shards): shards of other grids or traces, a shard
// given twice, a shard missing or unfinished exit 1 without writing anything, so the "best"
// setting is never picked from part of the grid. Files without sweep metadata (older fraglab)
// get a warning and are merged as before; a maxbatch results file is refused (exit 2: it is
// `fraglab maxbatch --merge`'s). Files of different cost models (device_time_s), or whose
// metadata records none, are refused (exit 2) before anything is compared.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "cli/output_guard.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab::cli {

int cmd_merge(int argc, char** argv) {
  po::options_description options("options");
  std::vector<std::string> inputs;
  std::string output;
  std::size_t top = 25;
  options.add_options()("input", po::value(&inputs)->required()->multitoken(),
                        "results files written by fraglab sweep -o")(
      "output,o", po::value(&output)->required(), "merged results: OUT.csv, OUT.jsonl, or - for CSV on stdout")(
      "top", po::value(&top), "rows of the summary table per trace (0 = all; default 25)")("no-report",
                                                                                           "do not print the summary")(
      "overwrite", "replace an existing output file (without it, an existing non-empty file is an error)");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab merge SHARD.csv... -o OUT.csv|OUT.jsonl|-\n"
      "Joins sweep results files (CSV and JSONL may be mixed) into one, sorted canonically, so that the\n"
      "merge of `fraglab sweep --shard I/N` outputs equals the output of the unsharded sweep.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  refuse_overwrite(output, vm.count("overwrite") > 0);

  // All files first: whether they belong to one sweep is settled before their rows are compared.
  std::vector<ResultsTable> tables;
  std::vector<std::string> paths;
  std::vector<std::pair<std::string, std::optional<SweepMeta>>> metas;
  const auto progress = progress_callback("reading", "files");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& path = inputs[i];
    if (progress) progress(i, inputs.size());
    std::size_t tail = 0;
    ResultsTable table = read_results(path, &tail);
    if (table.kind == MetadataKind::Maxbatch)
      throw InputError(
          fmt::format("{}: a maxbatch results file (fraglab maxbatch -o), not a sweep's: merge maxbatch shards with "
                      "fraglab maxbatch --merge",
                      path));
    if (tail > 0) log::warn(fmt::format("merge: {}: ignoring its unfinished last line ({} bytes)", path, tail));
    if (table.rows.empty() && table.knob_keys.empty() && !table.meta) continue;
    // Rows priced by different cost models do not mix (device_time_s): the first file with metadata
    // sets the model, every other must record the same (exit 2 naming the file).
    if (table.meta) {
      const auto first = std::find_if(metas.begin(), metas.end(), [](const auto& m) { return m.second.has_value(); });
      if (first == metas.end())
        check_cost_model(path, *table.meta, path, *table.meta);
      else
        check_cost_model(path, *table.meta, first->first, *first->second);
    }
    metas.emplace_back(path, table.meta);
    paths.push_back(path);
    tables.push_back(std::move(table));
  }
  if (progress) progress(inputs.size(), inputs.size());  // erases the line before anything is printed
  const std::vector<std::string> mismatches = sweep_mismatches(metas);
  if (!mismatches.empty()) {
    for (const std::string& p : mismatches) log::error("merge: error: " + p);
    log::error(fmt::format("merge: nothing written to {}: merge the shards of one sweep", output));
    return 1;
  }

  ResultsTable merged;
  std::map<std::string, std::pair<SweepRow, std::string>> seen;  // key -> row, file it came from
  bool have_keys = false;
  std::string keys_from;
  for (std::size_t f = 0; f < tables.size(); ++f) {
    ResultsTable& table = tables[f];
    const std::string& path = paths[f];
    // A JSONL file takes its knob keys from its rows: one without rows says nothing about them.
    const bool keys_known = !table.rows.empty() || results_format(path) == ResultsFormat::Csv;
    if (!keys_known) {
    } else if (!have_keys) {
      merged.knob_keys = table.knob_keys;
      keys_from = path;
      have_keys = true;
    } else if (table.knob_keys != merged.knob_keys) {
      throw InputError(
          fmt::format("{}: its swept options differ from those of {} (merge results of one grid)", path, keys_from));
    }
    for (SweepRow& row : table.rows) {
      const std::string key = row_key(row);
      auto it = seen.find(key);
      if (it == seen.end()) {
        seen.emplace(key, std::make_pair(row, path));
        merged.rows.push_back(std::move(row));
      } else if (!(it->second.first == row)) {
        throw InputError(fmt::format("{}: the run (trace {}, device {}, spec {}) has other figures than in {}", path,
                                     row.trace, row.device, row.spec, it->second.second));
      }
    }
  }
  const ShardCheck shards = check_shards(metas, merged.rows);
  for (const std::string& w : shards.warnings) log::warn("merge: warning: " + w);
  if (!shards.problems.empty()) {
    for (const std::string& p : shards.problems) log::error("merge: error: " + p);
    log::error(fmt::format("merge: nothing written to {}: the files are not one whole sweep", output));
    return 1;
  }
  merged.meta = shards.merged;
  if (output == "-") {
    std::cout << results_text(merged, ResultsFormat::Csv);
    return 0;
  }
  write_results(output, merged);
  std::cout << fmt::format("merged {} runs from {} file{} into {}\n", merged.rows.size(), inputs.size(),
                           inputs.size() == 1 ? "" : "s", output);
  if (!vm.count("no-report") && !merged.rows.empty()) {
    SweepReportOptions report;
    report.top = top;
    if (merged.meta) report.traces = merged.meta->contexts;
    std::cout << '\n' << sweep_report(merged, report);
  }
  return 0;
}

}  // namespace fraglab::cli
