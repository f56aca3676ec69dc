// Options of the gemini policy ("gemini:inner:[pytorch:expandable_segments:True],chunk_size_mb:64").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gemini/chunk_search.hpp"

namespace fraglab::gemini {

// More candidate chunk sizes than this is a mistake (a tiny search_interval), not a search.
inline constexpr std::uint64_t kMaxCandidates = 1u << 22;

// Where chunks live (hpcaitech/ColossalAI colossalai/zero/gemini/placement_policy.py,
// PlacementPolicyFactory: "static" and "auto"). The defaults are GeminiPlugin's
// (colossalai/booster/plugin/gemini_plugin.py, GeminiPlugin.__init__): static, shard_param_frac 1.0,
// offload_optim_frac 0.0, offload_param_frac 0.0; auto: warmup_non_model_data_ratio 0.8,
// steady_cuda_cap_ratio 0.9.
enum class Placement : std::uint8_t { Static, Auto };

struct PlacementOptions {
  Placement placement = Placement::Static;
  double offload_optim_frac = 0.0;
  double offload_param_frac = 0.0;  // only 0 (or ignored, as ColossalAI ignores it) is modelled
  double warmup_non_model_data_ratio = 0.8;
  double steady_cuda_cap_ratio = 0.9;
  // True when chunks may leave the device (auto, or static with optimizer chunks offloaded): they
  // are then mapped pages of an address range kept for them (see chunk_store.hpp).
  bool may_offload() const { return placement == Placement::Auto || offload_optim_frac > 0; }
};

struct Options {
  std::string inner = "pytorch";    // policy spec for untagged requests (brackets removed)
  std::optional<Bytes> chunk_size;  // fixed: skips the search
  SearchOptions search;
  PlacementOptions placement;
  std::string placement_note;  // non-empty: an option accepted but ignored, as ColossalAI ignores it
};

// Throws InputError naming the policy, the key and the accepted values.
Options parse_options(std::string_view text);

}  // namespace fraglab::gemini
