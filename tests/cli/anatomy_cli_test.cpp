// The fragmentation anatomy end to end: replay --json's anatomy_at_peak, compare --anatomy's table,
// replay --timeline-anatomy's columns. Figures derived by hand in tests/replay/anatomy_test.cpp
// (and README "Fragmentation anatomy") for traces/samples/anatomy.jsonl.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "support/command.hpp"

namespace fraglab::testing {
namespace {

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/anatomy.jsonl";

TEST(AnatomyCli, ReplayJsonHasTheAnatomyAtThePeak) {
  const CommandResult r = run_fraglab("replay " + kSample + " -p pytorch:max_split_size_mb:40 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto a = nlohmann::json::parse(r.out)["runs"][0]["anatomy_at_peak"];
  EXPECT_EQ(a["event"].get<std::int64_t>(), 5);
  EXPECT_EQ(a["reserved_bytes"].get<std::uint64_t>(), 96468992u);
  EXPECT_EQ(a["requested_bytes"].get<std::uint64_t>(), 8389609u);
  EXPECT_EQ(a["rounding_bytes"].get<std::uint64_t>(), 535u);
  EXPECT_EQ(a["cached_free_usable_bytes"].get<std::uint64_t>(), 17825792u);
  EXPECT_EQ(a["stream_bound_bytes"].get<std::uint64_t>(), 15728128u);
  EXPECT_EQ(a["oversize_locked_bytes"].get<std::uint64_t>(), 52428800u);
  EXPECT_EQ(a["small_pool_bytes"].get<std::uint64_t>(), 2096128u);
  EXPECT_EQ(a["other_bytes"].get<std::int64_t>(), 0);
  EXPECT_EQ(a["host_resident_bytes"].get<std::uint64_t>(), 0u);  // pytorch keeps nothing on the host
  EXPECT_EQ(a.size(), 10u) << a.dump();
}

TEST(AnatomyCli, CompareAnatomyPrintsEveryPart) {
  const CommandResult r = run_fraglab("compare " + kSample + " -p pytorch:max_split_size_mb:40 --anatomy");
  ASSERT_EQ(r.status, 0) << r.err;
  // 96,468,992 B = 92 MiB; 8,389,609 B = 8.00 MiB; 17,825,792 = 17 MiB; 15,728,128 = 15 MiB;
  // 52,428,800 = 50 MiB; 2,096,128 B = 1.999 MiB, shown with two decimals as 2.00 MiB. No
  // host_resident column: pytorch keeps nothing on the host.
  const std::string row =
      "pytorch:max_split_size_mb:40         5    92.00 MiB     8.00 MiB        535 B    17.00 MiB     15.00 MiB    "
      "50.00 MiB     2.00 MiB          0 B\n";
  EXPECT_NE(r.out.find(row), std::string::npos) << r.out;
  const CommandResult plain = run_fraglab("compare " + kSample + " -p pytorch:max_split_size_mb:40");
  EXPECT_EQ(plain.out.find("stream_bound"), std::string::npos) << plain.out;
}

TEST(AnatomyCli, TimelineAnatomyNeedsATimeline) {
  const CommandResult r = run_fraglab("replay " + kSample + " -p pytorch --timeline-anatomy");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "fraglab replay: error: --timeline-anatomy: expected --timeline FILE too\n");
}

// The row of event 7 (0-based): the 3 MiB block freed, with stream 7's block still live.
// Reserved is still 92 MiB; requested = 5,242,881; rounding 511; stream 0's free bytes are now
// 2 MiB (the small segment, whole again) + 50 MiB + 20 MiB, all of the latest request's stream
// (event 5, stream 0): small_pool 2,097,152, oversize 52,428,800, usable 20,971,520;
// stream-bound: stream 7's 15,728,128. Sum: 511 + 2,097,152 + 52,428,800 + 20,971,520 +
// 15,728,128 = 91,226,111 = 96,468,992 − 5,242,881.
TEST(AnatomyCli, TimelineAnatomyColumns) {
  const fs::path csv = scratch_dir("anatomy") / "timeline.csv";
  const CommandResult r = run_fraglab("replay " + kSample + " -p pytorch:max_split_size_mb:40 --timeline " +
                                      csv.string() + " --timeline-anatomy");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string text = read_text(csv);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "policy,event,op,requested_bytes,allocated_bytes,reserved_bytes,step,device_time_s,stall_time_s,rounding_"
            "bytes,cached_free_usable_"
            "bytes,stream_bound_bytes,oversize_locked_bytes,small_pool_bytes,other_bytes,host_resident_bytes");
  // The two time columns between step and the anatomy (device_time_s, stall_time_s).
  EXPECT_TRUE(std::regex_search(text, std::regex("\"pytorch:max_split_size_mb:40\",7,free,5242881,5243392,96468992,,"
                                                 "[0-9.e-]+,[0-9.e-]+,511,20971520,15728128,52428800,2097152,0,0\n")))
      << text;
}

}  // namespace
}  // namespace fraglab::testing
