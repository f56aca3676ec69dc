// Counting the grid before it is expanded, and streaming its settings (grid_size, grid_setting,
// check_sweep_size): the Nth setting is the Nth of expand_grid's order, the count is the product
// of the axes' value counts, and a sweep too large for the memory budget is refused up front.
#include <gtest/gtest.h>

#include "fraglab/memory_budget.hpp"
#include "fraglab/sweep.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

using testing::error_of;

SweepGrid grid_of(const std::vector<std::string>& axes, const std::string& base = "pytorch") {
  SweepGrid grid;
  grid.base_spec = base;
  for (const std::string& a : axes) grid.axes.push_back(parse_grid_axis(a));
  return grid;
}

// An axis of n values: "KEY=v0,v1,...".
std::string axis(const std::string& key, int n) {
  std::string text = key + "=";
  for (int i = 0; i < n; ++i) text += (i == 0 ? "" : ",") + std::to_string(100 + i);
  return text;
}

TEST(GridSize, IsTheProductOfTheValueCounts) {
  EXPECT_EQ(grid_size(grid_of({})), 1u);
  EXPECT_EQ(grid_size(grid_of({axis("max_split_size_mb", 3), axis("max_non_split_rounding_mb", 5)})), 15u);
  // 1000^3, counted without expanding anything.
  EXPECT_EQ(grid_size(grid_of({axis("a", 1000), axis("b", 1000), axis("c", 1000)})), 1'000'000'000u);
}

TEST(GridSize, APastSixtyFourBitsIsAnErrorNamingTheCounts) {
  // 1000^7 = 10^21 > 2^64 (1.8 x 10^19).
  std::vector<std::string> axes;
  for (char key = 'a'; key < 'h'; ++key) axes.push_back(axis(std::string(1, key), 1000));
  const std::string error = error_of([&] { grid_size(grid_of(axes)); });
  EXPECT_NE(error.find("1000 a x 1000 b"), std::string::npos) << error;
  EXPECT_NE(error.find("more than 2^64"), std::string::npos) << error;
}

TEST(GridSetting, TheNthSettingIsTheNthOfTheExpansion) {
  const SweepGrid grid = grid_of({"max_split_size_mb=none,128,256", "expandable_segments=False,True",
                                  "roundup_power2_divisions=none,4,[256:1,>:8]"},
                                 "pytorch:version:2.4");
  const std::vector<Setting> all = expand_grid(grid);
  ASSERT_EQ(all.size(), grid_size(grid));
  ASSERT_EQ(all.size(), 18u);
  for (std::uint64_t n = 0; n < all.size(); ++n) {
    const Setting s = grid_setting(grid, n);
    EXPECT_EQ(s.spec, all[n].spec) << n;
    EXPECT_EQ(s.values, all[n].values) << n;
  }
  // Mixed radix by hand: n = 13 = 2*6 + 0*3 + 1 -> axis values 256, False, 4.
  EXPECT_EQ(grid_setting(grid, 13).spec,
            "pytorch:version:2.4,max_split_size_mb:256,expandable_segments:False,roundup_power2_divisions:4");
}

TEST(GridSetting, DecodesAnyPointOfAHugeGridAlone) {
  const SweepGrid grid = grid_of({axis("a", 1000), axis("b", 1000), axis("c", 1000)}, "p");
  // 123456789 = 123 * 10^6 + 456 * 10^3 + 789.
  EXPECT_EQ(grid_setting(grid, 123'456'789).spec, "p:a:223,b:556,c:889");
  EXPECT_EQ(grid_setting(grid, 999'999'999).spec, "p:a:1099,b:1099,c:1099");
}

TEST(CheckSweepSize, RefusesNamingTheRunsTheRowsAndTheBudget) {
  const Bytes saved = memory_budget();
  set_memory_budget(Bytes{64} << 20);
  const SweepGrid grid = grid_of({axis("a", 1000), axis("b", 1000)});
  // A million runs need about a million rows: far past 64 MiB (a row is hundreds of bytes).
  ASSERT_GT(1'000'000 * sweep_run_bytes(grid), Bytes{64} << 20);
  const std::string error = error_of([&] { check_sweep_size(grid, 1, 1, "--grid"); });
  EXPECT_NE(error.find("--grid: 1000000 settings x 1 trace = 1000000 runs"), std::string::npos) << error;
  EXPECT_NE(error.find("results row"), std::string::npos) << error;
  EXPECT_NE(error.find("memory budget of 64.00 MiB"), std::string::npos) << error;
  // Traces multiply the runs; the product past 2^64 is refused too.
  std::vector<std::string> six;
  for (char key = 'a'; key < 'g'; ++key) six.push_back(axis(std::string(1, key), 1000));  // 10^18
  const std::string overflow = error_of([&] { check_sweep_size(grid_of(six), 100, 1, "--grid"); });
  EXPECT_NE(overflow.find("more than 2^64"), std::string::npos) << overflow;
  // A shard keeps its share only; a small grid passes and returns its runs.
  EXPECT_EQ(check_sweep_size(grid_of({axis("a", 10)}), 3, 1, "--grid"), 30u);
  set_memory_budget(saved);
}

}  // namespace
}  // namespace fraglab
