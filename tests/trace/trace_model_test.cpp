// The Trace model: op names, interning, summary figures worked out by hand, the invariant check,
// and the live-allocation table every one of them relies on.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "fraglab/trace.hpp"
#include "trace/live_allocations.hpp"

namespace fraglab {
namespace {

Event ev(Op op, AllocId id, Bytes size = 0, StreamId stream = 0) {
  Event e;
  e.op = op;
  e.id = id;
  e.size = size;
  e.stream = stream;
  return e;
}

TEST(TraceModel, OpNamesRoundTrip) {
  const char* names[] = {"alloc",         "free",         "free_requested", "free_completed", "empty_cache", "mark",
                         "segment_alloc", "segment_free", "segment_map",    "segment_unmap",  "oom"};
  for (int i = 0; i <= static_cast<int>(Op::Oom); ++i) {
    Op op = static_cast<Op>(i);
    EXPECT_EQ(op_name(op), names[i]);
    EXPECT_EQ(op_from_name(names[i]), op);
    EXPECT_EQ(is_observed(op), i >= static_cast<int>(Op::SegmentAlloc)) << names[i];
  }
  EXPECT_EQ(op_from_name("malloc"), std::nullopt);
  EXPECT_EQ(op_from_name("Alloc"), std::nullopt);
  EXPECT_EQ(op_from_name(""), std::nullopt);
}

TEST(TraceModel, InternReturnsOneIndexPerDistinctString) {
  Trace t;
  EXPECT_EQ(t.intern("param"), 0u);
  EXPECT_EQ(t.intern("act"), 1u);
  EXPECT_EQ(t.intern("param"), 0u);
  EXPECT_EQ(t.intern(""), 2u);
  EXPECT_EQ(t.strings, (std::vector<std::string>{"param", "act", ""}));
  EXPECT_EQ(t.string_at(1), "act");
}

TEST(TraceModel, ReservedBytesIsTheSumOfInitialSegments) {
  InitialState s;
  EXPECT_EQ(s.reserved_bytes(), 0u);
  EXPECT_TRUE(s.empty());
  s.segments = {{0, 2 * MiB, 0, true, false}, {4 * MiB, 20 * MiB, 0, false, false}};
  EXPECT_EQ(s.reserved_bytes(), 22 * MiB);
  EXPECT_FALSE(s.empty());
}

TEST(TraceSummary, EmptyTrace) {
  TraceSummary s = summarize(Trace{});
  EXPECT_EQ(s.events, 0u);
  EXPECT_EQ(s.peak_requested, 0u);
  EXPECT_EQ(s.streams, 0u);
}

TEST(TraceSummary, CountsAndPeakWithDeferredFreesAndInitialAllocations) {
  Trace t;
  // Live at the start: 100 (1200 B) and 101 (500 B, free already requested): 1700 B.
  t.initial.allocations = {{100, 0x1000, 1200, 0, 0, false}, {101, 0x2000, 500, 0, 0, true}};
  t.events = {
      ev(Op::Alloc, 1, 300),       // 2000
      ev(Op::Alloc, 2, 700, 7),    // 2700
      ev(Op::FreeRequested, 2),    // 2700: a requested free still holds its memory
      ev(Op::Alloc, 3, 250, 7),    // 2950
      ev(Op::FreeCompleted, 101),  // 2450
      ev(Op::Free, 1),             // 2150
      ev(Op::FreeCompleted, 2),    // 1450
      ev(Op::EmptyCache, 0),
      ev(Op::SegmentAlloc, 0, 2 * MiB),  // observed events change nothing
      ev(Op::Oom, 0, 8 * GiB),
      ev(Op::Alloc, 4, 4000, 0),  // 5450: the peak
      ev(Op::Free, 4),            // 1450
      ev(Op::Free, 100),          // 250
  };
  TraceSummary s = summarize(t);
  EXPECT_EQ(s.events, 13u);
  EXPECT_EQ(s.allocs, 4u);
  EXPECT_EQ(s.frees, 5u);  // free 1, 4, 100 and free_completed 101, 2
  EXPECT_EQ(s.observed_events, 2u);
  EXPECT_EQ(s.streams, 2u);  // 0 and 7
  EXPECT_EQ(s.peak_requested, 5450u);
  EXPECT_EQ(s.total_requested, 300u + 700 + 250 + 4000);
  EXPECT_EQ(s.max_request, 4000u);
}

TEST(TraceSummary, ADeferredFreeHoldsMemoryUntilItCompletes) {
  Trace deferred;
  deferred.events = {ev(Op::Alloc, 1, 100), ev(Op::FreeRequested, 1), ev(Op::Alloc, 2, 60), ev(Op::FreeCompleted, 1),
                     ev(Op::Free, 2)};
  EXPECT_EQ(summarize(deferred).peak_requested, 160u);
  EXPECT_EQ(summarize(deferred).frees, 2u);

  Trace immediate;
  immediate.events = {ev(Op::Alloc, 1, 100), ev(Op::Free, 1), ev(Op::Alloc, 2, 60), ev(Op::Free, 2)};
  EXPECT_EQ(summarize(immediate).peak_requested, 100u);
}

TEST(TraceSummary, InitialAllocationsAloneCanBeThePeak) {
  Trace t;
  t.initial.allocations = {{1, 0, 900, 0, 0, false}, {2, 1024, 100, 0, 0, true}};
  t.events = {ev(Op::Free, 1), ev(Op::Alloc, 3, 500), ev(Op::FreeCompleted, 2)};
  TraceSummary s = summarize(t);
  EXPECT_EQ(s.peak_requested, 1000u);
  EXPECT_EQ(s.total_requested, 500u);
  EXPECT_EQ(s.max_request, 500u);
  EXPECT_EQ(s.streams, 1u);
}

TEST(TraceSummary, ToleratesAnInvalidTrace) {
  // Summaries may be asked before validation: bad frees change nothing, and nothing crashes.
  Trace t;
  t.events = {ev(Op::Free, 9), ev(Op::Alloc, 1, 10), ev(Op::Alloc, 1, 20), ev(Op::Free, 1), ev(Op::Free, 1)};
  TraceSummary s = summarize(t);
  EXPECT_EQ(s.peak_requested, 10u);
  EXPECT_EQ(s.frees, 3u);
}

// ---- validate_trace
// ------------------------------------------------------------------------------

std::string violation(const Trace& t) {
  try {
    validate_trace(t, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(valid)";
}

Trace with_events(std::vector<Event> events) {
  Trace t;
  t.events = std::move(events);
  return t;
}

TEST(ValidateTrace, AcceptsAValidTrace) {
  Trace t;
  t.initial.allocations = {{7, 0, 64, 0, 0, true}};
  t.initial.segments = {{0, 2 * MiB, 0, true, false}};
  Event m;
  m.op = Op::Mark;
  m.id = t.intern("step");
  m.size = t.intern("1");
  Event tagged = ev(Op::Alloc, 1, 10);
  tagged.tag = t.intern("act");
  t.events = {m,
              tagged,
              ev(Op::FreeRequested, 1),
              ev(Op::FreeCompleted, 1),
              ev(Op::Alloc, 1, 10),
              ev(Op::Free, 1),
              ev(Op::FreeCompleted, 7),
              ev(Op::Alloc, 7, 1),
              ev(Op::EmptyCache, 0),
              ev(Op::SegmentFree, 0, 2 * MiB),
              ev(Op::Oom, 0, 1)};
  EXPECT_EQ(violation(t), "(valid)");
}

TEST(ValidateTrace, NamesTheEventAndWhatWasExpected) {
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 8), ev(Op::Alloc, 1, 8)})),
            "t.jsonl: event 1 (alloc): id 1: alloc of an id that is already live (duplicate live "
            "id)");
  EXPECT_EQ(violation(with_events({ev(Op::Free, 3)})),
            "t.jsonl: event 0 (free): id 3: free of an id that is not live (unknown id or double "
            "free)");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 8), ev(Op::Free, 1), ev(Op::Free, 1)})),
            "t.jsonl: event 2 (free): id 1: free of an id that is not live (unknown id or double "
            "free)");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 8), ev(Op::FreeRequested, 1), ev(Op::FreeRequested, 1)})),
            "t.jsonl: event 2 (free_requested): id 1: free_requested twice for the same "
            "allocation");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 8), ev(Op::FreeCompleted, 1)})),
            "t.jsonl: event 1 (free_completed): id 1: free_completed of an allocation whose free "
            "was never requested");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 8), ev(Op::FreeRequested, 1), ev(Op::Free, 1)})),
            "t.jsonl: event 2 (free): id 1: free of an id whose free was already requested "
            "(expected free_completed)");
  EXPECT_EQ(violation(with_events({ev(Op::FreeRequested, 4)})),
            "t.jsonl: event 0 (free_requested): id 4: free_requested of an id that is not live "
            "(unknown id or double free)");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, 0)})),
            "t.jsonl: event 0 (alloc): size 0 (expected a positive size)");
  EXPECT_EQ(violation(with_events({ev(Op::Alloc, 1, Bytes{1} << 60)})),
            "t.jsonl: event 0 (alloc): impossible size 1152921504606846976 (expected < 2^60)");
  EXPECT_EQ(violation(with_events({ev(Op::SegmentMap, 0, ~Bytes{0})})),
            "t.jsonl: event 0 (segment_map): impossible size 18446744073709551615 (expected < "
            "2^60)");
}

TEST(ValidateTrace, InitialAllocationsTakePartInTheLifetimeRules) {
  Trace t;
  t.initial.allocations = {{5, 0, 8, 0, 0, false}, {6, 8, 8, 0, 0, true}};
  t.events = {ev(Op::Alloc, 5, 8)};
  EXPECT_EQ(violation(t),
            "t.jsonl: event 0 (alloc): id 5: alloc of an id that is already live (duplicate live "
            "id)");
  t.events = {ev(Op::Free, 6)};
  EXPECT_EQ(violation(t),
            "t.jsonl: event 0 (free): id 6: free of an id whose free was already requested "
            "(expected free_completed)");
  t.events = {ev(Op::FreeCompleted, 5)};
  EXPECT_EQ(violation(t),
            "t.jsonl: event 0 (free_completed): id 5: free_completed of an allocation whose free "
            "was never requested");
  t.events = {ev(Op::FreeCompleted, 6), ev(Op::Free, 5)};
  EXPECT_EQ(violation(t), "(valid)");

  t.initial.allocations = {{5, 0, 8, 0, 0, false}, {5, 8, 8, 0, 0, false}};
  t.events.clear();
  EXPECT_EQ(violation(t), "t.jsonl: initial allocation 1: id 5 is already live (expected unique ids)");
  t.initial.allocations = {{5, 0, 0, 0, 0, false}};
  EXPECT_EQ(violation(t), "t.jsonl: initial allocation 0 (id 5): impossible size 0 (expected 1 .. 2^60-1)");
}

TEST(ValidateTrace, StringIndicesMustExist) {
  Trace t;
  Event m;
  m.op = Op::Mark;
  m.id = t.intern("step");
  m.size = 7;  // no such string
  t.events = {m};
  EXPECT_EQ(violation(t), "t.jsonl: event 0 (mark): value string index 7 out of range (the trace has 1 strings)");
  Event a = ev(Op::Alloc, 1, 8);
  a.tag = 3;
  t.events = {a};
  EXPECT_EQ(violation(t), "t.jsonl: event 0 (alloc): tag string index 3 out of range (the trace has 1 strings)");
}

// ---- LiveAllocations
// -----------------------------------------------------------------------------

TEST(LiveAllocations, AgreesWithAReferenceMapUnderRandomChurn) {
  // Random allocs and frees over a small id space collide often, which exercises probing runs,
  // backward-shift deletion and growth.
  detail::LiveAllocations live;
  std::unordered_map<AllocId, Bytes> reference;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200000; ++step) {
    // Ids on a 512-byte grid, like addresses, plus a dense range: both common in real traces.
    AllocId id = rng() % 2 ? (rng() % 3000) * 512 : rng() % 3000;
    if (rng() % 2) {
      const char* what = live.apply(Op::Alloc, id, id + 1);
      EXPECT_EQ(what == nullptr, reference.emplace(id, id + 1).second);
    } else {
      const char* what = live.apply(Op::Free, id, 0);
      EXPECT_EQ(what == nullptr, reference.erase(id) == 1);
    }
    ASSERT_EQ(live.size(), reference.size());
  }
  for (const auto& [id, size] : reference) EXPECT_EQ(live.requested(id), size);
  EXPECT_EQ(live.requested(0xdeadbeef), 0u);
}

}  // namespace
}  // namespace fraglab
