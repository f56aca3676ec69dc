// The micro-batch search on synthetic predicates: its answers are checked against the largest
// passing batch found by trying every batch (brute force), and its non-monotone detection against
// patterns worked through by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "fraglab/maxbatch.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

// pass(b) = b is in `passing`; counts the calls per batch.
struct SetPredicate {
  std::set<std::uint32_t> passing;
  std::map<std::uint32_t, int> calls;
  bool operator()(std::uint32_t b) {
    ++calls[b];
    return passing.count(b) > 0;
  }
};

std::optional<std::uint32_t> brute_force(const std::set<std::uint32_t>& passing, const MaxbatchBounds& bounds) {
  std::optional<std::uint32_t> best;
  for (std::uint32_t b = bounds.min_batch; b <= bounds.max_batch; ++b) {
    if (passing.count(b)) best = b;
  }
  return best;
}

TEST(MaxbatchSearch, MonotoneThresholdsMatchBruteForceWithFewTries) {
  const MaxbatchBounds bounds{.min_batch = 1, .max_batch = 200};
  for (std::uint32_t threshold = 0; threshold <= 200; ++threshold) {
    SetPredicate p;
    for (std::uint32_t b = 1; b <= threshold; ++b) p.passing.insert(b);
    const BoundarySearch s = search_largest_passing(bounds, std::ref(p));
    EXPECT_EQ(s.answer, brute_force(p.passing, bounds)) << "threshold " << threshold;
    EXPECT_FALSE(s.non_monotone()) << "threshold " << threshold;
    for (const auto& [b, n] : p.calls) EXPECT_EQ(n, 1) << "batch " << b << " evaluated twice";
    // Doubling probe (<= 8 tries up to 200) + binary search (<= 7) + the window (2 below, 2 above).
    EXPECT_LE(p.calls.size(), 8u + 7u + 4u) << "threshold " << threshold;
    EXPECT_LT(p.calls.size(), 200u);
  }
}

TEST(MaxbatchSearch, RespectsMinBatch) {
  SetPredicate p;
  for (std::uint32_t b = 1; b <= 37; ++b) p.passing.insert(b);
  const MaxbatchBounds bounds{.min_batch = 10, .max_batch = 100};
  const BoundarySearch s = search_largest_passing(bounds, std::ref(p));
  EXPECT_EQ(s.answer, 37u);
  EXPECT_EQ(p.calls.begin()->first, 10u);  // never below --min-batch
  EXPECT_LE(p.calls.rbegin()->first, 100u);
}

TEST(MaxbatchSearch, AllPassGivesMaxBatch) {
  SetPredicate p;
  for (std::uint32_t b = 1; b <= 1000; ++b) p.passing.insert(b);
  const BoundarySearch s = search_largest_passing({.min_batch = 3, .max_batch = 50}, std::ref(p));
  EXPECT_EQ(s.answer, 50u);
}

TEST(MaxbatchSearch, NothingPassesGivesNoAnswer) {
  SetPredicate p;
  const BoundarySearch s = search_largest_passing({.min_batch = 1, .max_batch = 64}, std::ref(p));
  EXPECT_FALSE(s.answer.has_value());
  // Only the lower bound and the window above it were tried.
  EXPECT_EQ(p.calls.size(), 3u);
}

// passes 1..20 except 19. By hand: probe 1 2 4 8 16 pass, 32 fails; binary search 24 fails,
// 20 passes, 22 fails, 21 fails: boundary 20; the window below tries 19 (fails) and 18.
TEST(MaxbatchSearch, FailureJustBelowTheBoundaryIsNonMonotone) {
  SetPredicate p;
  for (std::uint32_t b = 1; b <= 20; ++b) p.passing.insert(b);
  p.passing.erase(19);
  const BoundarySearch s = search_largest_passing({.min_batch = 1, .max_batch = 64}, std::ref(p));
  EXPECT_EQ(s.answer, 20u);
  EXPECT_EQ(s.fails_below, std::vector<std::uint32_t>{19});
  EXPECT_TRUE(s.non_monotone());
}

// passes 1..9 and 11. By hand: probe 1 2 4 8 pass, 16 fails; 12 fails, 10 fails, 9 passes:
// boundary 9 (10 fails); the window above tries 11 (passes) and 12: the search restarts from 11,
// 12 fails, the window below tries 10 (fails) and 9. Answer 11, failing below it: 10.
TEST(MaxbatchSearch, PassPastTheFirstFailureIsFoundByTheWindowAbove) {
  SetPredicate p;
  for (std::uint32_t b = 1; b <= 9; ++b) p.passing.insert(b);
  p.passing.insert(11);
  const BoundarySearch s = search_largest_passing({.min_batch = 1, .max_batch = 64}, std::ref(p));
  EXPECT_EQ(s.answer, 11u);
  EXPECT_EQ(s.fails_below, std::vector<std::uint32_t>{10});
  EXPECT_TRUE(s.non_monotone());
  // Without the window above, the monotone search stops at 9.
  SetPredicate q{p.passing, {}};
  const BoundarySearch narrow =
      search_largest_passing({.min_batch = 1, .max_batch = 64, .verify_below = 0, .scan_above = 0}, std::ref(q));
  EXPECT_EQ(narrow.answer, 9u);
  EXPECT_FALSE(narrow.non_monotone());
}

// The lower bound fails but the next batch passes: found by the window above --min-batch.
TEST(MaxbatchSearch, FailingMinBatchWithPassAboveIsNonMonotone) {
  SetPredicate p;
  for (std::uint32_t b = 5; b <= 30; ++b) p.passing.insert(b);
  const BoundarySearch s = search_largest_passing({.min_batch = 4, .max_batch = 64}, std::ref(p));
  EXPECT_EQ(s.answer, 30u);
  EXPECT_EQ(s.fails_below, std::vector<std::uint32_t>{4});
}

// A search over several specs evaluates each batch once for all of them.
TEST(MaxbatchSearch, FindMaxBatchesSharesEachBatchAcrossSpecsAndGoals) {
  std::map<std::uint32_t, int> evaluated;
  const BatchEvaluator evaluate = [&](std::uint32_t b) {
    ++evaluated[b];
    Metrics a, c;
    a.num_ooms = b > 12 ? 1 : 0;          // spec a: fits up to 12
    a.num_alloc_retries = b > 9 ? 3 : 0;  // without retries up to 9
    a.peak_reserved = b * 100;
    c.num_ooms = b > 14 ? 1 : 0;  // spec c: fits up to 14, never retries
    c.peak_reserved = b * 90;
    return std::vector<Metrics>{a, c};
  };
  const MaxbatchResult r = find_max_batches({"a", "c"}, {.min_batch = 1, .max_batch = 40}, evaluate);
  ASSERT_EQ(r.specs.size(), 2u);
  EXPECT_EQ(r.specs[0].no_oom.batch, 12u);
  EXPECT_EQ(r.specs[0].no_oom.at.peak_reserved, 1200u);
  EXPECT_EQ(r.specs[0].no_oom.at.num_alloc_retries, 3u);
  EXPECT_EQ(r.specs[0].no_retries.batch, 9u);
  EXPECT_EQ(r.specs[1].no_oom.batch, 14u);
  EXPECT_EQ(r.specs[1].no_retries.batch, 14u);
  EXPECT_EQ(r.best, 1u);
  for (const auto& [b, n] : evaluated) EXPECT_EQ(n, 1) << "batch " << b;
  EXPECT_EQ(r.generated.size(), evaluated.size());
}

TEST(MaxbatchSearch, BadBoundsNameTheOption) {
  EXPECT_EQ(testing::error_of([] { check_maxbatch_bounds({.min_batch = 0}); }),
            "--min-batch 0: expected a micro-batch of at least 1");
  EXPECT_EQ(testing::error_of([] { check_maxbatch_bounds({.min_batch = 9, .max_batch = 8}); }),
            "--min-batch 9 is above --max-batch 8: expected min <= max");
}

}  // namespace
}  // namespace fraglab
