// `fraglab sweep` runs each trace on its own device: --device, else the capacity the trace's
// recorded oom implies, else the default; the device column and the section headers say which,
// and the identical-rows note appears only where the capacity was assumed.
#include <gtest/gtest.h>

#include "fraglab/sweep.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SweepCapacity, EachTraceRunsOnItsOwnCapacity) {
  const auto dir = testing::scratch_dir("sweep-capacity");
  const std::string csv = (dir / "runs.csv").string();
  // A memory fraction for every run, so the threshold acts when reserved memory reaches it.
  const auto r = run_fraglab("sweep " + kSamples + "cutoff.jsonl " + kSamples +
                             "two-phase.jsonl -p pytorch:per_process_memory_fraction:0.9 --grid "
                             "garbage_collection_threshold=none,0.8 -j1 --no-progress --overwrite -o " +
                             csv);
  ASSERT_EQ(r.status, 0) << r.err;
  // cutoff.jsonl, by hand: segments of 2 + 64 + 20 MiB at the start and one of 70 MiB before the
  // oom: 156 MiB reserved, and the oom reports 96 MiB free: 252 MiB = 264241152 bytes.
  EXPECT_NE(r.out.find("== cutoff on sim:264241152B, capacity 252.00 MiB: 2 settings, start state cold ==\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("sweep: cutoff: device sim:264241152B: capacity 252.00 MiB from its recorded oom"),
            std::string::npos)
      << r.err;
  // two-phase.jsonl records no oom: the default, and the warning for the options that need it.
  EXPECT_NE(r.out.find("== two-phase on sim, capacity 80.00 GiB (default): 2 settings ==\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("warning: per_process_memory_fraction acts on a share of the GPU's memory"), std::string::npos)
      << r.err;
  // two-phase peaks at 334 MiB, far below 0.8 x 0.9 x 80 GiB: identical rows, noted under its
  // table only (cutoff's capacity was not assumed).
  EXPECT_EQ(count(r.out, "note: rows identical because garbage_collection_threshold has no capacity"), 1u) << r.out;
  const size_t note = r.out.find("note: rows identical");
  EXPECT_GT(note, r.out.find("== two-phase"));
  EXPECT_NE(r.out.find("  garbage_collection_threshold=none,0.8\n", note), std::string::npos) << r.out;

  // The results file's device column is the spec each trace ran on.
  const ResultsTable table = read_results(csv);
  ASSERT_EQ(table.rows.size(), 4u);
  for (const SweepRow& row : table.rows) {
    EXPECT_EQ(row.device, row.trace == "cutoff" ? "sim:264241152B" : "sim") << row.trace;
  }

  // --device applies to every trace.
  const auto given = run_fraglab("sweep " + kSamples +
                                 "cutoff.jsonl --grid garbage_collection_threshold=none,0.8 "
                                 "-j1 --no-progress --device sim:1GiB");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_NE(given.out.find("== cutoff on sim:1GiB, capacity 1.00 GiB: 2 settings, start state cold ==\n"),
            std::string::npos)
      << given.out;
}

}  // namespace
}  // namespace fraglab
