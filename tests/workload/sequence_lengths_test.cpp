// Per-step sequence lengths (workload-model §6.1).
#include <gtest/gtest.h>

#include "workload/sequence_lengths.hpp"

namespace fraglab::workload {
namespace {

WorkloadOptions t5(Padding padding) {
  WorkloadOptions o;
  o.model = builtin_model("t5-3b");
  o.micro_batch = 8;
  o.src_len = 512;
  o.tgt_len = 150;
  o.padding = padding;
  return o;
}

TEST(SequenceLengths, MaxLengthIsFixed) {
  const WorkloadOptions o = t5(Padding::MaxLength);
  const SequenceLengths l(o);
  for (std::uint32_t step = 1; step < 20; ++step) {
    EXPECT_EQ(l.shape(step, 0).len, 512u);
    EXPECT_EQ(l.shape(step, 0).tgt_len, 150u);
  }
}

TEST(SequenceLengths, LongestVariesWithinTheCapsAndIsSeeded) {
  WorkloadOptions o = t5(Padding::Longest);
  const SequenceLengths l(o);
  std::set<std::uint64_t> src, tgt;
  for (std::uint32_t step = 1; step <= 50; ++step) {
    const StepShape s = l.shape(step, 0);
    EXPECT_LE(s.len, 512u);
    EXPECT_LE(s.tgt_len, 150u);
    src.insert(s.len);
    tgt.insert(s.tgt_len);
    EXPECT_EQ(s.len, SequenceLengths(o).shape(step, 0).len);  // same seed, same shape
  }
  // Source median 600 > 512: with 8 examples the longest is almost always truncated to 512;
  // target median 60 with sigma 0.5: the longest of 8 is ~100 and varies from step to step.
  EXPECT_LE(src.size(), 3u);
  EXPECT_GT(tgt.size(), 10u);
}

TEST(SequenceLengths, MultipleOfRoundsUp) {
  WorkloadOptions o = t5(Padding::MultipleOf);
  o.pad_multiple = 64;
  const SequenceLengths l(o);
  for (std::uint32_t step = 1; step <= 20; ++step) {
    EXPECT_EQ(l.shape(step, 0).tgt_len % 64, 0u);
    EXPECT_EQ(l.shape(step, 0).len % 64, 0u);
  }
}

}  // namespace
}  // namespace fraglab::workload
