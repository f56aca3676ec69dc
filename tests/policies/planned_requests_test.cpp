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

// Ids that count the allocations from the first one's (as the readers and gen number them) are
// looked up without a map: the same intervals as with the same trace's ids made sparse (hashed),
// including a free before its allocation, a second free of an id, a free of an id below the
// first, and initial allocations.
TEST(PlannedRequests, CountingIdsGiveTheSameIntervalsAsSparseIds) {
  for (const AllocId first : {AllocId{0}, AllocId{1}, AllocId{1000}}) {
    const auto build = [&](auto id_of) {  // id_of(k): the id of the k-th allocation
      Trace t = make_trace({
          free_of(id_of(3)),                                    // before allocation 3: ignored
          alloc(id_of(2), 100),                                 // request 2 (after two initial ones)
          alloc(id_of(3), 200),                                 // request 3
          free_of(id_of(2)),                                    // ends 2
          with_op(Op::FreeCompleted, id_of(2)),                 // freed already: ignored
          free_of(id_of(0)),                                    // ends initial request 0
          with_op(Op::Free, first == 0 ? 999'999 : first - 1),  // below the first (or no) id: ignored
          alloc(id_of(4), 300),                                 // request 4, never freed
      });
      for (std::size_t k = 0; k < 2; ++k) {
        InitialAllocation a;
        a.id = id_of(k);
        a.requested = 10 * (k + 1);
        t.initial.allocations.push_back(a);
      }
      return planned_requests(t);
    };
    const std::vector<PlannedRequest> counting = build([&](std::size_t k) { return first + k; });
    const std::vector<PlannedRequest> sparse = build([](std::size_t k) { return 5'000'000'000ull * (k + 1); });
    ASSERT_EQ(counting.size(), 5u);
    ASSERT_EQ(sparse.size(), 5u);
    for (std::size_t k = 0; k < counting.size(); ++k) {
      EXPECT_EQ(counting[k].begin, sparse[k].begin) << "first id " << first << ", request " << k;
      EXPECT_EQ(counting[k].end, sparse[k].end) << "first id " << first << ", request " << k;
      EXPECT_EQ(counting[k].size, sparse[k].size) << "first id " << first << ", request " << k;
      EXPECT_EQ(counting[k].id, first + k);
    }
    EXPECT_EQ(counting[0].end, 6u);  // freed by event 5
    EXPECT_EQ(counting[1].end, 9u);  // never: events + 1
    EXPECT_EQ(counting[2].end, 4u);  // event 3
  }
}

// Ids that count the first allocations and then skip one: the requests are collected again with a
// map (the guess that they count would take the free of the skipped id for one of a live request).
TEST(PlannedRequests, IdsThatStopCountingGiveTheHandDerivedIntervals) {
  const Trace t = make_trace({
      alloc(0, 100),  // 0
      alloc(1, 200),  // 1
      alloc(2, 300),  // 2
      alloc(4, 400),  // 3: request 3 (id 3 skipped)
      free_of(3),     // 4: no such allocation: ignored
      free_of(4),     // 5: request 3 ends at 6
      free_of(1),     // 6: request 1 ends at 7
  });
  const std::vector<PlannedRequest> r = planned_requests(t);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].end, 8u);  // never freed: events + 1
  EXPECT_EQ(r[1].end, 7u);
  EXPECT_EQ(r[2].end, 8u);
  EXPECT_EQ(r[3].begin, 4u);
  EXPECT_EQ(r[3].end, 6u);
  EXPECT_EQ(r[3].id, 4u);
}

}  // namespace
}  // namespace fraglab::test
