// Hash flooding: keys chosen to collide in a table with a fixed hash. Ids and addresses that are
// multiples of the modular inverse of the Fibonacci multiplier 0x9E3779B97F4A7C15 all had
// `key * mul >> shift` = 0 under the old hash of LiveAllocations and AddressTable, so every
// insert walked past all earlier keys (100,000 JSONL ids: 22.7 s of CPU, Release, before; 0.05 s
// after, with the per-process seeded mixer of fraglab/seeded_hash.hpp). Here the same keys go into
// the tables and the longest probe run must stay short.
#include <gtest/gtest.h>

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "fraglab/seeded_hash.hpp"
#include "trace/address_table.hpp"
#include "trace/live_allocations.hpp"

namespace fraglab {
namespace {

// The inverse of the Fibonacci multiplier modulo 2^64, found by Newton's iteration (each step
// doubles the correct low bits; an odd number is its own inverse modulo 8).
constexpr std::uint64_t inverse_of(std::uint64_t a) {
  std::uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
constexpr std::uint64_t kFibonacci = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t kInverse = inverse_of(kFibonacci);
static_assert(kFibonacci * kInverse == 1);

// Keys k * inverse for k = 1..n: under the old hash, key * mul = k, whose high bits are all 0.
std::vector<std::uint64_t> adversarial_keys(std::size_t n) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 1; k <= n; ++k) keys.push_back(k * kInverse);
  return keys;
}

constexpr std::size_t kKeys = 100'000;
// Linear probing at load <= 3/4 has runs of a few dozen slots at most (the longest measured here,
// over runs with different seeds: 15-23); colliding keys made one run of all 100,000.
constexpr std::size_t kLongestProbe = 1000;

TEST(HashFlooding, TheOldHashSentEveryAdversarialKeyToOneSlot) {
  // The premise of the tests below, computed independently of the tables.
  for (std::uint64_t key : adversarial_keys(1000)) EXPECT_EQ((key * kFibonacci) >> 32, 0u);
}

TEST(HashFlooding, LiveAllocationsProbeBrieflyOnAdversarialIds) {
  detail::LiveAllocations live;
  const std::vector<std::uint64_t> ids = adversarial_keys(kKeys);
  for (std::uint64_t id : ids) ASSERT_EQ(live.apply(Op::Alloc, id, 512), nullptr);
  EXPECT_EQ(live.size(), kKeys);
  EXPECT_LT(live.longest_probe(), kLongestProbe);
  for (std::uint64_t id : ids) ASSERT_EQ(live.apply(Op::Free, id, 0), nullptr) << id;
  EXPECT_EQ(live.size(), 0u);
}

TEST(HashFlooding, AddressTableProbesBrieflyOnAdversarialAddresses) {
  detail::AddressTable table;
  const std::vector<std::uint64_t> addrs = adversarial_keys(kKeys);
  for (std::uint64_t a : addrs) table.get(a).live = true;
  EXPECT_LT(table.longest_probe(), kLongestProbe);
  for (std::uint64_t a : addrs) {
    const detail::AddressTable::Slot* s = table.find(a);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->addr, a);
  }
  EXPECT_EQ(table.find(12345), nullptr);
}

TEST(HashFlooding, SeededHashSpreadsAdversarialKeysOverUnorderedBuckets) {
  // std::unordered_set's buckets are hash % bucket_count: with SeededHash no bucket of the
  // adversarial keys (nor of dense counters, nor of 512-aligned addresses) holds more than a few.
  for (std::uint64_t stride : {kInverse, std::uint64_t{1}, std::uint64_t{512}}) {
    std::unordered_set<std::uint64_t, SeededHash> set;
    for (std::uint64_t k = 1; k <= kKeys; ++k) set.insert(k * stride);
    std::size_t largest = 0;
    for (std::size_t b = 0; b < set.bucket_count(); ++b) largest = std::max(largest, set.bucket_size(b));
    EXPECT_LT(largest, 16u) << "stride " << stride;
  }
}

TEST(HashFlooding, SeededHashIsStableWithinAProcessAndSeesEveryByte) {
  const SeededHash h;
  EXPECT_EQ(h(std::uint64_t{42}), SeededHash{}(std::uint64_t{42}));
  EXPECT_EQ(h(std::string_view("param")), h(std::string("param")));
  // Strings that differ in one byte, in the tail or in a full block, or only in length (zero
  // padding), hash apart.
  EXPECT_NE(h(std::string_view("abcdefgh12")), h(std::string_view("abcdefgh13")));
  EXPECT_NE(h(std::string_view("abcdefgh12")), h(std::string_view("abcdefgX12")));
  EXPECT_NE(h(std::string_view("ab")), h(std::string_view("ab\0", 3)));
  EXPECT_NE(h(std::string_view("")), h(std::string_view("\0", 1)));
}

}  // namespace
}  // namespace fraglab
