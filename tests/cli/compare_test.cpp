// fraglab compare and --check-invariants, end to end. Expected figures are derived by hand from
// a tiny trace whose every allocation is a multiple of 2 MiB (so no policy rounds it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace fraglab::testing {
namespace {

// 10 MiB and 20 MiB live together (30 MiB), then 20 MiB is freed and 6 MiB joins: the most ever
// live at once is 30 MiB, the lower bound.
const char* kTrace =
    "{\"fraglab_trace\":1,\"name\":\"tiny\"}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":10485760}\n"
    "{\"op\":\"alloc\",\"id\":2,\"size\":20971520}\n"
    "{\"op\":\"free\",\"id\":2}\n"
    "{\"op\":\"alloc\",\"id\":3,\"size\":6291456}\n"
    "{\"op\":\"free\",\"id\":1}\n"
    "{\"op\":\"free\",\"id\":3}\n";

fs::path tiny_trace() {
  const fs::path path = scratch_dir("compare") / "tiny.jsonl";
  write_text(path, kTrace);
  return path;
}

TEST(Compare, ListsTheLowerBoundAndOrdersRunsByPeakReserved) {
  const CommandResult r = run_fraglab("compare " + tiny_trace().string() + " -p pytorch -p nocache --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["lower_bound_bytes"].get<std::uint64_t>(), 30u << 20);
  ASSERT_EQ(j["runs"].size(), 2u);
  // nocache reserves exactly what is live: 30 MiB at the peak, overhead 0.
  EXPECT_EQ(j["runs"][0]["policy"], "nocache");
  EXPECT_EQ(j["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>(), 30u << 20);
  EXPECT_DOUBLE_EQ(j["runs"][0]["overhead_over_lower_bound"].get<double>(), 0.0);
  // pytorch (allocator-model §3-4): 10 MiB is not below kMinLargeAlloc, so it gets a 10 MiB segment; 20 MiB
  // gets its own 20 MiB segment, cached when freed; the 6 MiB request best-fits that cached block
  // and splits it (the 14 MiB rest exceeds 1 MiB). No third segment: peak 30 MiB as well, and the
  // tie is broken by name, "nocache" < "pytorch".
  EXPECT_EQ(j["runs"][1]["policy"], "pytorch");
  EXPECT_EQ(j["runs"][1]["peak_reserved_bytes"].get<std::uint64_t>(), 30u << 20);
}

TEST(Compare, TableHasTheBoundRowAndTheDefaultSetIncludesExpandableSegments) {
  const CommandResult r = run_fraglab("compare " + tiny_trace().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("lower_bound (peak requested)         30.00 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pytorch:expandable_segments:True"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("time_s"), std::string::npos);
  // The trace has no tags: a policy that packs tagged tensors is left out, with the reason.
  EXPECT_NE(r.out.find("gemini: left out"), std::string::npos) << r.out;
  const CommandResult again = run_fraglab("compare " + tiny_trace().string());
  EXPECT_EQ(r.out, again.out);
}

// Like replay, compare shows wall-clock figures only with --timing; --no-timing (once needed for
// byte-identical output) is still accepted and changes nothing.
TEST(Compare, TimingIsOffUnlessAsked) {
  const std::string base = "compare " + tiny_trace().string() + " -p nocache -p pytorch";
  const CommandResult plain = run_fraglab(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("time_s"), std::string::npos) << plain.out;
  const CommandResult old_flag = run_fraglab(base + " --no-timing");
  ASSERT_EQ(old_flag.status, 0) << old_flag.err;
  EXPECT_EQ(old_flag.out, plain.out);

  const CommandResult timed = run_fraglab(base + " --timing");
  ASSERT_EQ(timed.status, 0) << timed.err;
  EXPECT_NE(timed.out.find("time_s"), std::string::npos) << timed.out;

  const auto json = nlohmann::json::parse(run_fraglab(base + " --json -").out);
  for (const auto& run : json["runs"]) EXPECT_FALSE(run.contains("replay_seconds")) << run["policy"];
  const auto timed_json = nlohmann::json::parse(run_fraglab(base + " --timing --json -").out);
  for (const auto& run : timed_json["runs"]) EXPECT_TRUE(run.contains("replay_seconds")) << run["policy"];
  // replay agrees: nothing timed by default, timed with --timing.
  EXPECT_EQ(run_fraglab("replay " + tiny_trace().string() + " -p nocache").out.find("Mevents/s"), std::string::npos);
  EXPECT_NE(run_fraglab("replay " + tiny_trace().string() + " -p nocache --timing").out.find("Mevents/s"),
            std::string::npos);
}

TEST(Compare, BadSpecIsAnInputError) {
  const CommandResult r = run_fraglab("compare " + tiny_trace().string() + " -p nosuchpolicy");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nosuchpolicy"), std::string::npos) << r.err;
}

TEST(CheckInvariants, CleanRunsReportZeroViolationsInTheJson) {
  const CommandResult r =
      run_fraglab("replay " + tiny_trace().string() + " -p pytorch -p nocache --check-invariants --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& run : j["runs"]) EXPECT_EQ(run["invariant_violations"].get<int>(), 0) << run["policy"];
  const CommandResult plain = run_fraglab("replay " + tiny_trace().string() + " -p nocache --json -");
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["runs"][0].contains("invariant_violations"));
}

}  // namespace
}  // namespace fraglab::testing
