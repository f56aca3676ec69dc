// offline: the planner's occupancy index against the plan's definition (offline_reference.hpp),
// on the shapes where the index takes its shortcuts: groups of same-size tensors allocated and
// freed together (repeated queries answered from a kept answer), long-lived tensors (queries that
// unite many sets), and every shipped and real trace. Offsets, sizes and heap must be equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/planned_requests.hpp"
#include "fraglab/rng.hpp"
#include "fraglab/trace_io.hpp"
#include "offline/greedy_plan.hpp"
#include "offline/occupancy_index.hpp"
#include "policies/offline_reference.hpp"
#include "support/real_traces.hpp"

namespace fraglab::test {
namespace {

void expect_same_plan(const std::vector<PlannedRequest>& requests, Bytes alignment, const std::string& what) {
  const offline::GreedyPlan plan = offline::plan_greedy_by_size(requests, alignment);
  const ReferencePlan reference = reference_plan(requests, alignment);
  ASSERT_EQ(std::vector<Bytes>(plan.sizes.begin(), plan.sizes.end()), reference.sizes) << what;
  for (std::size_t k = 0; k < requests.size(); ++k) {
    ASSERT_EQ(plan.offsets[k], reference.offsets[k]) << what << ": request " << k;
  }
  EXPECT_EQ(plan.heap_size, reference.heap_size) << what;
}

// A training step's shape, by event position: tensors live from the start to the end (weights),
// groups of 1-6 tensors of one size allocated back to back and later freed back to back, in
// allocation or reverse order (one slot range for the group: repeated queries), temporaries
// freed right away, and a few groups never freed.
std::vector<PlannedRequest> training_like(std::uint64_t seed) {
  Rng rng(seed);
  std::vector<PlannedRequest> requests;
  std::uint64_t position = 1;
  const auto add = [&](std::uint64_t begin, Bytes size) {
    PlannedRequest r;
    r.begin = begin;
    r.size = size;
    requests.push_back(r);
    return requests.size() - 1;
  };
  const Bytes unit = Bytes{1} << (9 + rng.below(12));
  const auto size = [&] { return unit * (rng.below(3) == 0 ? 1 + rng.below(64) : Bytes{1} << rng.below(6)); };
  std::vector<std::size_t> weights;
  for (std::uint64_t w = rng.below(6); w > 0; --w) weights.push_back(add(0, size()));
  std::vector<std::vector<std::size_t>> open;
  const std::uint64_t events = 100 + rng.below(300);
  for (std::uint64_t e = 0; e < events; ++e) {
    const std::uint64_t choice = rng.below(10);
    if (choice < 4 || open.empty()) {  // a group of one size, back to back
      const Bytes group_size = size();
      std::vector<std::size_t> group;
      for (std::uint64_t g = 1 + rng.below(6); g > 0; --g) group.push_back(add(position++, group_size));
      open.push_back(std::move(group));
    } else if (choice < 8) {  // free a group, back to back (mostly the newest: nested lifetimes)
      const std::size_t at = rng.below(3) == 0 ? rng.below(open.size()) : open.size() - 1;
      std::vector<std::size_t> group = std::move(open[at]);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(at));
      if (rng.below(2) == 0) std::reverse(group.begin(), group.end());
      for (const std::size_t k : group) requests[k].end = position++;
    } else {  // a temporary
      const std::size_t k = add(position++, size());
      requests[k].end = position++;
    }
  }
  for (const std::vector<std::size_t>& group : open) {
    for (const std::size_t k : group) requests[k].end = position + 1;
  }
  for (const std::size_t k : weights) requests[k].end = position + 1;
  return requests;
}

TEST(OfflinePlanEquality, TrainingLikeTracesMatchTheDefinition) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    expect_same_plan(training_like(seed), seed % 3 == 0 ? 4096 : 512, "seed " + std::to_string(seed));
  }
}

// Lifetimes drawn from a few positions (so many are identical or nested) and sizes from a few
// values (so many are equal): the ties of the placement order and of equal gaps.
TEST(OfflinePlanEquality, RandomLifetimesWithTiesMatchTheDefinition) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    const std::uint64_t positions = 2 + rng.below(30);
    std::vector<PlannedRequest> requests(1 + rng.below(120));
    for (PlannedRequest& r : requests) {
      r.begin = rng.below(positions);
      r.end = r.begin + 1 + rng.below(positions - r.begin);
      r.size = 512 * (1 + rng.below(seed % 4 == 0 ? 2 : 8)) - rng.below(2);
    }
    expect_same_plan(requests, 512, "seed " + std::to_string(seed));
  }
}

// Stack-like lifetimes (each request freed before the ones allocated before it: nested), runs of
// identical lifetimes, and sizes from many values or from two: the long-lived requests whose
// queries read many begin sets, and ties of size and lifetime. Hundreds of requests, so the
// index's tree has many levels and ranges start at odd and even slots.
TEST(OfflinePlanEquality, NestedAndIdenticalLifetimesMatchTheDefinition) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    std::vector<PlannedRequest> requests;
    std::vector<std::size_t> open;
    std::uint64_t position = 0;
    const bool many_sizes = seed % 2 == 0;
    const auto size = [&] { return many_sizes ? 1 + rng.below(1u << 20) : Bytes{512} << rng.below(2); };
    while (requests.size() < 200 + 20 * seed) {
      if (open.empty() || rng.below(3) != 0) {
        const Bytes group_size = size();
        for (std::uint64_t g = 1 + rng.below(rng.below(4) == 0 ? 8 : 2); g > 0; --g) {  // allocated together
          PlannedRequest r;
          r.begin = position;
          r.size = rng.below(2) == 0 ? group_size : size();
          requests.push_back(r);
          open.push_back(requests.size() - 1);
        }
        ++position;
      } else {  // the newest few freed at once (same end: identical lifetimes when begun together)
        for (std::uint64_t g = 1 + rng.below(3); g > 0 && !open.empty(); --g) {
          requests[open.back()].end = position + 1;
          open.pop_back();
        }
        position += 1 + rng.below(2);
      }
    }
    for (const std::size_t k : open) requests[k].end = position + 1;
    expect_same_plan(requests, seed % 3 == 0 ? 1 : 512, "seed " + std::to_string(seed));
  }
}

// The index alone, with no queries announced (every set kept) and with them announced, with the
// default covers and with covers only near the root, on random slot ranges of every length from
// many first slots (most of them one or two slots long, between inserts over random ranges),
// answered by occupied() or best_fit() at random: every answer is the union of the runs inserted
// so far whose slot ranges meet the query's (a range meets another iff one holds the other's
// first slot, which the index relies on).
using Runs = std::vector<std::pair<Bytes, Bytes>>;
using InsertedRuns = std::vector<std::pair<offline::SlotRange, offline::OffsetRun>>;

// By brute force: the union of the runs inserted during some slot of `query`, sorted, with
// touching or overlapping runs merged (what OccupancyIndex::occupied answers).
Runs union_during(const InsertedRuns& inserted, const offline::SlotRange& query) {
  Runs runs;
  for (const auto& [range, run] : inserted) {
    if (range.first < query.last && query.first < range.last) runs.emplace_back(run.begin, run.end);
  }
  std::sort(runs.begin(), runs.end());
  Runs merged;
  for (const auto& [begin, end] : runs) {
    if (!merged.empty() && begin <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, end);
    } else {
      merged.emplace_back(begin, end);
    }
  }
  return merged;
}

// Best fit by its definition: the start of the smallest gap of `taken` that holds `size`, the
// lowest among equal ones, else the top of `taken`.
Bytes best_fit_by_definition(const Runs& taken, Bytes size) {
  Bytes top = 0;
  Bytes offset = 0;
  Bytes best_gap = 0;
  for (const auto& [begin, end] : taken) {
    if (begin - top >= size && (best_gap == 0 || begin - top < best_gap)) {
      best_gap = begin - top;
      offset = top;
    }
    top = end;
  }
  return best_gap == 0 ? top : offset;
}

TEST(OfflinePlanEquality, IndexAnswersTheUnionOfOverlappingRunsOnRandomRanges) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const auto slots = static_cast<std::uint32_t>(1 + rng.below(seed % 2 == 0 ? 9 : 300));
    std::vector<offline::SlotRange> queries;
    for (int q = 0; q < 400; ++q) {
      const auto first = static_cast<std::uint32_t>(rng.below(slots));
      const std::uint64_t room = slots - first;
      const std::uint64_t kind = rng.below(4);  // 0: any length, 1: two slots where there is room, else one
      const std::uint64_t more = kind == 0 ? rng.below(room) : kind == 1 ? std::min<std::uint64_t>(1, room - 1) : 0;
      queries.push_back({first, static_cast<std::uint32_t>(first + 1 + more)});
    }
    // Covers down to height 2 (the default on these trees) and only on the top 3 levels, with
    // own sets read one by one below them.
    for (const auto& [announced, cached_depth] :
         {std::pair{false, offline::OccupancyIndex::kDefaultCachedDepth},
          std::pair{true, offline::OccupancyIndex::kDefaultCachedDepth}, std::pair{false, 2u}, std::pair{true, 2u}}) {
      offline::OccupancyIndex index =
          announced ? offline::OccupancyIndex(slots, queries, cached_depth)
                    : offline::OccupancyIndex(slots, std::span<const offline::SlotRange>{}, cached_depth);
      InsertedRuns inserted;
      for (const offline::SlotRange& query : queries) {
        const Runs expected = union_during(inserted, query);
        if (rng.below(2) == 0) {
          const Bytes size = 8 * (1 + rng.below(6));
          ASSERT_EQ(index.best_fit(query.first, query.last, size), best_fit_by_definition(expected, size))
              << "seed " << seed << ", announced " << announced << ", cached depth " << cached_depth << ", query "
              << &query - queries.data();
        } else {
          std::vector<std::pair<Bytes, Bytes>> answer;
          for (const offline::OffsetRun& r : index.occupied(query.first, query.last)) {
            answer.emplace_back(r.begin, r.end);
          }
          ASSERT_EQ(answer, expected) << "seed " << seed << ", announced " << announced << ", cached depth "
                                      << cached_depth << ", query " << &query - queries.data();
        }
        // The request's own run, over its own range, then one over a random range.
        const Bytes begin = rng.below(200) * 8;
        const offline::OffsetRun run{begin, begin + 8 * (1 + rng.below(6))};
        index.insert(query.first, query.last, run);
        inserted.emplace_back(query, run);
        const auto first = static_cast<std::uint32_t>(rng.below(slots));
        const offline::SlotRange other{first, static_cast<std::uint32_t>(first + 1 + rng.below(slots - first))};
        const Bytes other_begin = rng.below(200) * 8;
        const offline::OffsetRun other_run{other_begin, other_begin + 8 * (1 + rng.below(6))};
        index.insert(other.first, other.last, other_run);
        inserted.emplace_back(other, other_run);
      }
    }
  }
}

// merge_union is the union of two sets, and the gaps of a ∪ b scanned without writing the union
// (best_fit_in_union) or in the union (best_fit_in) pick what the definition picks: the lowest of
// the smallest gaps that hold the size, else the top. Both are checked against a brute force over
// the runs of both sets (sorted, touching runs joined); the sizes include exact fits of gaps that
// occur more than once, and tails where one set runs out while the other still bridges or touches.
// Each set is followed in memory by a run that would cover everything: a scan that reads past a
// set's end (the loops watch only the set that runs out first) picks another offset.
TEST(OfflinePlanEquality, MergeAndBestFitInUnionMatchABruteForce) {
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    Rng rng(seed);
    const auto random_set = [&] {
      std::vector<offline::OffsetRun> set;
      Bytes at = rng.below(3) * 8;
      for (std::uint64_t n = rng.below(8); n > 0; --n) {
        const Bytes end = at + 8 * (1 + rng.below(4));
        set.push_back({at, end});
        at = end + 8 * (1 + rng.below(5));  // (sets never hold touching runs)
      }
      return set;
    };
    const auto then_poison = [](std::vector<offline::OffsetRun> set) {
      set.push_back({0, ~Bytes{0} / 2});
      return set;
    };
    const std::vector<offline::OffsetRun> a_then_poison = then_poison(random_set());
    const std::vector<offline::OffsetRun> b_then_poison = then_poison(random_set());
    const std::span<const offline::OffsetRun> a(a_then_poison.data(), a_then_poison.size() - 1);
    const std::span<const offline::OffsetRun> b(b_then_poison.data(), b_then_poison.size() - 1);
    std::vector<std::pair<Bytes, Bytes>> runs;
    for (const offline::OffsetRun& r : a) runs.emplace_back(r.begin, r.end);
    for (const offline::OffsetRun& r : b) runs.emplace_back(r.begin, r.end);
    std::sort(runs.begin(), runs.end());
    std::vector<std::pair<Bytes, Bytes>> expected;
    for (const auto& [begin, end] : runs) {
      if (!expected.empty() && begin <= expected.back().second) {
        expected.back().second = std::max(expected.back().second, end);
      } else {
        expected.emplace_back(begin, end);
      }
    }
    std::vector<offline::OffsetRun> merged(a.size() + b.size());
    merged.resize(offline::merge_union(a, b, merged.data()));
    std::vector<std::pair<Bytes, Bytes>> got;
    for (const offline::OffsetRun& r : merged) got.emplace_back(r.begin, r.end);
    ASSERT_EQ(got, expected) << "seed " << seed;
    // merge_union_sparse, either set as the few, and merge_union_sized give the same union.
    const auto union_by = [&](auto merge, std::span<const offline::OffsetRun> x,
                              std::span<const offline::OffsetRun> y) {
      std::vector<offline::OffsetRun> out(x.size() + y.size());
      out.resize(merge(x, y, out.data()));
      std::vector<std::pair<Bytes, Bytes>> pairs;
      for (const offline::OffsetRun& r : out) pairs.emplace_back(r.begin, r.end);
      return pairs;
    };
    ASSERT_EQ(union_by(offline::merge_union_sparse, a, b), expected) << "seed " << seed;
    ASSERT_EQ(union_by(offline::merge_union_sparse, b, a), expected) << "seed " << seed;
    ASSERT_EQ(union_by(offline::merge_union_sized, a, b), expected) << "seed " << seed;
    if (!a.empty() && !b.empty()) {  // the variant told that neither is empty
      ASSERT_EQ(union_by(offline::merge_union<true>, a, b), expected) << "seed " << seed;
    }
    for (Bytes size = 8; size <= 48; size += 8) {
      // The definition: every gap below the top run, the smallest that holds `size`, lowest first.
      Bytes want = expected.empty() ? 0 : expected.back().second;
      Bytes best_gap = ~Bytes{0};
      Bytes gap_begin = 0;
      for (const auto& [begin, end] : expected) {
        const Bytes gap = begin - gap_begin;
        if (gap >= size && gap < best_gap) {
          best_gap = gap;
          want = gap_begin;
        }
        gap_begin = end;
      }
      ASSERT_EQ(offline::best_fit_in_union(a, b, size), want) << "seed " << seed << ", size " << size;
      if (!a.empty() && !b.empty()) {  // the variant told that neither is empty
        ASSERT_EQ(offline::best_fit_in_union<true>(a, b, size), want) << "seed " << seed << ", size " << size;
      }
      ASSERT_EQ(offline::best_fit_in(merged, size), want) << "seed " << seed << ", size " << size;
    }
  }
}

TEST(OfflinePlanEquality, EveryShippedAndRealTraceMatchesTheDefinition) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples")) {
    if (entry.path().extension() == ".jsonl") paths.push_back(entry.path().string());
  }
  const std::string real = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(real);
  for (const auto& entry : std::filesystem::directory_iterator(real)) {
    if (entry.path().extension() == ".pickle") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  ASSERT_GE(paths.size(), 10u);
  for (const std::string& path : paths) expect_same_plan(planned_requests(read_trace(path)), 512, path);
}

// The index with announced queries drawn from a few slot ranges, answered by occupied() or by
// best_fit() at random (so most repeat one of the last
// few, with 0-3 inserts in between, or 0-39 for odd seeds, some of them meeting the range): every
// answer is the union of the runs inserted so far whose slot ranges meet the query's. (Thousands
// of inserts: the log of inserts is compacted several times, also while a kept answer is older
// than the compaction threshold.)
TEST(OfflinePlanEquality, RepeatedQueriesAnswerTheUnionOfOverlappingRuns) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    const std::uint32_t slots = 40;
    std::vector<offline::SlotRange> ranges;
    for (int r = 0; r < 6; ++r) {
      const auto first = static_cast<std::uint32_t>(rng.below(slots));
      ranges.push_back({first, static_cast<std::uint32_t>(first + 1 + rng.below(slots - first))});
    }
    std::vector<offline::SlotRange> queries;
    const bool many_inserts = seed % 2 == 1;
    for (int q = 0; q < (many_inserts ? 300 : 1200); ++q) {
      queries.push_back(ranges[rng.below(rng.below(4) == 0 ? ranges.size() : 2)]);
    }
    offline::OccupancyIndex index(slots, queries);
    InsertedRuns inserted;
    for (const offline::SlotRange& query : queries) {
      const Runs expected = union_during(inserted, query);
      if (rng.below(2) == 0) {
        const Bytes size = 8 * (1 + rng.below(6));
        ASSERT_EQ(index.best_fit(query.first, query.last, size), best_fit_by_definition(expected, size))
            << "seed " << seed << ", query " << &query - queries.data();
      } else {
        std::vector<std::pair<Bytes, Bytes>> answer;
        for (const offline::OffsetRun& r : index.occupied(query.first, query.last)) answer.emplace_back(r.begin, r.end);
        ASSERT_EQ(answer, expected) << "seed " << seed << ", query " << &query - queries.data();
      }
      for (std::uint64_t i = rng.below(many_inserts ? 40 : 4); i > 0; --i) {
        const offline::SlotRange range = rng.below(2) == 0 ? query : ranges[rng.below(ranges.size())];
        const Bytes begin = rng.below(100) * 8;
        const offline::OffsetRun run{begin, begin + 8 * (1 + rng.below(6))};
        index.insert(range.first, range.last, run);
        inserted.emplace_back(range, run);
      }
    }
  }
}

// place() is best_fit() then insert() of the run it picked, place_next() is place() of the next
// announced query, and place_all() is place_next() of each in turn: four indexes told the same
// queries, one driven each way over random slot ranges and sizes, pick the same offsets.
TEST(OfflinePlanEquality, PlaceAndPlaceNextAreBestFitThenInsert) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const auto slots = static_cast<std::uint32_t>(1 + rng.below(70));
    std::vector<offline::SlotRange> queries;
    for (int q = 0; q < 400; ++q) {
      const bool recent = !queries.empty() && rng.below(4) == 0;  // some repeat a recent range
      if (recent) {
        queries.push_back(queries[queries.size() - 1 - rng.below(std::min<std::size_t>(queries.size(), 5))]);
        continue;
      }
      const auto first = static_cast<std::uint32_t>(rng.below(slots));
      const auto length = static_cast<std::uint32_t>(1 + rng.below(rng.below(3) == 0 ? slots - first : 2));
      queries.push_back({first, std::min(slots, first + length)});
    }
    offline::OccupancyIndex placed(slots, queries);
    offline::OccupancyIndex placed_next(slots, queries);
    offline::OccupancyIndex separate(slots, queries);
    // place_all's input: query n's size and offset at request order[n] (a permutation).
    std::vector<std::uint32_t> order(queries.size());
    for (std::uint32_t n = 0; n < order.size(); ++n) order[n] = n;
    for (std::size_t n = order.size(); n > 1; --n) std::swap(order[n - 1], order[rng.below(n)]);
    std::vector<Bytes> sizes(queries.size());
    std::vector<Bytes> offsets(queries.size());
    Bytes top = 0;
    for (const offline::SlotRange& query : queries) {
      const Bytes size = 512 * (1 + rng.below(8));
      const std::uint32_t request = order[&query - queries.data()];
      sizes[request] = size;
      const Bytes offset = separate.best_fit(query.first, query.last, size);
      offsets[request] = offset;
      top = std::max(top, offset + size);
      separate.insert(query.first, query.last, offline::OffsetRun{offset, offset + size});
      ASSERT_EQ(placed.place(query.first, query.last, size), offset)
          << "seed " << seed << ", query " << &query - queries.data();
      ASSERT_EQ(placed_next.place_next(size), offset) << "seed " << seed << ", query " << &query - queries.data();
    }
    EXPECT_THROW(placed_next.place_next(512), std::logic_error);  // no announced query left
    offline::OccupancyIndex placed_all(slots, queries);
    std::vector<Bytes> all_offsets(queries.size(), ~Bytes{0});
    ASSERT_EQ(placed_all.place_all(order, sizes.data(), all_offsets.data()), top) << "seed " << seed;
    ASSERT_EQ(all_offsets, offsets) << "seed " << seed;
    EXPECT_THROW(placed_all.place_all(std::span(order).first(1), sizes.data(), all_offsets.data()),
                 std::logic_error);  // no announced query left
  }
}

}  // namespace
}  // namespace fraglab::test
