// add_runs_by_batch: the rows of maxbatch results files as the runs a search asks for, shared by
// `maxbatch --resume` and `--merge`. Expected keys by hand from the rows written here.
#include <gtest/gtest.h>

#include "fraglab/maxbatch_shards.hpp"

namespace fraglab {
namespace {

SweepRow row(std::optional<std::string> micro_batch, std::string spec, std::uint64_t retries) {
  SweepRow r;
  r.spec = std::move(spec);
  r.knobs.push_back(std::move(micro_batch));
  r.metrics.num_alloc_retries = retries;
  return r;
}

TEST(RunsByBatch, DecimalMicroBatchCellsKeyTheRunsAndOthersAreLeftOut) {
  const std::vector<SweepRow> rows{
      row("8", "pytorch", 1),          row("12", "pytorch", 2), row("8", "tlsf", 3),
      row("08x", "pytorch", 4),        row("", "pytorch", 5),   row(std::nullopt, "pytorch", 6),
      row("1234567890", "pytorch", 7), row("-3", "pytorch", 8), row("012", "tlsf", 9),
  };
  MaxbatchRuns runs;
  add_runs_by_batch(rows, runs);
  // 8/pytorch, 12/pytorch, 8/tlsf and "012" read as 12/tlsf; the rest are no decimal count of
  // at most 9 digits.
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs.at({8, "pytorch"}), &rows[0]);
  EXPECT_EQ(runs.at({12, "pytorch"}), &rows[1]);
  EXPECT_EQ(runs.at({8, "tlsf"}), &rows[2]);
  EXPECT_EQ(runs.at({12, "tlsf"})->metrics.num_alloc_retries, 9u);
}

TEST(RunsByBatch, FirstRowOfARunIsKeptAcrossFiles) {
  const std::vector<SweepRow> first{row("4", "pytorch", 1)};
  const std::vector<SweepRow> second{row("4", "pytorch", 2), row("6", "pytorch", 3)};
  MaxbatchRuns runs;
  add_runs_by_batch(first, runs);
  add_runs_by_batch(second, runs);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs.at({4, "pytorch"}), &first[0]);
  EXPECT_EQ(runs.at({6, "pytorch"}), &second[1]);
}

}  // namespace
}  // namespace fraglab
