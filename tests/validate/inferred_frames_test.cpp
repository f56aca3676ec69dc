// infer_unrecorded_events() on a trace with stack frames kept: inserted events have no stack and
// every other event keeps its own (Trace::event_stacks stays one per event).
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"
#include "support/events.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

using test::alloc_at;
using test::segment;
using test::with_op;

constexpr Addr A = 0x7f1000000000ull;
constexpr Addr B = 0x7f3000000000ull;

// The record of inferred_events_test.cpp's first case (an empty_cache() call is inferred before
// the segment_free, event 3), with a stack on each alloc: alloc 1 stack 0, alloc 2 stack 1.
TEST(InferredFrames, InsertedEventsHaveNoStack) {
  Trace t = test::recorded_run({segment(Op::SegmentAlloc, A, 2 * MiB), alloc_at(1, 512, A), with_op(Op::Free, 1),
                                segment(Op::SegmentFree, A, 2 * MiB), segment(Op::SegmentAlloc, B, 2 * MiB),
                                alloc_at(2, 512, B)});
  t.frames = {Frame{"a.py", 1, "f"}, Frame{"b.py", 2, "g"}};
  t.stacks = {{0}, {1}};
  t.event_stacks = {kNoString, 0, kNoString, kNoString, kNoString, 1};
  EXPECT_EQ(infer_unrecorded_events(t), 1u);
  ASSERT_EQ(t.events.size(), 7u);
  EXPECT_EQ(t.events[3].op, Op::EmptyCache);
  EXPECT_EQ(t.event_stacks, (std::vector<std::uint32_t>{kNoString, 0, kNoString, kNoString, kNoString, kNoString, 1}));
  validate_trace(t, "inferred");
}

// lm2.7b-ctx512-forward-bf16 starts with an inferred empty_cache() call: after inference the
// allocs, in order, carry the stacks they were read with.
TEST(InferredFrames, RealSnapshotAllocsKeepTheirStacks) {
  const std::filesystem::path path = std::filesystem::path(FRAGLAB_REAL_TRACES) / "lm2.7b-ctx512-forward-bf16.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(path);
  Trace t = read_trace(path.string(), TraceReadOptions{.frames = 8});
  auto alloc_stacks = [](const Trace& trace) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < trace.events.size(); ++i)
      if (trace.events[i].op == Op::Alloc) out.push_back(trace.event_stacks[i]);
    return out;
  };
  const std::vector<std::uint32_t> before = alloc_stacks(t);
  ASSERT_GT(infer_unrecorded_events(t), 0u);
  ASSERT_EQ(t.event_stacks.size(), t.events.size());
  EXPECT_EQ(alloc_stacks(t), before);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    if (t.events[i].op == Op::EmptyCache) {
      EXPECT_EQ(t.event_stacks[i], kNoString) << i;
    }
  }
  validate_trace(t, "inferred");
}

}  // namespace
}  // namespace fraglab
