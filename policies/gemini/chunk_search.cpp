// The chunk-size search and the choice of its input: see chunk_search.hpp.
#include "gemini/chunk_search.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fraglab::gemini {

double SearchResult::waste_percent() const {
  const double all = static_cast<double>(parameter_bytes) + static_cast<double>(waste);
  return all == 0 ? 0.0 : 100.0 * static_cast<double>(waste) / all;
}

Bytes unused_bytes(const std::vector<Bytes>& sizes, Bytes chunk_size, Bytes give_up_at) {
  Bytes closed_tails = 0;  // Gemini's `acc`: the unused tails of the chunks closed so far
  Bytes left = 0;          // room in the open chunk
  for (const Bytes size : sizes) {
    if (size > left) {
      closed_tails += left;
      if (closed_tails >= give_up_at) return closed_tails;  // only grows from here
      left = chunk_size;
    }
    left -= size;  // sizes never exceed chunk_size: the candidates start at the largest
  }
  return closed_tails + left;
}

SearchResult search_chunk_size(std::vector<Bytes> sizes, const SearchOptions& options) {
  SearchResult result;
  result.tensors = sizes.size();
  result.parameter_bytes = std::accumulate(sizes.begin(), sizes.end(), Bytes{0});
  const Bytes interval = options.search_interval;
  if (sizes.empty()) {
    // Nothing to search over (Gemini would make a 0-byte chunk): the smallest candidate.
    result.chunk_size = std::max<Bytes>((options.min_chunk_size + interval - 1) / interval * interval, interval);
    return result;
  }
  if (result.parameter_bytes < options.min_chunk_size) {
    result.chunk_size = result.parameter_bytes;
    result.keep_gathered = true;
    return result;
  }
  if (options.filter_exlarge_params) {
    const double n = static_cast<double>(sizes.size());
    double mean = 0;
    for (const Bytes s : sizes) mean += static_cast<double>(s);
    mean /= n;
    double variance = 0;
    for (const Bytes s : sizes) variance += (static_cast<double>(s) - mean) * (static_cast<double>(s) - mean);
    const double upper_limit = mean + 3 * std::sqrt(variance / n);
    const std::size_t before = sizes.size();
    std::erase_if(sizes, [&](Bytes s) { return static_cast<double>(s) > upper_limit; });
    result.filtered = before - sizes.size();
  }
  const Bytes max_size = std::max(options.min_chunk_size, *std::max_element(sizes.begin(), sizes.end()));
  const Bytes start = (max_size + interval - 1) / interval * interval;
  const Bytes kept_bytes = std::accumulate(sizes.begin(), sizes.end(), Bytes{0});
  Bytes best_waste = ~Bytes{0};
  result.chunk_size = start;
  for (Bytes candidate = start; candidate <= start + options.search_range; candidate += interval) {
    ++result.candidates;
    // Every chunk's tail counts, so the waste is (chunks used) × candidate − kept bytes, and at
    // least ceil(kept / candidate) chunks are needed: a candidate whose bound cannot beat the
    // best so far is not packed (the answer is Gemini's; only the time differs).
    const Bytes fewest_chunks = (kept_bytes + candidate - 1) / candidate;
    if (fewest_chunks * candidate - kept_bytes >= best_waste) continue;
    const Bytes waste = unused_bytes(sizes, candidate, best_waste);
    if (waste < best_waste) {  // strictly fewer: the smallest of equal candidates wins
      best_waste = waste;
      result.chunk_size = candidate;
    }
  }
  result.waste = best_waste;
  return result;
}

ParameterSizes parameter_sizes(const Trace& trace, const std::vector<PlannedRequest>& requests,
                               std::uint32_t param_tag) {
  // The window ends at the second step mark (event index), or after the last event.
  std::uint64_t window_end = trace.events.size();
  int step_marks = 0;
  for (std::uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Mark && e.id < trace.strings.size() && trace.strings[e.id] == "step" && ++step_marks == 2) {
      window_end = i;
      break;
    }
  }
  ParameterSizes out;
  if (param_tag == kNoString) return out;  // no "param" string: no parameter (untagged ones are not)
  std::vector<Bytes> all;
  // A request of event i begins at i + 1 and ends at (its free's index) + 1; it lies in the
  // window when i < window_end and is resident when no event of the window frees it.
  for (const PlannedRequest& r : requests) {
    if (r.begin > window_end) break;  // requests come in begin order
    if (r.tag != param_tag || r.size == 0) continue;
    all.push_back(r.size);
    if (r.end > window_end) out.sizes.push_back(r.size);
  }
  out.window_requests = all.size();
  out.resident_only = !out.sizes.empty();
  if (out.sizes.empty()) out.sizes = std::move(all);
  return out;
}

}  // namespace fraglab::gemini
