// fraglab validate: hand-built recorded runs whose outcome is derived from allocator-model, and the
// real snapshots of ../shared/traces/real (skipped where that folder is absent).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "fraglab/trace_io.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"
#include "support/events.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

using test::alloc_at;
using test::oom;
using test::segment;
using test::with_op;

constexpr Addr A = 0x7f1000000000ull;
constexpr Addr B = 0x7f3000000000ull;

Trace recorded(std::vector<Event> events) { return test::recorded_run(std::move(events)); }

// A 512-byte request lives in a 2 MiB small-pool segment (§1.5). Once freed, that segment is one
// free block, so a second 512-byte request would reuse it (§3.1). The record shows the segment
// freed and a new one allocated instead: only an empty_cache() between them explains that.
TEST(Validate, InfersEmptyCacheFromAnUnexplainedBurst) {
  const Trace t =
      recorded({segment(Op::SegmentAlloc, A, 2 * MiB), alloc_at(1, 512, A), with_op(Op::Free, 1),
                segment(Op::SegmentFree, A, 2 * MiB), segment(Op::SegmentAlloc, B, 2 * MiB), alloc_at(2, 512, B)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.empty_cache_inferred, 1u);
  EXPECT_EQ(r.retries_simulated, 0u);
  EXPECT_EQ(r.segment_events_recorded, 3u);
  EXPECT_EQ(r.segment_events_matched, 3u);
  EXPECT_EQ(r.alloc_addresses_matched, 2u);
}

// 5 MiB -> large pool, a 20 MiB segment split at 5 MiB (§1.6); the free merges it back into one
// free 20 MiB block. 30 MiB -> a 30 MiB segment (§1.5) and the cached 20 MiB block is too small:
// a miss. With 30 MiB obtainable (the recorded peak) cudaMalloc(30 MiB) fails while 20 MiB are
// held, so release_cached_blocks frees the cached segment and the retry succeeds (§5, rung d).
TEST(Validate, ReproducesARetryFromTheRecordedPeak) {
  const Trace t = recorded({segment(Op::SegmentAlloc, A, 20 * MiB), alloc_at(1, 5 * MiB, A), with_op(Op::Free, 1),
                            segment(Op::SegmentFree, A, 20 * MiB), segment(Op::SegmentAlloc, B, 30 * MiB),
                            alloc_at(2, 30 * MiB, B)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.available_bytes, 30 * MiB);
  EXPECT_EQ(r.retries_simulated, 1u);
  EXPECT_EQ(r.empty_cache_inferred, 0u);
  EXPECT_EQ(r.peak_reserved_recorded, 30 * MiB);
  EXPECT_EQ(r.peak_reserved_simulated, 30 * MiB);
}

// Block 1 (20 MiB, a whole 20 MiB segment, no split: §1.6) is pending (used on another stream)
// when request 2 comes: the lookup misses, cudaMalloc fails with 20 of 20 MiB obtainable held,
// and release_cached_blocks first synchronises (emitting block 1's free_completed), then frees
// the now whole segment A, and the retry gets B (§5.3, §6). In the record the completion stands
// before the burst; replayed there it would let request 2 reuse A.
TEST(Validate, CompletionsEmittedByARetryAreReplayedAfterTheLookup) {
  const Trace t =
      recorded({segment(Op::SegmentAlloc, A, 20 * MiB), alloc_at(1, 20 * MiB, A), with_op(Op::FreeRequested, 1),
                with_op(Op::FreeCompleted, 1), segment(Op::SegmentFree, A, 20 * MiB),
                segment(Op::SegmentAlloc, B, 20 * MiB), alloc_at(2, 20 * MiB, B)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.retries_simulated, 1u);
  EXPECT_EQ(r.empty_cache_inferred, 0u);
  EXPECT_EQ(r.alloc_addresses_matched, 2u);
}

// The oom entry says 10 MiB were free while 20 MiB were reserved: 30 MiB obtainable. A 40 MiB
// request misses, cudaMalloc fails, release_cached_blocks frees nothing (the only segment holds
// a live block), the retry fails: OOM, after one retry.
TEST(Validate, ReplaysAnOomEntryAsAFailingRequest) {
  const Trace t = recorded({segment(Op::SegmentAlloc, A, 20 * MiB), alloc_at(1, 5 * MiB, A), oom(40 * MiB, 10 * MiB)});
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.available_bytes, 30 * MiB);
  EXPECT_EQ(r.ooms_recorded, 1u);
  EXPECT_EQ(r.ooms_simulated, 1u);
  EXPECT_EQ(r.retries_simulated, 1u);
}

// The second 5 MiB request is carved from the low end of the free 15 MiB remainder (§4.2), at
// A + 5 MiB; a record that says A + 6 MiB cannot come from PyTorch and must be reported.
TEST(Validate, ReportsTheFirstDivergence) {
  const Trace t = recorded({segment(Op::SegmentAlloc, A, 20 * MiB), alloc_at(1, 5 * MiB, A),
                            alloc_at(2, 5 * MiB, A + 6 * MiB), with_op(Op::Free, 2), with_op(Op::Free, 1)});
  const ValidationReport r = validate_replay(t);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.allocs_recorded, 2u);
  EXPECT_EQ(r.alloc_addresses_matched, 1u);
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.first_divergence->category, "alloc_address");
  EXPECT_EQ(r.first_divergence->event_index, 2u);
  EXPECT_EQ(r.first_divergence->recorded, "0x7f1000600000");
  EXPECT_EQ(r.first_divergence->simulated, "0x7f1000500000");
  const auto j = validation_json(r);
  EXPECT_EQ(j["exact"], false);
  EXPECT_EQ(j["first_divergence"]["event_index"], 2);
}

TEST(Validate, StateOnlySnapshotChecksTheRebuiltState) {
  Trace t = recorded({});
  t.initial.segments = {{A, 2 * MiB, 0, true, false}, {B, 20 * MiB, 0, false, false}};
  t.initial.allocations = {{1, B, 5 * MiB, 5 * MiB, 0, false}};
  const ValidationReport r = validate_replay(t);
  EXPECT_TRUE(r.exact) << validation_text(r);
  EXPECT_EQ(r.reserved_at_start, 22 * MiB);
  EXPECT_EQ(r.peak_reserved_simulated, 22 * MiB);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("state only"), std::string::npos);
}

// ---- real snapshots ----------------------------------------------------------------------------

const std::string kReal = FRAGLAB_REAL_TRACES;

struct RealFigures {
  std::uint64_t segment_events;  // segment allocs + frees, from the folder's README
  Bytes peak_reserved;
};

TEST(ValidateReal, EveryShippedSnapshotValidatesExactly) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  const std::map<std::string, RealFigures> figures = {
      {"finetune-step-oldformat.pickle", {152, 6471811072ull}},
      {"gpt2medium-ctx128-train-cutoff.pickle", {0, 7235174400ull}},
      {"lm-forward-bf16-nosegments.pickle", {0, 861929472ull}},
      {"lm2.7b-ctx128-fullstep.pickle", {783, 61111009280ull}},
      {"lm2.7b-ctx512-forward-bf16.pickle", {638 + 597, 40514879488ull}},
      {"tiny-segments.pickle", {9, 3781165056ull}},
  };
  for (const auto& [file, expected] : figures) {
    const Trace trace = read_trace(kReal + "/" + file);
    const ValidationReport r = validate_replay(trace);
    EXPECT_TRUE(r.exact) << file << "\n" << validation_text(r);
    EXPECT_EQ(r.segment_events_recorded, expected.segment_events) << file;
    EXPECT_EQ(r.segment_events_matched, expected.segment_events) << file;
    EXPECT_EQ(r.alloc_addresses_matched, r.allocs_recorded) << file;
    EXPECT_GT(r.allocs_recorded, 0u) << file;
    EXPECT_EQ(r.peak_reserved_recorded, expected.peak_reserved) << file;
    EXPECT_EQ(r.peak_reserved_simulated, expected.peak_reserved) << file;
  }
}

// The same recording under settings it was not made with must not validate.
TEST(ValidateReal, OtherSettingsDiverge) {
  const std::string file = kReal + "/lm2.7b-ctx128-fullstep.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(file);
  const Trace trace = read_trace(file);
  for (const char* spec : {"pytorch:roundup_power2_divisions:4", "pytorch:max_split_size_mb:100"}) {
    ValidateOptions options;
    options.policy_spec = spec;
    const ValidationReport r = validate_replay(trace, options);
    EXPECT_FALSE(r.exact) << spec;
    ASSERT_TRUE(r.first_divergence.has_value()) << spec;
  }
}

}  // namespace
}  // namespace fraglab
