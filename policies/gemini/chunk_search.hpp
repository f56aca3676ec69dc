// Gemini's chunk-size search, in bytes (hpcaitech/ColossalAI
// colossalai/zero/gemini/chunk/search_utils.py, search_chunk_configuration; anchors.md §1.4), and
// the choice of which tensors of a trace it searches over.
//
// The search, as Gemini runs it for one data-parallel group:
//  - if all parameters together are smaller than min_chunk_size, they stay in one chunk of
//    exactly their total size ("keep_gathered");
//  - otherwise, with filter_exlarge_params, sizes above mean + 3σ (population σ) are left out;
//  - candidates run from the largest remaining size (at least min_chunk_size) rounded up to
//    search_interval, to that plus search_range, in steps of search_interval;
//  - each candidate packs the sizes in order, a tensor that does not fit the open chunk opening
//    a new one (_get_unused_byte); the unused bytes are the tails of every chunk, the last one
//    included; the first candidate with the fewest unused bytes wins;
//  - "wasted percentage" = waste / (all parameter bytes + waste).
// Differences: Gemini counts elements of one dtype, we count bytes (its defaults, 32 Mi elements
// and 1024 elements of fp16/bf16 parameters, become 64 MiB and 2048 bytes); the final rounding to
// the LCM of the data-parallel degrees is left out (a trace is one rank: one group).
#pragma once

#include <cstdint>
#include <vector>

#include "fraglab/planned_requests.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::gemini {

struct SearchOptions {
  Bytes search_range = 64 * MiB;
  Bytes search_interval = 2048;
  Bytes min_chunk_size = 64 * MiB;
  bool filter_exlarge_params = true;
};

struct SearchResult {
  Bytes chunk_size = 0;
  Bytes waste = 0;               // unused bytes of the best candidate
  Bytes parameter_bytes = 0;     // Σ of every size searched over, filtered ones included
  std::uint64_t candidates = 0;  // chunk sizes tried
  std::uint64_t tensors = 0;     // sizes searched over
  std::uint64_t filtered = 0;    // left out as extra large
  bool keep_gathered = false;    // all parameters fit one chunk below min_chunk_size
  // 100 × waste / (parameter bytes + waste), as Gemini prints it.
  double waste_percent() const;
};

// Unused bytes when `sizes` are packed in order into chunks of `chunk_size` (Gemini's
// _get_unused_byte). Stops early, returning a value >= `give_up_at`, once it cannot be smaller.
Bytes unused_bytes(const std::vector<Bytes>& sizes, Bytes chunk_size, Bytes give_up_at = ~Bytes{0});

SearchResult search_chunk_size(std::vector<Bytes> sizes, const SearchOptions& options);

// The parameter sizes a trace gives the search: what Gemini registers, each parameter once, in
// order. In a trace a parameter shows up once as a resident allocation and may show up again as
// transient copies (gathers, casts); the window is everything before the second `mark` labelled
// "step" (init plus the first step; the whole trace without two step marks). Kept: the
// `param_tag` requests of the window of nonzero size still live when the window closes, in
// allocation order; when there are none, every nonzero param request of the window.
struct ParameterSizes {
  std::vector<Bytes> sizes;
  std::uint64_t window_requests = 0;  // nonzero param requests in the window
  bool resident_only = false;         // the resident ones were used
};
ParameterSizes parameter_sizes(const Trace& trace, const std::vector<PlannedRequest>& requests,
                               std::uint32_t param_tag);

}  // namespace fraglab::gemini
