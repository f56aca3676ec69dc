// AddressRanges (SimDevice's address space: a sorted array with a gap) against a std::map doing the
// same inserts and erases: every lookup must agree after every step, wherever the gap is.
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <random>

#include "fraglab/address_ranges.hpp"

namespace fraglab {
namespace {

using Reference = std::map<Addr, std::pair<Bytes, bool>>;  // start -> size, vmm

void expect_same(const AddressRanges& ranges, const Reference& ref, const std::vector<Addr>& probes) {
  ASSERT_EQ(ranges.size(), ref.size());
  std::size_t i = 0;
  for (const auto& [addr, range] : ref) {
    EXPECT_EQ(ranges[i].addr, addr);
    EXPECT_EQ(ranges[i].size(), range.first);
    EXPECT_EQ(ranges[i].vmm(), range.second);
    EXPECT_EQ(ranges[i].end(), addr + range.first);
    ++i;
  }
  for (Addr p : probes) {
    EXPECT_EQ(ranges.lower_bound(p), static_cast<std::size_t>(std::distance(ref.begin(), ref.lower_bound(p)))) << p;
    EXPECT_EQ(ranges.upper_bound(p), static_cast<std::size_t>(std::distance(ref.begin(), ref.upper_bound(p)))) << p;
    const auto it = ref.find(p);
    EXPECT_EQ(ranges.find(p),
              it == ref.end() ? AddressRanges::npos : static_cast<std::size_t>(std::distance(ref.begin(), it)));
  }
}

TEST(AddressRanges, EmptyHasNothingToFind) {
  AddressRanges ranges;
  EXPECT_TRUE(ranges.empty());
  EXPECT_EQ(ranges.lower_bound(0), 0u);
  EXPECT_EQ(ranges.upper_bound(~Addr{0}), 0u);
  EXPECT_EQ(ranges.find(4096), AddressRanges::npos);
}

// Inserts in increasing order (a bump pointer), below and above them, at both ends, between two
// adjacent ranges, and erases of the first, the last and the middle: the gap moves each way.
TEST(AddressRanges, EdgesOfTheGapAndOfTheArray) {
  AddressRanges ranges;
  Reference ref;
  auto insert = [&](Addr a, Bytes s, bool vmm) {
    ranges.insert(a, s, vmm);
    ref[a] = {s, vmm};
  };
  auto erase = [&](Addr a) {
    ASSERT_NE(ranges.find(a), AddressRanges::npos);
    ranges.erase(ranges.find(a));
    ref.erase(a);
  };
  std::vector<Addr> probes = {0, 1, 511, 512, 1024, 5000, 1u << 20, ~Addr{0}};
  for (Addr a = 1 << 20; a < (1 << 20) + 40 * 512; a += 512) {  // adjacent ranges, past two growths
    insert(a, 512, false);
    probes.push_back(a);
    probes.push_back(a + 1);
  }
  expect_same(ranges, ref, probes);
  insert(512, 512, true);          // below everything: the gap goes to the front
  insert(1 << 30, 1 << 21, true);  // above everything: to the end
  insert(1024, 2048, false);       // right after the first, adjacent to it
  expect_same(ranges, ref, probes);
  erase(512);                   // the first
  erase(1 << 30);               // the last
  erase((1 << 20) + 20 * 512);  // the middle, leaving a hole of exactly one range
  expect_same(ranges, ref, probes);
  insert((1 << 20) + 20 * 512, 512, true);  // exactly into that hole
  expect_same(ranges, ref, probes);
  while (!ref.empty()) erase(ref.rbegin()->first);  // from the top down
  expect_same(ranges, ref, probes);
  insert(4096, 512, false);
  expect_same(ranges, ref, probes);
}

TEST(AddressRanges, RandomInsertsAndErasesMatchAMap) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    AddressRanges ranges;
    Reference ref;
    // Slots of 1 KiB: a range takes 512 or 1024 bytes of its slot, so ranges never overlap and
    // some are adjacent.
    constexpr Addr kSlots = 300;
    Addr bump = 0;
    for (int step = 0; step < 3000; ++step) {
      const Addr slot = rng() % 4 == 0 ? bump++ % kSlots : rng() % kSlots;  // runs in order, or anywhere
      const Addr addr = 4096 + slot * 1024;
      if (ref.contains(addr)) {
        ranges.erase(ranges.find(addr));
        ref.erase(addr);
      } else {
        const Bytes size = rng() % 2 == 0 ? 512 : 1024;
        const bool vmm = rng() % 2 == 0;
        ranges.insert(addr, size, vmm);
        ref[addr] = {size, vmm};
      }
      if (step % 50 == 0 || step > 2990) {
        std::vector<Addr> probes = {0, addr, addr + 1, addr - 1, addr + 512, ~Addr{0}};
        for (int k = 0; k < 20; ++k) probes.push_back(4096 + rng() % (kSlots * 1024 + 2048));
        expect_same(ranges, ref, probes);
      }
    }
  }
}

}  // namespace
}  // namespace fraglab
