// `fraglab maxbatch`: the largest micro-batch a generated training run fits on a device under each
// allocator policy spec, without an OOM and without a cudaMalloc retry, found with as few
// generated traces as the search can manage.
//
// The search (search_largest_passing) assumes the outcome is monotone in the micro-batch: if a
// batch passes, every smaller one passes. Fragmentation can break that (a larger batch can round
// into a better-fitting pattern of blocks), so the assumption is checked, never trusted:
//  1. exponential probe from --min-batch (min, 2·min, 4·min, ... capped at --max-batch) until a
//     batch fails;
//  2. binary search between the last pass and that failure: a passing g with g+1 failing;
//  3. verify the `verify_below` batches under g, and scan the `scan_above` batches above g+1;
//     a pass above restarts 1-2 from it (steps of 1, 2, 4, ...).
// The answer is the largest passing batch the search tried; every tried batch below it that
// failed is listed and marks the answer non-monotone. A non-monotone region farther than the
// window from the boundary is not seen (a full scan: --verify-below and --scan-above large).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/replay.hpp"

namespace fraglab {

struct MaxbatchBounds {
  std::uint32_t min_batch = 1;
  std::uint32_t max_batch = 512;
  std::uint32_t verify_below = 2;  // batches under the boundary checked after the binary search
  std::uint32_t scan_above = 2;    // batches above the first failure past the boundary tried too
  bool operator==(const MaxbatchBounds&) const = default;
};
// Throws InputError naming the option when min > max, min == 0 or the window is absurd.
void check_maxbatch_bounds(const MaxbatchBounds& bounds);

// Each bound's JSON key, in the order they are written: maxbatch's --json (report layer,
// maxbatch_report.cpp) and the results files' metadata line (maxbatch_shards.cpp) write them
// through put_maxbatch_bounds, and the metadata reader reads them by these keys.
inline constexpr std::pair<const char*, std::uint32_t MaxbatchBounds::*> kMaxbatchBoundKeys[] = {
    {"min_batch", &MaxbatchBounds::min_batch},
    {"max_batch", &MaxbatchBounds::max_batch},
    {"verify_below", &MaxbatchBounds::verify_below},
    {"scan_above", &MaxbatchBounds::scan_above}};
// Sets the four keys of a JSON object (nlohmann::json or ordered_json) to `bounds`.
template <class Json>
void put_maxbatch_bounds(Json& j, const MaxbatchBounds& bounds) {
  for (const auto& [key, bound] : kMaxbatchBoundKeys) j[key] = bounds.*bound;
}

// The largest micro-batch b in [min_batch, max_batch] with pass(b), by the search above.
// pass() is called at most once per batch.
struct BoundarySearch {
  std::optional<std::uint32_t> answer;     // nullopt: no batch tried passed
  std::vector<std::uint32_t> fails_below;  // tried batches < answer that failed, ascending
  std::map<std::uint32_t, bool> tried;     // every batch tried and whether it passed
  bool non_monotone() const { return !fails_below.empty(); }
};
BoundarySearch search_largest_passing(const MaxbatchBounds& bounds, const std::function<bool(std::uint32_t)>& pass);

// Generates the trace of micro-batch b and replays every spec on it: one Metrics per spec, in
// the order of the specs given to find_max_batches.
using BatchEvaluator = std::function<std::vector<Metrics>(std::uint32_t batch)>;

struct MaxbatchAnswer {
  std::optional<std::uint32_t> batch;  // nullopt: not even --min-batch passes
  Metrics at;                          // the run at `batch` (zero without one)
  bool at_max_batch = false;           // the answer is --max-batch: larger batches were not tried
  std::vector<std::uint32_t> fails_below;
  bool non_monotone() const { return !fails_below.empty(); }
};

struct MaxbatchSpecResult {
  std::string spec;
  MaxbatchAnswer no_oom;             // num_ooms == 0
  MaxbatchAnswer no_retries;         // num_ooms == 0 and num_alloc_retries == 0
  std::vector<std::uint32_t> tried;  // the batches this spec's two searches asked for, ascending
};

struct MaxbatchResult {
  std::vector<MaxbatchSpecResult> specs;  // in the order given
  std::vector<std::uint32_t> generated;   // every batch generated (and replayed under every spec), ascending
  // The spec with the largest micro-batch without OOM; ties: the larger batch without retries,
  // then the lower peak reserved there, then the first given. nullopt when none passes.
  std::optional<std::size_t> best;
};

// Runs the two searches of every spec (in order: spec 1 no OOM, spec 1 no retries, spec 2 ...).
// A batch is evaluated once and its Metrics serve every spec and both goals.
MaxbatchResult find_max_batches(const std::vector<std::string>& specs, const MaxbatchBounds& bounds,
                                const BatchEvaluator& evaluate);

}  // namespace fraglab
