// infer_unrecorded_events(): what validate must infer becomes events of the trace, so every
// command replays it. Hand-built records whose reading follows from allocator-model, and the real
// snapshot with an empty_cache() call before its recording began.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

using test::alloc_at;
using test::segment;
using test::with_op;

constexpr Addr A = 0x7f1000000000ull;
constexpr Addr B = 0x7f3000000000ull;

Trace recorded(std::vector<Event> events) { return test::recorded_run(std::move(events)); }

bool is_inferred_empty_cache(const Trace& t, const Event& e) {
  return e.op == Op::EmptyCache && e.tag != kNoString && t.string_at(e.tag) == kInferredTag;
}

// A freed 2 MiB small-pool segment would serve the next 512-byte request (allocator-model §3.1); the
// record frees it and makes another: an empty_cache() call between them, inserted before the burst.
TEST(InferredEvents, EmptyCacheBeforeAnUnexplainedBurst) {
  Trace t =
      recorded({segment(Op::SegmentAlloc, A, 2 * MiB), alloc_at(1, 512, A), with_op(Op::Free, 1),
                segment(Op::SegmentFree, A, 2 * MiB), segment(Op::SegmentAlloc, B, 2 * MiB), alloc_at(2, 512, B)});
  EXPECT_EQ(infer_unrecorded_events(t), 1u);
  ASSERT_EQ(t.events.size(), 7u);
  EXPECT_TRUE(is_inferred_empty_cache(t, t.events[3]));
  EXPECT_EQ(t.events[4].op, Op::SegmentFree);
  validate_trace(t, "inferred");

  // Validate reads the call from the trace (nothing left to infer) and still counts it.
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.empty_cache_inferred, 1u);

  // Inferring again changes nothing.
  const Trace once = t;
  EXPECT_EQ(infer_unrecorded_events(t), 0u);
  EXPECT_EQ(t, once);
}

// The burst is a retry's flush: 20 MiB reserved plus the 40 MiB segment that follows exceed the
// 40 MiB the run ever had (its peak), so the malloc had to free the cache first (allocator-model §5.3).
// Nothing is inserted.
TEST(InferredEvents, NoEmptyCacheForAFlushInsideAMalloc) {
  Trace t = recorded({segment(Op::SegmentAlloc, A, 20 * MiB), alloc_at(1, 4 * MiB, A), with_op(Op::Free, 1),
                      segment(Op::SegmentFree, A, 20 * MiB), segment(Op::SegmentAlloc, B, 40 * MiB),
                      alloc_at(2, 40 * MiB, B)});
  const Trace before = t;
  EXPECT_EQ(infer_unrecorded_events(t), 0u);
  EXPECT_EQ(t.events, before.events);
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.retries_simulated, 1u);
}

TEST(InferredEvents, TracesWithoutSegmentFreesAreLeftAlone) {
  Trace t = recorded({segment(Op::SegmentAlloc, A, 2 * MiB), alloc_at(1, 512, A), with_op(Op::Free, 1)});
  const Trace before = t;
  EXPECT_EQ(infer_unrecorded_events(t), 0u);
  EXPECT_EQ(t, before);
}

TEST(InferredEvents, SurviveAJsonlRoundTrip) {
  Trace t =
      recorded({segment(Op::SegmentAlloc, A, 2 * MiB), alloc_at(1, 512, A), with_op(Op::Free, 1),
                segment(Op::SegmentFree, A, 2 * MiB), segment(Op::SegmentAlloc, B, 2 * MiB), alloc_at(2, 512, B)});
  infer_unrecorded_events(t);
  std::ostringstream out;
  write_jsonl(t, out);
  EXPECT_NE(out.str().find(R"({"op":"empty_cache","tag":"inferred"})"), std::string::npos) << out.str();
  const Trace back = parse_jsonl(out.str(), "round-trip");
  ASSERT_EQ(back.events.size(), t.events.size());
  EXPECT_TRUE(is_inferred_empty_cache(back, back.events[3]));
}

}  // namespace
}  // namespace fraglab
