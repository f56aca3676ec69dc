// identical_rows_note: see capacity_note.hpp. A share of the GPU's memory (a garbage-collection
// threshold, a memory fraction) only acts once reserved memory approaches it; with a capacity
// assumed to be 80 GiB, a trace that never comes near gives the same figures for every value, and
// a user reading the table would conclude the option does nothing. The rule is the observable
// one: rows that differ only in that option and whose results are identical.
#include "capacity_note.hpp"

#include <fmt/format.h>

#include <map>

#include "fraglab/report.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab {
namespace {

bool same_results(const SweepRow& a, const SweepRow& b) {
  const Metrics& x = a.metrics;
  const Metrics& y = b.metrics;
  return x.peak_reserved == y.peak_reserved && x.peak_allocated == y.peak_allocated &&
         x.peak_requested == y.peak_requested && x.fragmentation_at_peak == y.fragmentation_at_peak &&
         x.peak_utilization == y.peak_utilization && x.num_alloc_retries == y.num_alloc_retries &&
         x.num_ooms == y.num_ooms && x.num_device_alloc == y.num_device_alloc && x.num_device_free == y.num_device_free;
}

std::string knob_text(const std::optional<std::string>& value) { return value ? *value : "none"; }

constexpr size_t kMaxLines = 8;  // groups listed per option; the rest are counted

}  // namespace

bool needs_capacity(std::string_view option) {
  return option == "garbage_collection_threshold" || option == "per_process_memory_fraction";
}

std::string identical_rows_note(const std::vector<SweepRow>& rows, const std::vector<std::string>& keys,
                                std::optional<Bytes> assumed_capacity) {
  std::string out;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!needs_capacity(keys[k])) continue;
    // Rows grouped by their other knobs, groups in the order they first appear.
    std::map<std::vector<std::optional<std::string>>, size_t> index;
    std::vector<std::vector<const SweepRow*>> groups;
    for (const SweepRow& row : rows) {
      if (row.knobs.size() != keys.size()) continue;
      std::vector<std::optional<std::string>> others = row.knobs;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(k));
      const auto [it, added] = index.emplace(std::move(others), groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(&row);
    }
    // Two reasons, one list each: [0] no memory fraction (gc), [1] no capacity given.
    std::vector<std::string> lines[2];
    std::string first_values;  // the first listed group's "none,0.5,0.8"
    size_t comparable = 0;     // groups of two rows or more
    for (const auto& group : groups) {
      if (group.size() < 2) continue;
      ++comparable;
      bool identical = true;
      for (const SweepRow* row : group) identical = identical && same_results(*row, *group.front());
      if (!identical) continue;
      // PyTorch collects garbage only under a memory fraction (allocator-model §3.3), whatever the
      // capacity; the rows of a group share every other option, the fraction included.
      const bool no_fraction = keys[k] == "garbage_collection_threshold" &&
                               group.front()->spec.find("per_process_memory_fraction") == std::string::npos;
      if (!no_fraction && !assumed_capacity) continue;
      std::string values;
      for (size_t i = 0; i < group.size(); ++i) {
        if (i > 0) values += ',';
        values += knob_text(group[i]->knobs[k]);
      }
      if (first_values.empty()) first_values = values;
      std::string line = fmt::format("  {}={}", keys[k], values);
      std::string with;
      for (size_t o = 0; o < keys.size(); ++o) {
        if (o == k) continue;
        with += fmt::format("{}{}={}", with.empty() ? "" : " ", keys[o], knob_text(group.front()->knobs[o]));
      }
      if (!with.empty()) line += fmt::format(" (with {})", with);
      line += '\n';
      lines[no_fraction ? 0 : 1].push_back(std::move(line));
    }
    for (int reason = 0; reason < 2; ++reason) {
      if (lines[reason].empty()) continue;
      if (reason == 0) {
        out += fmt::format(
            "note: rows identical because {} acts only with per_process_memory_fraction set (PyTorch "
            "collects cached blocks only under a memory fraction)\n",
            keys[k]);
      } else {
        out += fmt::format(
            "note: rows identical because {} has no capacity to act on: none was given, {} was "
            "assumed; pass --device sim:<your GPU's memory>\n",
            keys[k], format_bytes(*assumed_capacity));
      }
      if (lines[reason].size() == comparable && comparable > 1) {  // all alike: one line says it
        out += fmt::format("  {}={} with every one of the {} combinations of the other options\n", keys[k],
                           first_values, comparable);
        continue;
      }
      for (size_t i = 0; i < lines[reason].size() && i < kMaxLines; ++i) out += lines[reason][i];
      if (lines[reason].size() > kMaxLines) {
        out += fmt::format("  ... and {} more such groups\n", lines[reason].size() - kMaxLines);
      }
    }
  }
  return out;
}

}  // namespace fraglab
