// The micro-batch search of `fraglab maxbatch` (fraglab/maxbatch.hpp states the search and its
// assumption): a probe, a binary search, and a window around the boundary that checks the
// monotonicity the first two assume.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fraglab/maxbatch.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

void check_maxbatch_bounds(const MaxbatchBounds& bounds) {
  // The cap keeps the generated traces within what one process can hold many times over.
  constexpr std::uint32_t kLargestBatch = 1u << 20;
  if (bounds.min_batch == 0) throw InputError("--min-batch 0: expected a micro-batch of at least 1");
  if (bounds.max_batch > kLargestBatch)
    throw InputError(fmt::format("--max-batch {}: expected at most {}", bounds.max_batch, kLargestBatch));
  if (bounds.min_batch > bounds.max_batch)
    throw InputError(
        fmt::format("--min-batch {} is above --max-batch {}: expected min <= max", bounds.min_batch, bounds.max_batch));
  if (bounds.verify_below > kLargestBatch || bounds.scan_above > kLargestBatch)
    throw InputError(fmt::format("--verify-below / --scan-above: expected at most {} batches", kLargestBatch));
}

BoundarySearch search_largest_passing(const MaxbatchBounds& bounds, const std::function<bool(std::uint32_t)>& pass) {
  check_maxbatch_bounds(bounds);
  BoundarySearch s;
  const auto passes = [&](std::uint32_t b) {
    const auto it = s.tried.find(b);
    if (it != s.tried.end()) return it->second;
    const bool ok = pass(b);
    s.tried.emplace(b, ok);
    return ok;
  };
  const std::uint64_t lo = bounds.min_batch, hi = bounds.max_batch;
  // The scan above a failure: the largest passing batch in (from, from + scan_above], if any.
  const auto scan_up = [&](std::uint64_t from) -> std::optional<std::uint32_t> {
    std::optional<std::uint32_t> found;
    for (std::uint64_t b = from + 1; b <= std::min(hi, from + bounds.scan_above); ++b) {
      if (passes(static_cast<std::uint32_t>(b))) found = static_cast<std::uint32_t>(b);
    }
    return found;
  };

  std::uint64_t good = lo;
  std::uint64_t step = lo;  // the first probe doubles the batch (min, 2·min, 4·min, ...)
  if (!passes(bounds.min_batch)) {
    const std::optional<std::uint32_t> above = scan_up(lo);
    if (!above) return s;  // nothing passes near the lower bound: no answer
    good = *above;
    step = 1;
  }
  for (;;) {
    // 1. probe upward until a failure or the upper bound.
    std::optional<std::uint64_t> bad;
    while (good < hi) {
      const std::uint64_t b = std::min(hi, good + step);
      if (!passes(static_cast<std::uint32_t>(b))) {
        bad = b;
        break;
      }
      good = b;
      step *= 2;
    }
    // 2. binary search in (good, bad): under monotonicity good passes and good + 1 fails.
    if (bad) {
      while (*bad - good > 1) {
        const std::uint64_t mid = good + (*bad - good) / 2;
        if (passes(static_cast<std::uint32_t>(mid)))
          good = mid;
        else
          bad = mid;
      }
    }
    // 3. the window: below (recorded as failures below the answer) and above (a pass restarts).
    for (std::uint64_t b = good; b > lo && good - b < bounds.verify_below;) passes(static_cast<std::uint32_t>(--b));
    const std::optional<std::uint32_t> above = scan_up(good + 1);
    if (!above) break;
    good = *above;
    step = 1;
  }
  s.answer = static_cast<std::uint32_t>(good);
  for (const auto& [b, ok] : s.tried) {
    if (b < good && !ok) s.fails_below.push_back(b);
  }
  return s;
}

namespace {

MaxbatchAnswer answer_of(const BoundarySearch& s, const std::map<std::uint32_t, std::vector<Metrics>>& runs,
                         std::size_t spec, const MaxbatchBounds& bounds) {
  MaxbatchAnswer a;
  a.batch = s.answer;
  a.fails_below = s.fails_below;
  if (s.answer) {
    a.at = runs.at(*s.answer)[spec];
    a.at_max_batch = *s.answer == bounds.max_batch;
  }
  return a;
}

// Whether result a beats b for the best spec (MaxbatchResult::best).
bool better(const MaxbatchSpecResult& a, const MaxbatchSpecResult& b) {
  const auto batch = [](const MaxbatchAnswer& x) { return x.batch ? static_cast<std::int64_t>(*x.batch) : -1; };
  if (batch(a.no_oom) != batch(b.no_oom)) return batch(a.no_oom) > batch(b.no_oom);
  if (batch(a.no_retries) != batch(b.no_retries)) return batch(a.no_retries) > batch(b.no_retries);
  return a.no_oom.at.peak_reserved < b.no_oom.at.peak_reserved;
}

}  // namespace

MaxbatchResult find_max_batches(const std::vector<std::string>& specs, const MaxbatchBounds& bounds,
                                const BatchEvaluator& evaluate) {
  check_maxbatch_bounds(bounds);
  std::map<std::uint32_t, std::vector<Metrics>> runs;  // batch -> one Metrics per spec
  const auto run_at = [&](std::uint32_t b) -> const std::vector<Metrics>& {
    auto it = runs.find(b);
    if (it == runs.end()) {
      std::vector<Metrics> m = evaluate(b);
      if (m.size() != specs.size())
        throw std::logic_error(fmt::format("maxbatch: evaluator gave {} runs for {} specs", m.size(), specs.size()));
      it = runs.emplace(b, std::move(m)).first;
    }
    return it->second;
  };
  MaxbatchResult result;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    MaxbatchSpecResult r;
    r.spec = specs[i];
    const BoundarySearch no_oom =
        search_largest_passing(bounds, [&](std::uint32_t b) { return run_at(b)[i].num_ooms == 0; });
    const BoundarySearch no_retries = search_largest_passing(bounds, [&](std::uint32_t b) {
      const Metrics& m = run_at(b)[i];
      return m.num_ooms == 0 && m.num_alloc_retries == 0;
    });
    r.no_oom = answer_of(no_oom, runs, i, bounds);
    r.no_retries = answer_of(no_retries, runs, i, bounds);
    std::set<std::uint32_t> tried;
    for (const auto& entry : no_oom.tried) tried.insert(entry.first);
    for (const auto& entry : no_retries.tried) tried.insert(entry.first);
    r.tried.assign(tried.begin(), tried.end());
    result.specs.push_back(std::move(r));
  }
  for (const auto& entry : runs) result.generated.push_back(entry.first);
  for (std::size_t i = 0; i < result.specs.size(); ++i) {
    if (!result.specs[i].no_oom.batch) continue;
    if (!result.best || better(result.specs[i], result.specs[*result.best])) result.best = i;
  }
  return result;
}

}  // namespace fraglab
