// Rounding and segment sizing, allocator-model §1.2-§1.6. Every expected value is derived by hand in
// the comment next to it.
#include <gtest/gtest.h>

#include "pytorch/config.hpp"
#include "pytorch/rounding.hpp"

namespace fraglab::cca {
namespace {

RoundingRules rules_with(Bytes d, Version v = Version::Newest) {
  RoundingRules r;
  r.version = v;
  r.divisions.fill(d);
  return r;
}

// §1.6 worked examples (default config: no divisions, large segment 20 MiB).
struct Row {
  Bytes request, rounded;
  PoolKind pool;
  Bytes segment;
};
TEST(Rounding, WorkedExamplesOfSection1_6) {
  const RoundingRules none;
  const Row rows[] = {
      // 1 < 512 -> 512; <= 1 MiB -> small; small miss -> 2 MiB segment.
      {1, 512, PoolKind::Small, 2097152},
      // 1048576 is a multiple of 512 -> itself; == kSmallSize -> small (inclusive, trap §14.1).
      {1048576, 1048576, PoolKind::Small, 2097152},
      // ceil(1048577 / 512) = 2049 -> 2049 * 512 = 1049088 > 1 MiB -> large; < 10 MiB -> 20 MiB.
      {1048577, 1049088, PoolKind::Large, 20971520},
      // 10485760 = 20480 * 512; >= 10 MiB -> rounded up to 2 MiB: already 5 * 2 MiB.
      {10485760, 10485760, PoolKind::Large, 10485760},
      // ceil(10485761 / 512) = 20481 -> 10486272; ceil(10486272 / 2097152) = 6 -> 12582912.
      {10485761, 10486272, PoolKind::Large, 12582912},
      // ceil(26214401 / 512) = 51201 -> 26214912; ceil(26214912 / 2097152) = 13 -> 27262976.
      {26214401, 26214912, PoolKind::Large, 27262976},
  };
  for (const Row& r : rows) {
    const Bytes rounded = round_size(r.request, none);
    EXPECT_EQ(rounded, r.rounded) << r.request;
    EXPECT_EQ(pool_for(rounded), r.pool) << r.request;
    EXPECT_EQ(get_allocation_size(rounded, kLargeBuffer), r.segment) << r.request;
  }
}

TEST(Rounding, PowerOfTwoDivisionsWorkedExample) {
  // §1.3: d = 4, 5,000,000: floor2 = 4,194,304, step = 4,194,304 / 4 = 1,048,576;
  // 5,000,000 is not a multiple -> (5,000,000 & ~(step-1)) + step = 4,194,304 + 1,048,576 = 5,242,880.
  EXPECT_EQ(roundup_power2_next_division(5000000, 4, Version::Newest), 5242880u);
  // Through round_size: slot of 5,000,000 = floor(log2) 22 - 20 = 2 (table all 4); 5e6 > 512*4.
  EXPECT_EQ(round_size(5000000, rules_with(4)), 5242880u);
  // A power of two is returned unchanged: 4 MiB stays 4 MiB.
  EXPECT_EQ(round_size(4194304, rules_with(4)), 4194304u);
  // step == 0 -> next power of two: size 5, d 8: floor2 = 4, 4 >> 3 = 0 -> 8.
  EXPECT_EQ(roundup_power2_next_division(5, 8, Version::Newest), 8u);
}

TEST(Rounding, DocsExample1200IsRoundedTo1536) {
  // §1.3 trap: with 4 divisions 1200 <= 512 * 4 = 2048, so plain 512 rounding applies:
  // ceil(1200 / 512) = 3 -> 1536 (not the docs' 1280).
  EXPECT_EQ(round_size(1200, rules_with(4)), 1536u);
}

TEST(Rounding, DivisionOfOneOrZeroMeansOff) {
  // Trap §14.10: d == 1 is "no power-of-2 rounding" from 2.0 on: 5,000,000 -> 512 rounding:
  // ceil(5,000,000 / 512) = 9766 -> 9766 * 512 = 5,000,192.
  EXPECT_EQ(round_size(5000000, rules_with(1)), 5000192u);
  EXPECT_EQ(round_size(5000000, rules_with(0)), 5000192u);
  // 1.13 quirk (§1.2): d == 1 passes "d > 0" and the helper returns the size unrounded.
  EXPECT_EQ(round_size(5000000, rules_with(1, Version::V1_13)), 5000000u);
}

// malloc's shortcut (rounds_plainly): only rules under which §1.2 leaves plain 512 rounding qualify.
TEST(Rounding, PlainRoundingShortcut) {
  // By hand: 1 -> 512, 512 -> 512, 513 -> 1024, 1,048,577 -> 2048 * 512 + 512 = 1,049,088.
  EXPECT_EQ(round_up_512(1), 512u);
  EXPECT_EQ(round_up_512(512), 512u);
  EXPECT_EQ(round_up_512(513), 1024u);
  EXPECT_EQ(round_up_512(1048577), 1049088u);
  // 2.0+: d <= 1 everywhere is plain (§14.10), any interval with d > 1 is not.
  EXPECT_TRUE(rounds_plainly(RoundingRules{}));
  EXPECT_TRUE(rounds_plainly(rules_with(1)));
  EXPECT_FALSE(rounds_plainly(rules_with(4)));
  RoundingRules one_interval = rules_with(0);
  one_interval.divisions[15] = 2;  // only sizes >= 32 GiB are rounded to halves of a power of two
  EXPECT_FALSE(rounds_plainly(one_interval));
  // 1.13: only d == 0 is plain; d == 1 returns the size unrounded (§1.2 quirk, test above).
  EXPECT_TRUE(rounds_plainly(rules_with(0, Version::V1_13)));
  EXPECT_FALSE(rounds_plainly(rules_with(1, Version::V1_13)));
  // Where it says plain, round_size agrees with plain rounding (sizes around the 512 steps, the
  // division intervals' bounds and the 1.13 bypass).
  for (const RoundingRules& r : {RoundingRules{}, rules_with(1), rules_with(0, Version::V1_13)}) {
    for (Bytes base : {Bytes{0}, Bytes{512}, Bytes{4096}, MiB, 2 * MiB, GiB, 32 * GiB}) {
      for (Bytes delta : {Bytes{1}, Bytes{2}, Bytes{511}, Bytes{512}, Bytes{513}}) {
        EXPECT_EQ(round_size(base + delta, r), round_up_512(base + delta)) << base + delta;
      }
    }
  }
}

TEST(Rounding, BypassThresholdOf1_13) {
  // 1.13: above roundup_bypass_threshold only 512 rounding: threshold 1 MiB, 5,000,000 -> 5,000,192;
  // below it the divisions apply: 1,000,000 with d = 4: floor2 = 524288, step 131072,
  // 1,000,000 / 131072 = 7.6 -> 8 * 131072 = 1,048,576.
  RoundingRules r = rules_with(4, Version::V1_13);
  r.bypass_threshold = 1048576;
  EXPECT_EQ(round_size(5000000, r), 5000192u);
  EXPECT_EQ(round_size(1000000, r), 1048576u);
}

TEST(Rounding, DivisionSlots) {
  // §1.4: slot = clamp(floor(log2(size)) - 20, 0, 15).
  EXPECT_EQ(division_slot(1), 0u);                // < 1 MiB -> 0
  EXPECT_EQ(division_slot(2 * MiB - 1), 0u);      // log2 = 20 -> 0
  EXPECT_EQ(division_slot(2 * MiB), 1u);          // log2 = 21 -> 1
  EXPECT_EQ(division_slot(GiB + GiB / 2), 10u);   // log2 = 30 -> 10 (the 1-2 GiB interval)
  EXPECT_EQ(division_slot(32 * GiB), 15u);        // log2 = 35 -> 15
  EXPECT_EQ(division_slot(Bytes{1} << 50), 15u);  // clamped
}

TEST(Rounding, LargeSegmentSizeReplacesTheTwentyMiBSegment) {
  // newest: a 5 MiB miss allocates large_segment_size (here 64 MiB) instead of 20 MiB; >= 10 MiB
  // still rounds to 2 MiB.
  EXPECT_EQ(get_allocation_size(5 * MiB, 64 * MiB), 64 * MiB);
  EXPECT_EQ(get_allocation_size(11 * MiB, 64 * MiB), 12 * MiB);
}

}  // namespace
}  // namespace fraglab::cca
