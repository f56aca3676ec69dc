// The sweep grid: --grid parsing (bracketed list values, none), validation against the policy's
// options with errors that name the key, the cartesian product, and --shard.
#include <gtest/gtest.h>

#include "fraglab/sweep.hpp"
#include "fraglab/types.hpp"
#include "support/command.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;

using testing::error_of;

TEST(Grid, ValuesSplitAtCommasOutsideBrackets) {
  const GridAxis axis = parse_grid_axis("roundup_power2_divisions=none,4,[256:1,512:2,>:8], [1:2,>:4]");
  EXPECT_EQ(axis.key, "roundup_power2_divisions");
  ASSERT_EQ(axis.values.size(), 4u);
  EXPECT_FALSE(axis.values[0].has_value());  // none = option left out
  EXPECT_EQ(axis.values[1], "4");
  EXPECT_EQ(axis.values[2], "[256:1,512:2,>:8]");
  EXPECT_EQ(axis.values[3], "[1:2,>:4]");  // spaces around a value are dropped
}

TEST(Grid, MalformedAxesNameTheProblem) {
  EXPECT_NE(error_of([] { parse_grid_axis("max_split_size_mb"); }).find("expected KEY=V1,V2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("=1,2"); }).find("option name before '=' is empty"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("max_split_size_mb=64,,128"); }).find("max_split_size_mb: empty value"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("max_split_size_mb="); }).find("empty value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("roundup_power2_divisions=[256:1,>:8"); }).find("unbalanced '['"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("roundup_power2_divisions=256:1]"); }).find("unbalanced ']'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_grid_axis("max_split_size_mb=64,64"); }).find("'64' is listed twice"),
            std::string::npos);
}

TEST(Grid, ExpandsFirstAxisSlowestWithSpecsInAxisOrder) {
  SweepGrid grid;
  grid.base_spec = "pytorch:version:2.4";
  grid.axes = {parse_grid_axis("max_split_size_mb=none,128"), parse_grid_axis("expandable_segments=False,True")};
  const std::vector<Setting> settings = expand_grid(grid);
  ASSERT_EQ(settings.size(), 4u);
  EXPECT_EQ(settings[0].spec, "pytorch:version:2.4,expandable_segments:False");
  EXPECT_EQ(settings[1].spec, "pytorch:version:2.4,expandable_segments:True");
  EXPECT_EQ(settings[2].spec, "pytorch:version:2.4,max_split_size_mb:128,expandable_segments:False");
  EXPECT_EQ(settings[3].spec, "pytorch:version:2.4,max_split_size_mb:128,expandable_segments:True");
  EXPECT_FALSE(settings[1].values[0].has_value());
  EXPECT_EQ(settings[3].values[1], "True");

  SweepGrid bare;  // no options fixed: the first option follows a ':'
  bare.axes = {parse_grid_axis("max_split_size_mb=none,64")};
  const std::vector<Setting> two = expand_grid(bare);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].spec, "pytorch");
  EXPECT_EQ(two[1].spec, "pytorch:max_split_size_mb:64");

  SweepGrid empty;  // no axes: one run of the base spec
  EXPECT_EQ(expand_grid(empty).size(), 1u);
}

TEST(Grid, ValidationNamesTheKey) {
  auto grid_error = [](const std::string& base, const std::vector<std::string>& axes) {
    SweepGrid grid;
    grid.base_spec = base;
    for (const std::string& a : axes) grid.axes.push_back(parse_grid_axis(a));
    return error_of([&] { validate_grid(grid); });
  };
  EXPECT_EQ(grid_error("pytorch", {"max_split_size_mb=none,64,128", "expandable_segments=False,True",
                                   "roundup_power2_divisions=4,[256:1,512:2,>:8]"}),
            "(no error)");
  const std::string unknown = grid_error("pytorch", {"max_split=64"});
  EXPECT_NE(unknown.find("--grid max_split: policy 'pytorch' has no option 'max_split'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("max_split_size_mb"), std::string::npos) << "lists the options: " << unknown;
  // PyTorch refuses max_split_size_mb below 20: the policy's own words, prefixed with the grid key.
  const std::string bad_value = grid_error("pytorch", {"max_split_size_mb=none,10"});
  EXPECT_EQ(bad_value.rfind("--grid max_split_size_mb=10: pytorch", 0), 0u) << bad_value;
  const std::string bad_bool = grid_error("pytorch", {"expandable_segments=yes"});
  EXPECT_EQ(bad_bool.rfind("--grid expandable_segments=yes: ", 0), 0u) << bad_bool;
  EXPECT_NE(grid_error("pytorch:max_split_size_mb:64", {"max_split_size_mb=128"}).find("also fixed in -p"),
            std::string::npos);
  EXPECT_NE(grid_error("pytorch", {"max_split_size_mb=64", "max_split_size_mb=128"}).find("swept twice"),
            std::string::npos);
  EXPECT_NE(grid_error("no-such-policy", {}).find("unknown policy 'no-such-policy'"), std::string::npos);
  EXPECT_NE(grid_error("nocache", {"max_split_size_mb=64"}).find("policy 'nocache' has no option"), std::string::npos);
}

TEST(Grid, ShardsPartitionTheRuns) {
  EXPECT_EQ(parse_shard("2/5").index, 2u);
  EXPECT_EQ(parse_shard("2/5").count, 5u);
  for (const char* bad : {"5/5", "1", "a/2", "1/0", "-1/2", "1/2/3", "/2", "1/"}) {
    EXPECT_NE(error_of([&] { parse_shard(bad); }).find("expected I/N"), std::string::npos) << bad;
  }
  // Every run in exactly one shard.
  for (size_t run = 0; run < 50; ++run) {
    int owners = 0;
    for (size_t i = 0; i < 4; ++i) owners += Shard{i, 4}.contains(run) ? 1 : 0;
    EXPECT_EQ(owners, 1) << run;
  }
}

TEST(GridCli, BadGridIsExit2NamingTheKey) {
  const std::string trace = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";
  struct Case {
    std::string args, expected;
  };
  const Case cases[] = {
      {"--grid max_split=64", "--grid max_split: policy 'pytorch' has no option 'max_split'"},
      {"--grid max_split_size_mb=none,10", "--grid max_split_size_mb=10: pytorch"},
      {"--grid max_split_size_mb", "--grid 'max_split_size_mb': expected KEY=V1,V2"},
      {"--grid 'roundup_power2_divisions=[256:1'", "--grid roundup_power2_divisions: unbalanced '['"},
      {"--grid expandable_segments=False,True --shard 3/3", "--shard '3/3'"},
      {"--grid expandable_segments=False,True -o out.txt", "out.txt: results files end in .csv or .jsonl"},
  };
  for (const Case& c : cases) {
    const auto run = run_fraglab("sweep " + trace + " " + c.args + " --no-progress");
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.err;
    EXPECT_NE(run.err.find(c.expected), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_EQ(testing::count_lines(run.err), 1u) << "one line: " << run.err;
  }
}

}  // namespace
}  // namespace fraglab
