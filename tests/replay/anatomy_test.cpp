// The fragmentation anatomy (fraglab/anatomy.hpp, README "Fragmentation anatomy"): every part of
// the pytorch policy's anatomy derived by hand from docs/allocator-model.md on a small trace, and
// for every policy on every shipped and real trace, parts that add up to reserved − requested.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "fraglab/anatomy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/timeline.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/types.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
const fs::path kSamples = fs::path(FRAGLAB_SOURCE_DIR) / "traces/samples";
const fs::path kReal = fs::path(FRAGLAB_SOURCE_DIR) / "../shared/traces/real";

ReplayResult with_anatomy(const Trace& trace, const std::string& spec) {
  ReplayObservers observers;
  observers.anatomy = true;
  return run_replay(trace, spec, parse_device_spec("sim:40GiB"), {}, observers);
}

// traces/samples/anatomy.jsonl under pytorch with max_split_size_mb:40 (allocator-model §1, §2, §3.2,
// §4.1; 0-based events):
//  0 alloc 1000 B, stream 0: rounded to 1024 (§1.2), small pool, a new 2 MiB segment split: 1024
//    handed out, 2 MiB − 1024 = 2,096,128 free;
//  1 alloc 50 MiB, stream 0: a 50 MiB segment (≥ 10 MiB: rounded to 2 MiB), taken whole;
//  2 free of it: a free 50 MiB large-pool block, ≥ max_split_size (40 MiB);
//  3 alloc 5,242,881 B on stream 7: rounded to 5,243,392, a new 20 MiB segment split, leaving
//    20,971,520 − 5,243,392 = 15,728,128 free on stream 7;
//  4 free_requested of the 1000 B block: pending, neither allocated nor free;
//  5 alloc 3 MiB, stream 0: below max_split_size, so the 50 MiB block is off limits (§3.2 rule 4);
//    a new 20 MiB segment, split: 3,145,728 handed out, 17,825,792 free. Reserved peaks here:
//    2 + 50 + 20 + 20 MiB = 96,468,992 B.
// At event 5 the latest request is on stream 0:
//  requested = 1000 (pending, still counted) + 5,242,881 + 3,145,728 = 8,389,609;
//  rounding = (1024 − 1000) + (5,243,392 − 5,242,881) + 0 = 24 + 511 = 535;
//  small_pool = 2,096,128 (stream 0's small segment; the pending 1024 B are not free);
//  oversize_locked = 52,428,800; stream_bound = 15,728,128 (stream 7); usable = 17,825,792;
//  other = 0: 535 + 2,096,128 + 52,428,800 + 15,728,128 + 17,825,792 = 88,079,383 = reserved − requested.
TEST(Anatomy, EveryPartOfThePytorchPeakDerivedByHand) {
  const Trace trace = read_trace((kSamples / "anatomy.jsonl").string());
  const ReplayResult r = with_anatomy(trace, "pytorch:max_split_size_mb:40");
  ASSERT_TRUE(r.anatomy_at_peak.has_value());
  const Anatomy& a = *r.anatomy_at_peak;
  EXPECT_EQ(a.event, 5);
  EXPECT_EQ(r.metrics.peak_reserved_event, 5);
  EXPECT_EQ(a.reserved, 96468992u);
  EXPECT_EQ(a.requested, 8389609u);
  EXPECT_EQ(a.rounding, 535u);
  EXPECT_EQ(a.small_pool, 2096128u);
  EXPECT_EQ(a.oversize_locked, 52428800u);
  EXPECT_EQ(a.stream_bound, 15728128u);
  EXPECT_EQ(a.cached_free_usable, 17825792u);
  EXPECT_EQ(a.other, 0);
  EXPECT_EQ(a.sum_of_parts(), 88079383);
  EXPECT_EQ(a.gap(), 88079383);
}

// The same trace at the default max_split_size (unlimited): event 5's 3 MiB request splits the free
// 50 MiB block instead of reserving (§3.1), so reserved peaks at event 3 (2 + 50 + 20 MiB =
// 75,497,472), whose request is on stream 7. Then everything of stream 0 is stream-bound: the
// small segment's 2,096,128 free bytes and the 50 MiB block; stream 7's 15,728,128 are usable.
// The 1000 B block is still live: rounding = 24 + 511 = 535; requested = 1000 + 5,242,881.
TEST(Anatomy, StreamBoundIsRelativeToTheLatestRequestsStream) {
  const Trace trace = read_trace((kSamples / "anatomy.jsonl").string());
  const ReplayResult r = with_anatomy(trace, "pytorch");
  ASSERT_TRUE(r.anatomy_at_peak.has_value());
  const Anatomy& a = *r.anatomy_at_peak;
  EXPECT_EQ(a.event, 3);
  EXPECT_EQ(a.reserved, 75497472u);
  EXPECT_EQ(a.requested, 5243881u);
  EXPECT_EQ(a.rounding, 535u);
  EXPECT_EQ(a.stream_bound, 2096128u + 52428800u);
  EXPECT_EQ(a.cached_free_usable, 15728128u);
  EXPECT_EQ(a.small_pool, 0u);
  EXPECT_EQ(a.oversize_locked, 0u);
  EXPECT_EQ(a.other, 0);
}

// cuda_async (the model in policies/cuda_async/cuda_async.cpp; 2 MiB pages): 1 MiB on stream 0
// maps the first page, its plain free leaves it pending on stream 0 until a synchronisation; a
// 2 MiB request on stream 5 may not reuse it, so the pool grows at the top, starting in the free
// (shared) run touching it: [1 MiB, 3 MiB) — a second page mapped, reserved 4 MiB. Free: the
// first 1 MiB, stream 0's (stream-bound for stream 5), and [3 MiB, 4 MiB) of the new page, usable.
TEST(Anatomy, CudaAsyncPendingFreesOfAnotherStreamAreStreamBound) {
  const Trace trace = parse_jsonl(
      "{\"fraglab_trace\":1,\"name\":\"async\"}\n"
      "{\"op\":\"alloc\",\"id\":1,\"size\":1048576}\n"
      "{\"op\":\"free\",\"id\":1}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":2097152,\"stream\":5}\n",
      "async");
  const ReplayResult r = with_anatomy(trace, "cuda_async");
  ASSERT_TRUE(r.anatomy_at_peak.has_value());
  const Anatomy& a = *r.anatomy_at_peak;
  EXPECT_EQ(a.event, 2);
  EXPECT_EQ(a.reserved, 4 * MiB);
  EXPECT_EQ(a.requested, 2 * MiB);
  EXPECT_EQ(a.rounding, 0u);
  EXPECT_EQ(a.stream_bound, 1 * MiB);
  EXPECT_EQ(a.cached_free_usable, 1 * MiB);
  EXPECT_EQ(a.other, 0);
}

// gmlake keeps PyTorch's small pool (policies/gmlake/allocator.cpp): each 1000 B request rounds to
// 1024 (allocator-model §1.2) and gets a 2 MiB small segment of its own stream (§2). At the peak
// (event 1, stream 3) stream 0's free 2,096,128 B are stream-bound, stream 3's are small-pool.
TEST(Anatomy, GmlakeSmallPoolPerStream) {
  const Trace trace = parse_jsonl(
      "{\"fraglab_trace\":1,\"name\":\"small\"}\n"
      "{\"op\":\"alloc\",\"id\":1,\"size\":1000}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":1000,\"stream\":3}\n",
      "small");
  const ReplayResult r = with_anatomy(trace, "gmlake");
  ASSERT_TRUE(r.anatomy_at_peak.has_value());
  const Anatomy& a = *r.anatomy_at_peak;
  EXPECT_EQ(a.event, 1);
  EXPECT_EQ(a.reserved, 4 * MiB);
  EXPECT_EQ(a.rounding, 48u);
  EXPECT_EQ(a.stream_bound, 2096128u);
  EXPECT_EQ(a.small_pool, 2096128u);
  EXPECT_EQ(a.cached_free_usable, 0u);
  EXPECT_EQ(a.other, 0);
}

// At the start nothing has been requested: the anatomy of an empty device is all zero, at event -1.
TEST(Anatomy, ATraceThatNeverReservesHasItsPeakAtTheStart) {
  Trace trace;
  trace.name = "empty";
  const ReplayResult r = with_anatomy(trace, "pytorch");
  ASSERT_TRUE(r.anatomy_at_peak.has_value());
  EXPECT_EQ(r.anatomy_at_peak->event, -1);
  EXPECT_EQ(r.anatomy_at_peak->reserved, 0u);
  EXPECT_EQ(r.anatomy_at_peak->sum_of_parts(), 0);
}

TEST(Anatomy, OnlyWhenAskedFor) {
  const Trace trace = read_trace((kSamples / "anatomy.jsonl").string());
  EXPECT_FALSE(run_replay(trace, "pytorch", parse_device_spec("sim:40GiB")).anatomy_at_peak.has_value());
}

// Every registered policy (and pytorch's expandable segments and max_split_size) on a trace: the
// parts add up to reserved − requested, `other` is never negative, the anatomy is taken at
// Metrics::peak_reserved_event, and a second replay that looks only at that event (what run_replay
// falls back to past its budget) finds the same.
// Returns how many runs it checked (a policy that needs tags skips an untagged trace).
size_t expect_exact_sums(const Trace& trace, const std::string& what) {
  size_t checked = 0;
  std::vector<std::string> specs = {"pytorch:expandable_segments:True", "pytorch:max_split_size_mb:40"};
  for (const PolicyInfo* info : PolicyRegistry::instance().all()) {
    if (info->name.rfind("test-", 0) != 0) specs.push_back(info->name);  // not this binary's broken ones
  }
  for (const std::string& spec : specs) {
    ReplayResult r;
    try {
      r = with_anatomy(trace, spec);
    } catch (const InputError&) {
      continue;  // a policy that needs tags, on an untagged trace
    }
    if (!r.anatomy_at_peak) {
      ADD_FAILURE() << "no anatomy: " << what << ' ' << spec;
      continue;
    }
    const Anatomy& a = *r.anatomy_at_peak;
    EXPECT_EQ(a.sum_of_parts(), a.gap()) << what << ' ' << spec;
    EXPECT_GE(a.other, 0) << what << ' ' << spec;
    EXPECT_EQ(a.event, r.metrics.peak_reserved_event) << what << ' ' << spec;

    PolicyOnDevice again(spec, parse_device_spec("sim:40GiB"));
    AnatomyAtEvent at_peak(again.device(), r.metrics.peak_reserved_event);
    ReplayObservers observers;
    observers.extra.push_back(&at_peak);
    again.run(trace, {}, observers);
    if (!at_peak.anatomy()) {
      ADD_FAILURE() << "no anatomy in the second replay: " << what << ' ' << spec;
      continue;
    }
    EXPECT_EQ(at_peak.anatomy()->rounding, a.rounding) << what << ' ' << spec;
    EXPECT_EQ(at_peak.anatomy()->cached_free_usable, a.cached_free_usable) << what << ' ' << spec;
    EXPECT_EQ(at_peak.anatomy()->stream_bound, a.stream_bound) << what << ' ' << spec;
    EXPECT_EQ(at_peak.anatomy()->other, a.other) << what << ' ' << spec;
    ++checked;
  }
  return checked;
}

TEST(Anatomy, PartsAddUpForEveryPolicyOnEveryShippedSample) {
  size_t files = 0, runs = 0;
  for (const auto& entry : fs::directory_iterator(kSamples)) {
    if (entry.path().extension() != ".jsonl") continue;
    runs += expect_exact_sums(read_trace(entry.path().string()), entry.path().filename().string());
    ++files;
  }
  // Nine policies and two pytorch variants; gemini alone may skip an untagged trace.
  EXPECT_GE(files, 6u);
  EXPECT_GE(runs, 10 * files);
}

TEST(Anatomy, PartsAddUpForEveryPolicyOnTheRealSnapshots) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  size_t files = 0, runs = 0;
  for (const auto& entry : fs::directory_iterator(kReal)) {
    if (entry.path().extension() != ".pickle") continue;
    runs += expect_exact_sums(read_trace(entry.path().string()), entry.path().filename().string());
    ++files;
  }
  EXPECT_GE(files, 6u);
  EXPECT_GE(runs, 10 * files);
}

// The timeline's anatomy columns add up, row by row, to reserved − requested.
TEST(Anatomy, TimelineColumnsAddUpOnEveryRow) {
  const Trace trace = read_trace((kSamples / "streams.jsonl").string());
  std::ostringstream csv;
  TimelineWriter::write_header(csv, true);
  TimelineWriter writer(csv, "pytorch", 1, true);
  ReplayObservers observers;
  observers.timeline = &writer;
  run_replay(trace, "pytorch", parse_device_spec("sim:40GiB"), {}, observers);
  std::istringstream lines(csv.str());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(
      line,
      "policy,event,op,requested_bytes,allocated_bytes,reserved_bytes,step,device_time_s,stall_time_s,rounding_bytes,"
      "cached_free_usable_bytes,stream_bound_bytes,oversize_locked_bytes,small_pool_bytes,other_bytes,host_resident_"
      "bytes");
  size_t rows = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::stringstream split(line);
    std::string cell;
    while (std::getline(split, cell, ',')) cells.push_back(cell);
    if (line.back() == ',') cells.emplace_back();
    ASSERT_EQ(cells.size(), 16u) << line;
    const std::int64_t requested = std::stoll(cells[3]);
    const std::int64_t reserved = std::stoll(cells[5]);
    std::int64_t parts = 0;
    for (size_t i = 9; i < 15; ++i) parts += std::stoll(cells[i]);  // after step and the two times
    EXPECT_EQ(parts, reserved - requested) << line;
    EXPECT_EQ(cells[15], "0") << line;  // pytorch keeps nothing on the host
    ++rows;
  }
  EXPECT_EQ(rows, trace.events.size());
}

}  // namespace
}  // namespace fraglab
