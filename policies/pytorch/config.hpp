// The pytorch policy's options: PYTORCH_CUDA_ALLOC_CONF syntax plus `version:` (allocator-model §10).
//
// Invariants:
//  - a Config is the result of exactly one parse of one option string, with PyTorch's defaults
//    for everything not mentioned (§10: every parse resets the sizing options);
//  - parsing follows the selected version's tokeniser and its validation; every rejection is a
//    fraglab::InputError whose text is "pytorch: " + PyTorch's own message where PyTorch has one;
//  - options that cannot change device memory are accepted and recorded in `notes`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pytorch/constants.hpp"
#include "pytorch/rounding.hpp"
#include "pytorch/version.hpp"

namespace fraglab::cca {

struct Config {
  Version version = Version::Newest;
  Bytes max_split_size = kUnlimited;            // max_split_size_mb (bytes); unlimited by default
  Bytes max_non_split_rounding = kLargeBuffer;  // 2.6+; newest default = large_segment_size
  Bytes large_segment_size = kLargeBuffer;      // newest large_segment_size_mb
  RoundingRules rounding;                       // roundup_power2_divisions (+ 1.13 bypass)
  double garbage_collection_threshold = 0.0;    // 0 = off
  bool expandable_segments = false;
  // set_per_process_memory_fraction (an API call in PyTorch; newest also a config key).
  std::optional<double> memory_fraction;
  std::vector<std::string> notes;  // accepted options without effect on memory

  // §3.2 step 4: slack an oversize request may waste in a cached block.
  Bytes oversize_slack() const { return has_max_non_split_rounding(version) ? max_non_split_rounding : kLargeBuffer; }
};

// Parses the OPTIONS of "pytorch:OPTIONS". Throws InputError on a bad option.
Config parse_config(std::string_view options);

}  // namespace fraglab::cca
