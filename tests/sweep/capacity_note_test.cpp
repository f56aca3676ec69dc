// The sweep summary names each section's device capacity from the device column, and, when the
// capacity was assumed, lists the rows that differ only in an option acting on a share of the
// GPU's memory and gave identical results. Rows are made by hand.
#include <gtest/gtest.h>

#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"
#include "fraglab/types.hpp"

namespace fraglab {
namespace {

// A row of a grid over garbage_collection_threshold (gc) x max_split_size_mb (split), with a
// memory fraction fixed for every run or not.
SweepRow row(const std::string& device, bool fraction, std::optional<std::string> gc, std::optional<std::string> split,
             Bytes reserved_mib) {
  std::string spec(fraction ? "pytorch:per_process_memory_fraction:0.9" : "pytorch");
  if (gc) spec.append(",garbage_collection_threshold:").append(*gc);
  if (split) spec.append(",max_split_size_mb:").append(*split);
  SweepRow r;
  r.trace = "t";
  r.device = device;
  r.spec = std::move(spec);
  r.knobs = {gc, split};
  r.metrics.peak_reserved = reserved_mib * MiB;
  r.metrics.num_device_alloc = 3;
  return r;
}

const std::vector<std::string> kKeys = {"garbage_collection_threshold", "max_split_size_mb"};

// With split=none the three gc values tie (100 MiB each); with split=64 gc=0.5 differs (90 MiB):
// only the first group is identical.
std::vector<SweepRow> grid(const std::string& device, bool fraction = true) {
  return {row(device, fraction, std::nullopt, std::nullopt, 100),
          row(device, fraction, "0.5", std::nullopt, 100),
          row(device, fraction, "0.8", std::nullopt, 100),
          row(device, fraction, std::nullopt, "64", 120),
          row(device, fraction, "0.5", "64", 90),
          row(device, fraction, "0.8", "64", 120)};
}

TEST(CapacityNote, AssumedCapacityListsOnlyTheIdenticalGroups) {
  const std::string out = sweep_report(ResultsTable{kKeys, grid("sim")});
  EXPECT_NE(out.find("== t on sim, capacity 80.00 GiB (default): 6 settings ==\n"), std::string::npos) << out;
  EXPECT_NE(out.find("note: rows identical because garbage_collection_threshold has no capacity to act on: none was "
                     "given, 80.00 GiB was assumed; pass --device sim:<your GPU's memory>\n"
                     "  garbage_collection_threshold=none,0.5,0.8 (with max_split_size_mb=none)\n\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("max_split_size_mb=64)"), std::string::npos) << "gc acted there: " << out;
  // max_split_size_mb needs no capacity: it is never listed.
  EXPECT_EQ(out.find("  max_split_size_mb="), std::string::npos) << out;
}

TEST(CapacityNote, GivenCapacityHasNoNote) {
  const std::string out = sweep_report(ResultsTable{kKeys, grid("sim:40GiB")});
  EXPECT_NE(out.find("== t on sim:40GiB, capacity 40.00 GiB: 6 settings ==\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("note:"), std::string::npos) << out;
  // A spec that sets only external memory leaves the capacity assumed.
  const std::string external = sweep_report(ResultsTable{kKeys, grid("sim:external:1GiB")});
  EXPECT_NE(external.find("capacity 80.00 GiB (default)"), std::string::npos) << external;
  EXPECT_NE(external.find("note: rows identical"), std::string::npos) << external;
}

TEST(CapacityNote, GcWithoutAMemoryFractionIsNotedWhateverTheCapacity) {
  // PyTorch collects only under a memory fraction (allocator-model §3.3): that is the reason given.
  const std::string out = sweep_report(ResultsTable{kKeys, grid("sim:40GiB", false)});
  EXPECT_NE(out.find("note: rows identical because garbage_collection_threshold acts only with "
                     "per_process_memory_fraction set (PyTorch collects cached blocks only under a memory fraction)\n"
                     "  garbage_collection_threshold=none,0.5,0.8 (with max_split_size_mb=none)\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("no capacity to act on"), std::string::npos) << out;
}

TEST(CapacityNote, GroupsAllAlikeShareOneLine) {
  std::vector<SweepRow> rows = grid("sim");
  rows[4].metrics.peak_reserved = 120 * MiB;  // gc=0.5 with split=64 now ties too: both groups alike
  const std::string out = sweep_report(ResultsTable{kKeys, rows});
  EXPECT_NE(out.find("  garbage_collection_threshold=none,0.5,0.8 with every one of the 2 combinations of the other "
                     "options\n\n"),
            std::string::npos)
      << out;
}

TEST(CapacityNote, NoNoteWhenTheOptionActsEverywhere) {
  std::vector<SweepRow> rows = grid("sim");
  rows[1].metrics.peak_reserved = 95 * MiB;  // gc=0.5 with split=none now differs too
  EXPECT_EQ(sweep_report(ResultsTable{kKeys, rows}).find("note:"), std::string::npos);
}

}  // namespace
}  // namespace fraglab
