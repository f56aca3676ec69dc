// `fraglab maxbatch` output: a table per spec and the JSON (fraglab/maxbatch_report.hpp).
#include "fraglab/maxbatch_report.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fraglab/sweep.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

namespace {

std::string batch_list(const std::vector<std::uint32_t>& batches) { return fmt::format("{}", fmt::join(batches, " ")); }

std::string answer_row(const char* goal, const MaxbatchAnswer& a) {
  if (!a.batch) return fmt::format("  {:<12} {:>11}  {:>11}  {:>8}  none passes at --min-batch\n", goal, "-", "-", "-");
  std::string note;
  if (a.at_max_batch) note += "= --max-batch (larger not tried)";
  if (a.non_monotone())
    note += fmt::format("{}non-monotone: fails at {}", note.empty() ? "" : "; ", batch_list(a.fails_below));
  std::string row = fmt::format("  {:<12} {:>11}  {:>11}  {:>8}  {}", goal, *a.batch, format_bytes(a.at.peak_reserved),
                                a.at.num_alloc_retries, note);
  while (!row.empty() && row.back() == ' ') row.pop_back();
  return row + "\n";
}

nlohmann::json answer_json(const MaxbatchAnswer& a) {
  nlohmann::json j;
  j["micro_batch"] = a.batch ? nlohmann::json(*a.batch) : nlohmann::json(nullptr);
  j["peak_reserved"] = a.at.peak_reserved;
  j["num_alloc_retries"] = a.at.num_alloc_retries;
  j["at_max_batch"] = a.at_max_batch;
  j["non_monotone"] = a.non_monotone();
  j["fails_below"] = a.fails_below;
  return j;
}

}  // namespace

std::string maxbatch_table(const MaxbatchResult& result, const MaxbatchContext& context) {
  std::string out = fmt::format("maxbatch: {}; device {}; micro-batches {}..{}\n", context.workload, context.device,
                                context.bounds.min_batch, context.bounds.max_batch);
  out += fmt::format("generated {} trace{} (micro-batch {}), each replayed under {} spec{}\n", result.generated.size(),
                     result.generated.size() == 1 ? "" : "s", batch_list(result.generated), result.specs.size(),
                     result.specs.size() == 1 ? "" : "s");
  for (const MaxbatchSpecResult& r : result.specs) {
    out += fmt::format("\n{}\n", r.spec);
    out += fmt::format("  {:<12} {:>11}  {:>11}  {:>8}  {}\n", "goal", "micro-batch", "peak_resv", "retries", "note");
    out += answer_row("no OOM", r.no_oom);
    out += answer_row("no retries", r.no_retries);
    out += fmt::format("  batches tried: {} ({})\n", batch_list(r.tried), r.tried.size());
  }
  if (!result.best) {
    out += "\nbest: none (no spec runs without OOM at --min-batch)\n";
    return out;
  }
  const MaxbatchSpecResult& best = result.specs[*result.best];
  out += fmt::format("\nbest: {} (micro-batch {} without OOM)\n", best.spec, *best.no_oom.batch);
  if (const std::optional<std::string> line = alloc_conf_line(best.spec))
    out += *line + (line->back() == '=' ? "   (PyTorch's defaults: leave it unset)\n" : "\n");
  return out;
}

std::string maxbatch_json(const MaxbatchResult& result, const MaxbatchContext& context) {
  nlohmann::json j;
  j["workload"] = context.workload;
  j["device"] = context.device;
  put_maxbatch_bounds(j, context.bounds);
  j["generated"] = result.generated;
  j["specs"] = nlohmann::json::array();
  for (const MaxbatchSpecResult& r : result.specs) {
    nlohmann::json s;
    s["spec"] = r.spec;
    s["no_oom"] = answer_json(r.no_oom);
    s["no_retries"] = answer_json(r.no_retries);
    s["tried"] = r.tried;
    const std::optional<std::string> line = alloc_conf_line(r.spec);
    s["alloc_conf"] = line ? nlohmann::json(*line) : nlohmann::json(nullptr);
    j["specs"].push_back(std::move(s));
  }
  j["best"] = result.best ? nlohmann::json(result.specs[*result.best].spec) : nlohmann::json(nullptr);
  return j.dump(2) + "\n";
}

}  // namespace fraglab
