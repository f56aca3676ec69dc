// FreeBlockSet (block_pool.hpp) against std::set ordered by (stream, size, address), PyTorch's
// BlockComparatorSize (allocator-model §3.1): inserts, erases by key and erases at a position
// found by lower_bound must leave the same entries in the same order.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <tuple>
#include <vector>

#include "pytorch/block_pool.hpp"

namespace fraglab::cca::test {
namespace {

using Ref = std::set<std::tuple<StreamId, Bytes, Addr>>;

std::vector<std::tuple<StreamId, Bytes, Addr>> walk(const FreeBlockSet& set) {
  std::vector<std::tuple<StreamId, Bytes, Addr>> out;
  for (auto p = set.begin(); !set.is_end(p); p = set.next(p)) {
    const FreeEntry& e = set.at(p);
    out.emplace_back(e.stream, e.size, e.addr);
  }
  return out;
}

TEST(FreeBlockSet, MatchesAnOrderedSetUnderInsertsAndBothErases) {
  FreeBlockSet set;
  Ref ref;
  std::uint64_t state = 12345;
  auto rnd = [&state](std::uint64_t n) {  // a fixed LCG: the same sequence on every run
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  Addr next_addr = 0x1000;
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t op = ref.size() < 40 ? 0 : rnd(3);  // grow to many chunks, then churn
    if (op == 0 || ref.empty()) {
      const StreamId stream = static_cast<StreamId>(rnd(2));
      const Bytes size = 512 * (1 + rnd(20));  // few sizes: many ties broken by address
      const Addr addr = next_addr;
      next_addr += 0x200;
      set.insert(FreeEntry{stream, size, addr, 0});
      ref.emplace(stream, size, addr);
    } else {
      auto victim = ref.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(rnd(ref.size())));
      const auto [stream, size, addr] = *victim;
      if (op == 1) {
        set.erase(FreeKey{stream, size, addr});
      } else {
        const FreeBlockSet::Pos p = set.lower_bound(FreeKey{stream, size, addr});
        ASSERT_FALSE(set.is_end(p));
        ASSERT_EQ(set.at(p).addr, addr);
        set.erase(p);
      }
      ref.erase(victim);
    }
    ASSERT_EQ(set.size(), ref.size());
    if (step % 97 == 0) {
      ASSERT_EQ(walk(set), std::vector(ref.begin(), ref.end())) << "step " << step;
    }
  }
  // Drain by erasing at the best-fit position, as get_free_block does: each time the smallest
  // entry of stream 1 at least 4 KiB, ties to the lowest address.
  while (true) {
    const FreeBlockSet::Pos p = set.lower_bound(FreeKey{1, 4096, 0});
    const auto it = ref.lower_bound({1, 4096, 0});
    if (it == ref.end()) {
      ASSERT_TRUE(set.is_end(p));
      break;
    }
    ASSERT_FALSE(set.is_end(p));
    ASSERT_EQ(std::make_tuple(set.at(p).stream, set.at(p).size, set.at(p).addr), *it);
    set.erase(p);
    ref.erase(it);
  }
  EXPECT_EQ(walk(set), std::vector(ref.begin(), ref.end()));
}

}  // namespace
}  // namespace fraglab::cca::test
