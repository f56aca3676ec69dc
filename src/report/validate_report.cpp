// Rendering a ValidationReport (`fraglab validate`): the text for people and the JSON for scripts.
#include <fmt/format.h>

#include "fraglab/validate_report.hpp"

namespace fraglab {

nlohmann::json validation_json(const ValidationReport& r) {
  nlohmann::json j = {
      {"policy", r.policy},
      {"exact", r.exact},
      {"segment_events_recorded", r.segment_events_recorded},
      {"segment_events_simulated", r.segment_events_simulated},
      {"segment_events_matched", r.segment_events_matched},
      {"allocs_recorded", r.allocs_recorded},
      {"alloc_addresses_matched", r.alloc_addresses_matched},
      {"reserved_checks", r.reserved_checks},
      {"reserved_matched", r.reserved_matched},
      {"reserved_at_start", r.reserved_at_start},
      {"peak_reserved_recorded", r.peak_reserved_recorded},
      {"peak_reserved_simulated", r.peak_reserved_simulated},
      {"ooms_recorded", r.ooms_recorded},
      {"ooms_simulated", r.ooms_simulated},
      {"retries_simulated", r.retries_simulated},
      {"empty_cache_inferred", r.empty_cache_inferred},
      {"available_bytes", r.available_bytes},
      {"available_source", r.available_source},
      {"notes", r.notes},
  };
  nlohmann::json blocks = nlohmann::json::array();
  for (const StartBlock& b : r.undetermined_blocks) {
    blocks.push_back({{"id", b.id},
                      {"addr", b.addr},
                      {"requested", b.requested},
                      {"min_size", b.min_size},
                      {"max_size", b.max_size},
                      {"chosen", b.chosen},
                      {"evidence", b.evidence}});
  }
  j["undetermined_blocks"] = std::move(blocks);
  if (r.first_divergence) {
    const Divergence& d = *r.first_divergence;
    j["first_divergence"] = {{"event_index", d.event_index},
                             {"category", d.category},
                             {"recorded", d.recorded},
                             {"simulated", d.simulated},
                             {"context", d.context},
                             {"state", d.state},
                             {"cause", d.cause.empty() ? "model" : "start state undetermined"},
                             {"cause_detail", d.cause}};
  } else {
    j["first_divergence"] = nullptr;
  }
  return j;
}

std::string validation_text(const ValidationReport& r) {
  std::string out = fmt::format("{}: {}\n", r.exact ? "EXACT" : "DIVERGES", r.policy);
  out += fmt::format("  segment events  {:>8} recorded {:>8} simulated {:>8} matched\n", r.segment_events_recorded,
                     r.segment_events_simulated, r.segment_events_matched);
  out += fmt::format("  alloc addresses {:>8} recorded {:>8} matched\n", r.allocs_recorded, r.alloc_addresses_matched);
  out += fmt::format("  reserved bytes  {:>8} requests checked {:>8} matched\n", r.reserved_checks, r.reserved_matched);
  out += fmt::format("  reserved at start {} B; peak reserved {} B recorded, {} B simulated\n", r.reserved_at_start,
                     r.peak_reserved_recorded, r.peak_reserved_simulated);
  out += fmt::format("  ooms {} recorded, {} simulated; {} retries simulated; memory obtainable {} B ({})\n",
                     r.ooms_recorded, r.ooms_simulated, r.retries_simulated, r.available_bytes, r.available_source);
  for (const std::string& note : r.notes) out += "  note: " + note + "\n";
  if (r.first_divergence) {
    const Divergence& d = *r.first_divergence;
    out += fmt::format("first divergence at event {} ({}):\n  recorded:  {}\n  simulated: {}\n", d.event_index,
                       d.category, d.recorded, d.simulated);
    if (!d.cause.empty()) out += "  cause: " + d.cause + "\n";
    for (const std::string& line : d.context) out += "  " + line + "\n";
    out += "  " + d.state + "\n";
  }
  return out;
}

}  // namespace fraglab
