// Option parsing for gemini: each key and its accepted values (names, defaults and the
// unknown-option error come from the registered table, through kit::OptionReader).
#include "gemini/options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "fraglab/policy_kit.hpp"

namespace fraglab::gemini {
namespace {

// "64", "0.5": MiB as Gemini's *_m options take them (a float), to bytes.
std::optional<Bytes> parse_mib(std::string_view text, bool zero_allowed) {
  const std::optional<double> mib = kit::parse_number(text);
  if (!mib) return std::nullopt;
  const double bytes = *mib * static_cast<double>(MiB);
  if (*mib < 0 || (!zero_allowed && bytes < 1) || bytes >= 1e18) return std::nullopt;
  return static_cast<Bytes>(std::llround(bytes));
}

std::string mib_accepted(bool zero_allowed) {
  return fmt::format("a number of MiB{} (e.g. 64 or 0.5)", zero_allowed ? " >= 0" : " > 0");
}

}  // namespace

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("gemini", text);
  const auto mib = [&](std::string_view key, bool zero_allowed) {
    return reader.get<Bytes>(key, mib_accepted(zero_allowed),
                             [zero_allowed](std::string_view v) { return parse_mib(v, zero_allowed); });
  };
  Options options;
  options.inner = reader.get<std::string>("inner",
                                          "the spec of another policy, bracketed when it has options (e.g. pytorch or "
                                          "[pytorch:expandable_segments:True])",
                                          [](std::string_view spec) -> std::optional<std::string> {
                                            if (spec.size() >= 2 && spec.front() == '[' && spec.back() == ']')
                                              spec = spec.substr(1, spec.size() - 2);
                                            if (spec.empty() || policy_name(spec) == "gemini") return std::nullopt;
                                            return std::string(spec);
                                          });
  options.chunk_size = reader.get<std::optional<Bytes>>(
      "chunk_size_mb", mib_accepted(false), [](std::string_view v) -> std::optional<std::optional<Bytes>> {
        if (v == "search") return std::optional<Bytes>();  // the registered default: no fixed size
        const std::optional<Bytes> bytes = parse_mib(v, false);
        if (!bytes) return std::nullopt;
        return bytes;
      });
  options.search.search_range = mib("search_range_mb", true);
  options.search.min_chunk_size = mib("min_chunk_size_mb", true);
  options.search.search_interval =
      reader.get<Bytes>("search_interval", "a positive number of bytes (e.g. 2048 or 4KiB)",
                        [](std::string_view v) -> std::optional<Bytes> {
                          const std::optional<Bytes> bytes = kit::parse_bytes(v);
                          if (!bytes || *bytes == 0) return std::nullopt;
                          return bytes;
                        });
  options.search.filter_exlarge_params = reader.flag("filter_exlarge_params");
  options.placement.placement =
      reader.choice("placement", {"static", "auto"}) == 0 ? Placement::Static : Placement::Auto;
  const auto fraction = [&](std::string_view key, bool open_interval) {
    return reader.get<double>(
        key, open_interval ? "a number between 0 and 1, both excluded (e.g. 0.9)" : "a number from 0 to 1 (e.g. 0.5)",
        [open_interval](std::string_view v) -> std::optional<double> {
          const std::optional<double> x = kit::parse_number(v);
          if (!x || *x < 0 || *x > 1 || (open_interval && (*x == 0 || *x == 1))) return std::nullopt;
          return x;
        });
  };
  // shard_param_frac < 1 keeps chunks gathered on every rank: that changes what the rank
  // allocates, which the trace (one rank's sharded run) fixes; only GeminiPlugin's 1.0 is modelled.
  reader.get<double>("shard_param_frac", "1.0 (the trace's sharding is fixed by the run that made it)",
                     [](std::string_view v) -> std::optional<double> {
                       const std::optional<double> x = kit::parse_number(v);
                       if (!x || *x != 1.0) return std::nullopt;
                       return x;
                     });
  options.placement.offload_optim_frac = fraction("offload_optim_frac", false);
  options.placement.offload_param_frac = fraction("offload_param_frac", false);
  // Auto placement asserts 0 < ratio < 1 (placement_policy.py, set_warmup_non_model_data_ratio).
  options.placement.warmup_non_model_data_ratio = fraction("warmup_non_model_data_ratio", true);
  options.placement.steady_cuda_cap_ratio = fraction("steady_cuda_cap_ratio", true);
  const bool is_static = options.placement.placement == Placement::Static;
  if (!is_static && (reader.given("offload_optim_frac") || reader.given("offload_param_frac"))) {
    options.placement_note =
        "gemini: offload_optim_frac / offload_param_frac are static placement's; ignored under auto";
    options.placement.offload_optim_frac = 0;
    options.placement.offload_param_frac = 0;
  }
  if (is_static && options.placement.offload_param_frac > 0) {
    // StaticPlacementPolicy.__init__ warns and sets it to 0 unless offload_optim_frac is 1.0.
    if (options.placement.offload_optim_frac != 1.0) {
      options.placement_note =
          "gemini: offload_param_frac ignored (ColossalAI's StaticPlacementPolicy ignores it unless "
          "offload_optim_frac is 1.0)";
      options.placement.offload_param_frac = 0;
    } else {
      throw InputError(
          "gemini: offload_param_frac: only 0 is modelled (offloading parameter chunks after each use is not); use "
          "placement:auto to move parameter chunks between device and host");
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
