// fraglab sweep shares replays between settings that make the same decisions, and --no-share
// replays each one: the results file and the printed summary are the same bytes either way; -v
// says how many runs were replayed.
#include <gtest/gtest.h>

#include <regex>

#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

TEST(SweepShareCli, NoShareGivesTheSameBytes) {
  const fs::path dir = testing::scratch_dir("sweep-share");
  // 2 traces x 48 settings; without a memory fraction the threshold never acts (allocator-model
  // §3.3), so at most a third of the runs need a replay of their own.
  const std::string args = "sweep " + kSamples + "two-phase.jsonl " + kSamples +
                           "streams.jsonl --grid max_split_size_mb=none,20,64,256 --grid "
                           "roundup_power2_divisions=none,4 --grid garbage_collection_threshold=none,0.5,0.9 "
                           "--grid expandable_segments=False,True --no-progress -v --overwrite -o ";
  // One thread: the count of replays is then fixed (with two, both may replay the same decisions).
  const auto shared = run_fraglab(args + (dir / "shared.csv").string() + " -j1");
  ASSERT_EQ(shared.status, 0) << shared.err;
  const auto shared2 = run_fraglab(args + (dir / "shared2.csv").string() + " -j2");
  ASSERT_EQ(shared.status, 0) << shared.err;
  ASSERT_EQ(shared2.status, 0) << shared2.err;
  const auto replayed = run_fraglab(args + (dir / "all.csv").string() + " -j2 --no-share");
  ASSERT_EQ(replayed.status, 0) << replayed.err;
  EXPECT_EQ(read_text(dir / "shared.csv"), read_text(dir / "all.csv"));
  EXPECT_EQ(read_text(dir / "shared2.csv"), read_text(dir / "all.csv"));
  auto summary = [](const std::string& out) { return out.substr(0, out.find("\nresults:")); };
  EXPECT_EQ(summary(shared.out), summary(replayed.out));
  EXPECT_EQ(summary(shared2.out), summary(replayed.out));

  const std::regex line(R"(sweep: 96 runs in [0-9.]+ s: ([0-9]+) replayed, ([0-9]+) answered)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(replayed.err, m, line)) << replayed.err;
  EXPECT_EQ(m[1], "96");
  ASSERT_TRUE(std::regex_search(shared.err, m, line)) << shared.err;
  EXPECT_LE(std::stoul(m[1]), 32u) << shared.err;
  EXPECT_EQ(std::stoul(m[1]) + std::stoul(m[2]), 96u);
}

}  // namespace
}  // namespace fraglab
