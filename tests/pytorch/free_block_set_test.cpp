// FreeBlockSet / StreamBlocks (block_pool.hpp) against std::set ordered by (stream, size,
// address), PyTorch's BlockComparatorSize (allocator-model §3.1): inserts, erases by key and
// erases at a position found by lower_bound must leave the same entries in the same order, and
// lower_bound inside a stream must find what the ordered set finds.
#include <gtest/gtest.h>

#include <algorithm>
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
  std::vector<FreeEntry> entries;
  set.copy_to(entries);
  std::vector<std::tuple<StreamId, Bytes, Addr>> out;
  for (const FreeEntry& e : entries) out.emplace_back(e.stream, e.size, e.addr);
  return out;
}

// Walks one stream's set forward with next() and back with prev(): both orders must agree.
std::vector<std::tuple<StreamId, Bytes, Addr>> walk_both_ways(const StreamBlocks& blocks, StreamId stream) {
  std::vector<std::tuple<StreamId, Bytes, Addr>> forward;
  for (auto p = blocks.begin(); !blocks.is_end(p); p = blocks.next(p)) {
    forward.emplace_back(stream, blocks.size_at(p), blocks.addr_at(p));
  }
  std::vector<std::tuple<StreamId, Bytes, Addr>> backward;
  for (auto p = blocks.end(); p != blocks.begin();) {
    p = blocks.prev(p);
    backward.emplace_back(stream, blocks.size_at(p), blocks.addr_at(p));
  }
  EXPECT_EQ(std::vector(backward.rbegin(), backward.rend()), forward);
  return forward;
}

TEST(FreeBlockSet, MatchesAnOrderedSetUnderInsertsAndBothErases) {
  FreeBlockSet set;
  Ref ref;
  std::uint64_t state = 12345;
  auto rnd = [&state](std::uint64_t n) {  // a fixed LCG: the same sequence on every run
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  // Streams are raw pointer values (compared as numbers); sizes and addresses use all 64 bits,
  // so a key that packed them into fewer bits would misorder these.
  const StreamId streams[3] = {0x7f00deadbe00ull, 0, 0x7f00deadbd00ull};
  Addr next_addr = 0xfff0'0000'0000'0000ull;
  for (int step = 0; step < 30000; ++step) {
    const std::uint64_t op = ref.size() < 60 ? 0 : rnd(3);  // grow to many chunks, then churn
    if (op == 0 || ref.empty()) {
      const StreamId stream = streams[rnd(3)];
      // Few sizes (many ties broken by address), some of them above 2^63.
      const Bytes size = rnd(4) == 0 ? (Bytes{1} << 63) + 512 * rnd(5) : 512 * (1 + rnd(20));
      const Addr addr = rnd(2) == 0 ? next_addr : 0x1000 + 0x200 * static_cast<Addr>(step);
      next_addr += 0x200;
      set.insert(FreeEntry{stream, size, addr, static_cast<NodeId>(step)});
      ref.emplace(stream, size, addr);
    } else {
      auto victim = ref.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(rnd(ref.size())));
      const auto [stream, size, addr] = *victim;
      if (op == 1) {
        set.erase(FreeKey{stream, size, addr});
      } else {
        StreamBlocks* blocks = set.find(stream);
        ASSERT_NE(blocks, nullptr);
        const StreamBlocks::Pos p = blocks->lower_bound(size_addr(size, addr));
        ASSERT_FALSE(blocks->is_end(p));
        ASSERT_EQ(blocks->addr_at(p), addr);
        ASSERT_EQ(blocks->size_at(p), size);
        blocks->erase(p);
      }
      ref.erase(victim);
    }
    ASSERT_EQ(set.size(), ref.size());
    if (step % 97 == 0) {
      ASSERT_EQ(walk(set), std::vector(ref.begin(), ref.end())) << "step " << step;
      for (StreamId s : streams) {
        if (const StreamBlocks* blocks = set.find(s)) {
          std::vector<std::tuple<StreamId, Bytes, Addr>> expected;
          for (const auto& t : ref) {
            if (std::get<0>(t) == s) expected.push_back(t);
          }
          ASSERT_EQ(walk_both_ways(*blocks, s), expected) << "step " << step;
        }
      }
    }
  }
  // Drain by erasing at the best-fit position, as get_free_block does: each time the smallest
  // entry of the stream at least 4 KiB, ties to the lowest address.
  const StreamId stream = streams[2];
  StreamBlocks* blocks = set.find(stream);
  ASSERT_NE(blocks, nullptr);
  while (true) {
    const StreamBlocks::Pos p = blocks->lower_bound(size_addr(4096, 0));
    const auto it = ref.lower_bound({stream, 4096, 0});
    if (it == ref.end() || std::get<0>(*it) != stream) {
      ASSERT_TRUE(blocks->is_end(p));
      break;
    }
    ASSERT_FALSE(blocks->is_end(p));
    ASSERT_EQ(std::make_tuple(stream, blocks->size_at(p), blocks->addr_at(p)), *it);
    blocks->erase(p);
    ref.erase(it);
  }
  EXPECT_EQ(walk(set), std::vector(ref.begin(), ref.end()));
}

// replace() files a key in place of an entry exactly when the order allows it: the key sorts
// between the entry's predecessor and its successor in its stream (found with std::set).
TEST(FreeBlockSet, ReplaceOnlyWhereTheOrderHolds) {
  FreeBlockSet set;
  Ref ref;
  std::uint64_t state = 777;
  auto rnd = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  const StreamId stream = 9;
  Addr next_addr = 0x10000;
  int replaced = 0;
  int refused = 0;
  for (int step = 0; step < 20000; ++step) {
    if (ref.size() < 50 || (ref.size() < 300 && rnd(2) == 0)) {
      const Bytes size = 512 * (1 + rnd(3000));  // spread: a remainder often fits in place
      set.insert(FreeEntry{stream, size, next_addr, 0});
      ref.emplace(stream, size, next_addr);
      next_addr += 0x200;
      continue;
    }
    auto victim = ref.begin();
    std::advance(victim, static_cast<std::ptrdiff_t>(rnd(ref.size())));
    const auto [s, size, addr] = *victim;
    // A split's remainder (smaller, at a higher address) or a merged block (larger).
    const Bytes new_size = rnd(3) == 0 ? size + 512 * rnd(6) : size - std::min<Bytes>(size - 512, 512 * rnd(6));
    const Addr new_addr = next_addr;
    next_addr += 0x200;
    const std::tuple<StreamId, Bytes, Addr> key{stream, new_size, new_addr};
    const bool order_holds = (victim == ref.begin() || *std::prev(victim) < key) &&
                             (std::next(victim) == ref.end() || key < *std::next(victim));
    StreamBlocks* blocks = set.find(stream);
    const StreamBlocks::Pos p = blocks->lower_bound(size_addr(size, addr));
    ASSERT_EQ(blocks->replace(p, size_addr(new_size, new_addr), 1), order_holds) << "step " << step;
    if (order_holds) {
      ref.erase(victim);
      ref.insert(key);
      ++replaced;
    } else {
      ++refused;
    }
    ASSERT_EQ(set.size(), ref.size());
    if (step % 53 == 0) {
      ASSERT_EQ(walk_both_ways(*blocks, stream), std::vector(ref.begin(), ref.end()));
    }
    // The chunks' last keys must follow a replace of a chunk's last entry: lower_bound finds all.
    for (const auto& [t, sz, a] : ref) {
      if (step % 53 != 0) break;
      const StreamBlocks::Pos q = blocks->lower_bound(size_addr(sz, a));
      ASSERT_FALSE(blocks->is_end(q));
      ASSERT_EQ(blocks->addr_at(q), a);
    }
  }
  EXPECT_GT(replaced, 100);  // both outcomes were exercised
  EXPECT_GT(refused, 100);
  EXPECT_EQ(walk(set), std::vector(ref.begin(), ref.end()));
}

TEST(FreeBlockSet, IdOfFindsExactlyTheFiledKey) {
  FreeBlockSet set;
  set.insert(FreeEntry{7, 4096, 0x2000, 3});
  set.insert(FreeEntry{7, 4096, 0x1000, 4});
  set.insert(FreeEntry{5, 4096, 0x1000, 5});
  EXPECT_EQ(set.id_of(FreeKey{7, 4096, 0x1000}), 4u);
  EXPECT_EQ(set.id_of(FreeKey{7, 4096, 0x2000}), 3u);
  EXPECT_EQ(set.id_of(FreeKey{5, 4096, 0x1000}), 5u);
  EXPECT_EQ(set.id_of(FreeKey{7, 4096, 0x1800}), kNil);  // between two keys
  EXPECT_EQ(set.id_of(FreeKey{6, 4096, 0x1000}), kNil);  // a stream with no blocks
  EXPECT_EQ(set.id_of(FreeKey{7, 8192, 0x1000}), kNil);  // past the end
}

}  // namespace
}  // namespace fraglab::cca::test
