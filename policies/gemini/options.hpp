// Options of the gemini policy ("gemini:inner:[pytorch:expandable_segments:True],chunk_size_mb:64").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gemini/chunk_search.hpp"

namespace fraglab::gemini {

// More candidate chunk sizes than this is a mistake (a tiny search_interval), not a search.
inline constexpr std::uint64_t kMaxCandidates = 1u << 22;

struct Options {
  std::string inner = "pytorch";    // policy spec for untagged requests (brackets removed)
  std::optional<Bytes> chunk_size;  // fixed: skips the search
  SearchOptions search;
};

// Throws InputError naming the policy, the key and the accepted values.
Options parse_options(std::string_view text);

}  // namespace fraglab::gemini
