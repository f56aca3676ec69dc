// The pytorch policy's decision bounds (Policy::coverage) on hand-made traces, where which settings
// make the same decisions is worked out by hand from docs/allocator-model.md; each "not covered"
// below is a setting whose replay really differs, and each such difference is checked by replaying.
#include <gtest/gtest.h>

#include "fraglab/device_spec.hpp"
#include "fraglab/run_replay.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

using test::alloc;
using test::with_op;

constexpr Bytes kMiB = Bytes{1} << 20;

Trace hand_trace(std::vector<Event> events) {
  Trace t;
  t.name = "hand";
  t.events = std::move(events);
  validate_trace(t, "hand");
  return t;
}

// The coverage of one replay of `spec`, recorded from the start.
std::unique_ptr<SettingCoverage> coverage_of(const Trace& trace, const std::string& spec,
                                             const std::string& device = "sim") {
  PolicyOnDevice run(spec, parse_device_spec(device));
  run.policy().record_coverage();
  run.run(trace);
  return run.policy().coverage();
}

bool covers(const SettingCoverage& coverage, const std::string& spec) {
  const auto candidate = coverage.candidate(spec);
  return candidate != nullptr && coverage.covers(*candidate);
}

Metrics replay(const Trace& trace, const std::string& spec, const std::string& device = "sim") {
  return run_replay(trace, spec, parse_device_spec(device)).metrics;
}

// A 100 MiB block is cached, then a 30 MiB request comes. §3.2: a request below max_split_size
// may not take a block of max_split_size or more; one at or above it only a block below
// request + 20 MiB (§3.2 step 4). So the cached block serves it (split, §4.1) iff ms > 100 MiB;
// for any ms <= 100 MiB a new segment is allocated.
Trace cached_100_then_30() {
  return hand_trace({alloc(1, 100 * kMiB), with_op(Op::Free, 1), alloc(2, 30 * kMiB), with_op(Op::Free, 2)});
}

TEST(Coverage, MaxSplitSizeAboveEveryBlockIsTheDefault) {
  const Trace trace = cached_100_then_30();
  const auto c = coverage_of(trace, "pytorch");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, "pytorch"));
  EXPECT_TRUE(covers(*c, "pytorch:max_split_size_mb:101"));
  EXPECT_TRUE(covers(*c, "pytorch:max_split_size_mb:128"));
  EXPECT_TRUE(covers(*c, "pytorch:max_split_size_mb:4096"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:100"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:64"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:20"));
  // The refused ones really differ: one segment (reused) against two.
  EXPECT_EQ(replay(trace, "pytorch").num_device_alloc, 1u);
  EXPECT_EQ(replay(trace, "pytorch:max_split_size_mb:128").num_device_alloc, 1u);
  EXPECT_EQ(replay(trace, "pytorch:max_split_size_mb:100").num_device_alloc, 2u);
  EXPECT_EQ(replay(trace, "pytorch:max_split_size_mb:64").num_device_alloc, 2u);
}

TEST(Coverage, MaxSplitSizeBetweenTheTwoSizes) {
  // ms = 64 MiB: the 30 MiB request is normal and the 100 MiB block oversize: so for every
  // 30 MiB < ms <= 100 MiB.
  const Trace trace = cached_100_then_30();
  const auto c = coverage_of(trace, "pytorch:max_split_size_mb:64");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, "pytorch:max_split_size_mb:32"));
  EXPECT_TRUE(covers(*c, "pytorch:max_split_size_mb:100"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:101"));
  EXPECT_FALSE(covers(*c, "pytorch"));
  // Other options are not recorded: a different value is never covered.
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:64,expandable_segments:True"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:64,per_process_memory_fraction:0.5"));
  EXPECT_FALSE(covers(*c, "pytorch:max_split_size_mb:64,version:2.1"));
}

// Every request is 5 MiB. §1.2-§1.3: with N divisions a size above 512 * N rounds up to the next
// multiple of (its power-of-2 floor) / N: 4 MiB / 2 = 2 MiB steps -> 6 MiB; 1 MiB steps (N = 4)
// or 512 KiB (N = 8) leave 5 MiB; N <= 1 means no power-of-2 rounding (512-byte multiples).
TEST(Coverage, RoundingRulesThatRoundEveryRequestAlike) {
  const Trace trace = hand_trace({alloc(1, 5 * kMiB), alloc(2, 5 * kMiB), with_op(Op::Free, 1), with_op(Op::Free, 2)});
  const auto c = coverage_of(trace, "pytorch");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, "pytorch:roundup_power2_divisions:1"));
  EXPECT_TRUE(covers(*c, "pytorch:roundup_power2_divisions:4"));
  EXPECT_TRUE(covers(*c, "pytorch:roundup_power2_divisions:8"));
  EXPECT_FALSE(covers(*c, "pytorch:roundup_power2_divisions:2"));
  EXPECT_EQ(replay(trace, "pytorch").peak_allocated, 10 * kMiB);
  EXPECT_EQ(replay(trace, "pytorch:roundup_power2_divisions:8").peak_allocated, 10 * kMiB);
  EXPECT_EQ(replay(trace, "pytorch:roundup_power2_divisions:2").peak_allocated, 12 * kMiB);
}

// A fraction of 0.5 of 1000 MiB allows 500 MiB. A 200 MiB block is cached when a 250 MiB request
// misses: garbage collection (§3.3) runs iff reserved (200 MiB) > threshold x 500 MiB, i.e. for
// thresholds below 0.4, and then frees that block (the only one, as old as the average), so the
// peak is 250 MiB instead of 450 MiB. Without a fraction it never runs.
Trace cached_200_then_250() {
  return hand_trace({alloc(1, 200 * kMiB), with_op(Op::Free, 1), alloc(2, 250 * kMiB), with_op(Op::Free, 2)});
}
const std::string kHalf = "pytorch:per_process_memory_fraction:0.5";
const std::string kDevice = "sim:1000MiB";

TEST(Coverage, GarbageCollectionThresholdNeverReached) {
  const Trace trace = cached_200_then_250();
  const auto c = coverage_of(trace, kHalf + ",garbage_collection_threshold:0.8", kDevice);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.41"));
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.95"));
  EXPECT_TRUE(covers(*c, kHalf));  // no collection at all: none ever acted
  EXPECT_FALSE(covers(*c, kHalf + ",garbage_collection_threshold:0.39"));
  EXPECT_FALSE(covers(*c, kHalf + ",garbage_collection_threshold:0.1"));
  EXPECT_EQ(replay(trace, kHalf + ",garbage_collection_threshold:0.8", kDevice).peak_reserved, 450 * kMiB);
  EXPECT_EQ(replay(trace, kHalf + ",garbage_collection_threshold:0.39", kDevice).peak_reserved, 250 * kMiB);

  // From a run without collection: the same answer.
  const auto off = coverage_of(trace, kHalf, kDevice);
  ASSERT_NE(off, nullptr);
  EXPECT_TRUE(covers(*off, kHalf + ",garbage_collection_threshold:0.41"));
  EXPECT_FALSE(covers(*off, kHalf + ",garbage_collection_threshold:0.39"));
}

TEST(Coverage, GarbageCollectionThatActed) {
  const Trace trace = cached_200_then_250();
  const auto c = coverage_of(trace, kHalf + ",garbage_collection_threshold:0.3", kDevice);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.1"));
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.39"));
  EXPECT_FALSE(covers(*c, kHalf + ",garbage_collection_threshold:0.41"));
  EXPECT_FALSE(covers(*c, kHalf));  // without collection the block stays
  EXPECT_EQ(replay(trace, kHalf, kDevice).peak_reserved, 450 * kMiB);
}

// The only cached block is the 50 MiB rest of a segment whose other part is in use: garbage
// collection frees whole segments only (§3.3), so when the 250 MiB request misses, no threshold
// (and no collection at all) frees anything: every setting of the threshold decides the same.
TEST(Coverage, GarbageCollectionWithNothingToFree) {
  const Trace trace = hand_trace({alloc(1, 150 * kMiB), with_op(Op::Free, 1), alloc(2, 100 * kMiB),
                                  alloc(3, 250 * kMiB), with_op(Op::Free, 3), with_op(Op::Free, 2)});
  const auto c = coverage_of(trace, kHalf + ",garbage_collection_threshold:0.1", kDevice);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, kHalf));
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.5"));
  EXPECT_TRUE(covers(*c, kHalf + ",garbage_collection_threshold:0.9"));
  EXPECT_EQ(replay(trace, kHalf + ",garbage_collection_threshold:0.1", kDevice).peak_reserved, 400 * kMiB);
  EXPECT_EQ(replay(trace, kHalf, kDevice).peak_reserved, 400 * kMiB);
}

TEST(Coverage, WithoutAMemoryFractionTheThresholdChangesNothing) {
  const Trace trace = cached_200_then_250();
  const auto c = coverage_of(trace, "pytorch", kDevice);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(covers(*c, "pytorch:garbage_collection_threshold:0.1"));
  EXPECT_TRUE(covers(*c, "pytorch:garbage_collection_threshold:0.99"));
  EXPECT_EQ(replay(trace, "pytorch:garbage_collection_threshold:0.1", kDevice).peak_reserved, 450 * kMiB);
}

TEST(Coverage, OnlyWhenRecordedAndOnlyItsOwnPolicy) {
  const Trace trace = cached_100_then_30();
  PolicyOnDevice unrecorded("pytorch", parse_device_spec("sim"));
  unrecorded.run(trace);
  EXPECT_EQ(unrecorded.policy().coverage(), nullptr);  // it did not keep the request sizes

  const auto c = coverage_of(trace, "pytorch");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->candidate("nocache"), nullptr);
  EXPECT_EQ(c->candidate("pytorch:max_split_size_mb:banana"), nullptr);  // its replay reports it
  // Policies without decision bounds cover nothing.
  PolicyOnDevice other("bestfit", parse_device_spec("sim"));
  other.policy().record_coverage();
  other.run(trace);
  EXPECT_EQ(other.policy().coverage(), nullptr);
}

}  // namespace
}  // namespace fraglab
