// Ranking sweep rows: the order of the end-of-sweep table, the Pareto front, and the
// PYTORCH_CUDA_ALLOC_CONF line of a pytorch spec. Pure functions of the rows (the report layer
// renders them: src/report/sweep_report.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "fraglab/policy.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

bool rank_less(const SweepRow& a, const SweepRow& b) {
  const bool a_oom = a.metrics.num_ooms > 0, b_oom = b.metrics.num_ooms > 0;
  if (a_oom != b_oom) return !a_oom;
  if (a.metrics.peak_reserved != b.metrics.peak_reserved) return a.metrics.peak_reserved < b.metrics.peak_reserved;
  if (a.metrics.num_alloc_retries != b.metrics.num_alloc_retries) {
    return a.metrics.num_alloc_retries < b.metrics.num_alloc_retries;
  }
  if (a.device_calls() != b.device_calls()) return a.device_calls() < b.device_calls();
  return canonical_less(a, b);
}

}  // namespace

bool same_rank_figures(const SweepRow& a, const SweepRow& b) {
  return a.metrics.peak_reserved == b.metrics.peak_reserved &&
         a.metrics.num_alloc_retries == b.metrics.num_alloc_retries && a.device_calls() == b.device_calls();
}

std::vector<SweepRow> rank_rows(std::vector<SweepRow> rows) {
  std::sort(rows.begin(), rows.end(), rank_less);
  return rows;
}

bool same_front_figures(const SweepRow& a, const SweepRow& b) {
  return a.metrics.peak_reserved == b.metrics.peak_reserved && a.metrics.device_time_s == b.metrics.device_time_s;
}

std::vector<SweepRow> pareto_front(const std::vector<SweepRow>& rows) {
  // Ordered by peak reserved, then device time (ties as rank_rows), a row is on the front iff no
  // row before it (less or equal reserved) takes no more device time and differs in a figure.
  std::vector<SweepRow> ranked = rank_rows(rows);
  std::stable_sort(ranked.begin(), ranked.end(), [](const SweepRow& a, const SweepRow& b) {
    if (a.metrics.peak_reserved != b.metrics.peak_reserved) return a.metrics.peak_reserved < b.metrics.peak_reserved;
    return a.metrics.device_time_s < b.metrics.device_time_s;
  });
  std::vector<SweepRow> front;
  for (const SweepRow& r : ranked) {
    if (r.metrics.num_ooms > 0) continue;
    const bool dominated = std::any_of(front.begin(), front.end(), [&](const SweepRow& s) {
      return s.metrics.peak_reserved <= r.metrics.peak_reserved && s.metrics.device_time_s <= r.metrics.device_time_s &&
             !same_front_figures(s, r);
    });
    if (!dominated) front.push_back(r);
  }
  return front;
}

std::optional<std::string> alloc_conf_line(std::string_view spec) {
  if (policy_name(spec) != "pytorch") return std::nullopt;
  const std::string_view options = spec.size() > 7 ? spec.substr(8) : std::string_view{};
  std::string value;
  for (const OptionItem& item : split_options(options, "pytorch")) {
    if (item.key == "version") continue;  // fraglab's choice of emulated release, not a PyTorch key
    value += fmt::format("{}{}:{}", value.empty() ? "" : ",", item.key, item.value);
  }
  const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == ',' || c == '.' || c == '-';
  });
  if (plain) return "PYTORCH_CUDA_ALLOC_CONF=" + value;
  std::string quoted = "'";
  for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return "PYTORCH_CUDA_ALLOC_CONF=" + quoted + "'";
}

}  // namespace fraglab
