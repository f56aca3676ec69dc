// Option parsing for gemini: each key, its accepted values, and an error naming both.
#include "gemini/options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "fraglab/policy.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::gemini {
namespace {

// "64", "0.5": MiB as Gemini's *_m options take them (a float), to bytes.
Bytes parse_mib(const OptionItem& item, bool zero_allowed) {
  double mib = 0;
  const char* end = item.value.data() + item.value.size();
  auto [ptr, ec] = std::from_chars(item.value.data(), end, mib);
  const double bytes = mib * static_cast<double>(MiB);
  if (ec != std::errc() || ptr != end || !std::isfinite(mib) || mib < 0 || (!zero_allowed && bytes < 1) ||
      bytes >= 1e18) {
    throw InputError(fmt::format("gemini: {}: expected a number of MiB{} (e.g. 64 or 0.5), got '{}'", item.key,
                                 zero_allowed ? " >= 0" : " > 0", item.value));
  }
  return static_cast<Bytes>(std::llround(bytes));
}

bool parse_flag(const OptionItem& item) {
  if (item.value == "True" || item.value == "true") return true;
  if (item.value == "False" || item.value == "false") return false;
  throw InputError(fmt::format("gemini: {}: expected True or False, got '{}'", item.key, item.value));
}

}  // namespace

Options parse_options(std::string_view text) {
  Options options;
  for (const OptionItem& item : split_options(text, "gemini")) {
    if (item.key == "inner") {
      std::string_view spec = item.value;
      if (spec.size() >= 2 && spec.front() == '[' && spec.back() == ']') spec = spec.substr(1, spec.size() - 2);
      if (spec.empty() || policy_name(spec) == "gemini") {
        throw InputError(fmt::format(
            "gemini: inner: expected the spec of another policy, bracketed when it has options (e.g. pytorch or "
            "[pytorch:expandable_segments:True]), got '{}'",
            item.value));
      }
      options.inner = std::string(spec);
    } else if (item.key == "chunk_size_mb") {
      options.chunk_size = parse_mib(item, false);
    } else if (item.key == "search_range_mb") {
      options.search.search_range = parse_mib(item, true);
    } else if (item.key == "min_chunk_size_mb") {
      options.search.min_chunk_size = parse_mib(item, true);
    } else if (item.key == "search_interval") {
      Bytes interval = 0;
      try {
        interval = parse_byte_size(item.value, "gemini: search_interval");
      } catch (const InputError&) {}
      if (interval == 0) {
        throw InputError(fmt::format(
            "gemini: search_interval: expected a positive number of bytes (e.g. 2048 or 4KiB), got '{}'", item.value));
      }
      options.search.search_interval = interval;
    } else if (item.key == "filter_exlarge_params") {
      options.search.filter_exlarge_params = parse_flag(item);
    } else {
      throw InputError(
          fmt::format("gemini: unknown option '{}' (accepted: inner, chunk_size_mb, search_range_mb, search_interval, "
                      "min_chunk_size_mb, filter_exlarge_params)",
                      item.key));
    }
  }
  const std::uint64_t candidates = options.search.search_range / options.search.search_interval + 1;
  if (!options.chunk_size && candidates > kMaxCandidates) {
    throw InputError(fmt::format(
        "gemini: search_range_mb / search_interval make {} candidate chunk sizes, at most {} are searched (raise "
        "search_interval or lower search_range_mb)",
        candidates, kMaxCandidates));
  }
  return options;
}

}  // namespace fraglab::gemini
