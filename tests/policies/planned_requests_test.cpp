// planned_requests() (include/fraglab/planned_requests.hpp): the live interval of every
// allocation, derived by hand; the same whether the trace numbers its allocations densely (a table
// by id) or sparsely (a hash map), since the two lookups must give the same answers.
#include <gtest/gtest.h>

#include <vector>

#include "fraglab/planned_requests.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

// begin = index of the alloc event + 1; end = index of the event that completes the free + 1, or
// events + 1 (= 9 here) when never freed; a free_requested does not end it.
void expect_intervals(AllocId a, AllocId b, AllocId c) {
  const Trace t = make_trace({
      alloc(a, 100),                   // 0
      alloc(b, 200, 7),                // 1
      free_of(a),                      // 2: a ends at 3
      alloc(c, 300),                   // 3
      with_op(Op::FreeRequested, b),   // 4: not yet
      with_op(Op::FreeCompleted, b),   // 5: b ends at 6
      alloc(a, 400),                   // 6: the id again, a new request
      free_of(c),                      // 7: c ends at 8
      with_op(Op::Free, 999'999'999),  // 8: not live: ignored
  });
  const std::vector<PlannedRequest> r = planned_requests(t);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].begin, 1u);
  EXPECT_EQ(r[0].end, 3u);
  EXPECT_EQ(r[0].id, a);
  EXPECT_EQ(r[1].begin, 2u);
  EXPECT_EQ(r[1].end, 6u);
  EXPECT_EQ(r[1].stream, 7u);
  EXPECT_EQ(r[2].begin, 4u);
  EXPECT_EQ(r[2].end, 8u);
  EXPECT_EQ(r[2].size, 300u);
  EXPECT_EQ(r[3].begin, 7u);
  EXPECT_EQ(r[3].end, 10u);  // never freed: events + 1
  EXPECT_EQ(r[3].size, 400u);
}

TEST(PlannedRequests, DenseIdsGiveTheHandDerivedIntervals) { expect_intervals(0, 1, 2); }

TEST(PlannedRequests, SparseIdsGiveTheSameIntervals) { expect_intervals(5'000'000'000ull, 17, 123'456'789ull); }

}  // namespace
}  // namespace fraglab::test
