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

// refile() takes an entry out and files another key (a split's remainder or a merged block):
// the set must end up as std::set does after the erase and the insert, whether the key stays
// in the entry's size class (in place, or moved inside the class) or lands in another class.
TEST(FreeBlockSet, RefileMatchesEraseThenInsert) {
  FreeBlockSet set;
  Ref ref;
  std::uint64_t state = 777;
  auto rnd = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  const StreamId stream = 9;
  Addr next_addr = 0x10000;
  int same_class = 0;
  int other_class = 0;
  for (int step = 0; step < 20000; ++step) {
    if (ref.size() < 50 || (ref.size() < 300 && rnd(2) == 0)) {
      // Spread sizes, and a few popular ones (many equal sizes in one class).
      const Bytes size = rnd(2) == 0 ? 512 * (1 + rnd(3000)) : (Bytes{1} << 20) * (1 + rnd(3));
      set.insert(FreeEntry{stream, size, next_addr, 0});
      ref.emplace(stream, size, next_addr);
      next_addr += 0x200;
      continue;
    }
    auto victim = ref.begin();
    std::advance(victim, static_cast<std::ptrdiff_t>(rnd(ref.size())));
    const auto [s, size, addr] = *victim;
    // A split's remainder (smaller, at a higher address) or a merged block (larger), by a few
    // bytes or by a lot; sometimes at a lower address (a merge with the block below).
    const Bytes delta = rnd(2) == 0 ? 512 * rnd(6) : 512 * rnd(4096);
    const Bytes new_size = rnd(3) == 0 ? size + delta : size - std::min<Bytes>(size - 512, delta);
    const Addr new_addr = rnd(4) == 0 ? addr - 0x200 * (1 + rnd(4)) : next_addr;
    next_addr += 0x200;
    const std::tuple<StreamId, Bytes, Addr> key{stream, new_size, new_addr};
    if (ref.count(key) != 0) continue;  // keys are unique
    StreamBlocks* blocks = set.find(stream);
    const StreamBlocks::Pos p = blocks->lower_bound(size_addr(size, addr));
    (StreamBlocks::class_of(new_size) == StreamBlocks::class_of(size) ? same_class : other_class) += 1;
    blocks->refile(p, size_addr(new_size, new_addr), 1);
    ref.erase(victim);
    ref.insert(key);
    ASSERT_EQ(set.size(), ref.size());
    if (step % 53 == 0) {
      ASSERT_EQ(walk_both_ways(*blocks, stream), std::vector(ref.begin(), ref.end())) << "step " << step;
      for (const auto& [t, sz, a] : ref) {  // every entry is found where std::set has it
        const StreamBlocks::Pos q = blocks->lower_bound(size_addr(sz, a));
        ASSERT_FALSE(blocks->is_end(q));
        ASSERT_EQ(blocks->addr_at(q), a);
        ASSERT_EQ(blocks->size_at(q), sz);
      }
    }
  }
  EXPECT_GT(same_class, 100);  // both paths were exercised
  EXPECT_GT(other_class, 100);
  EXPECT_EQ(walk(set), std::vector(ref.begin(), ref.end()));
}

// The pattern of a training step: many equal-size blocks freed in address order and taken back
// by best fit from the lowest address, interleaved, so a class's ring buffer wraps and grows
// and both ends and the middle move. Every best fit must be std::set's.
TEST(FreeBlockSet, EqualSizesTakenFromTheFrontAndFreedAtTheBack) {
  FreeBlockSet set;
  Ref ref;
  std::uint64_t state = 4242;
  auto rnd = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  const StreamId stream = 1;
  const Bytes sizes[3] = {2 << 20, (2 << 20) + 512, 20 << 20};  // the first two share a class
  ASSERT_EQ(StreamBlocks::class_of(sizes[0]), StreamBlocks::class_of(sizes[1]));
  Addr next_addr = Addr{1} << 40;  // above every address of a late-freed block below
  for (int step = 0; step < 40000; ++step) {
    const std::uint64_t phase = (step / 1000) % 2;  // grow for a while, then shrink
    if (ref.empty() || rnd(10) < (phase == 0 ? 7u : 3u)) {
      const Bytes size = sizes[rnd(10) < 8 ? 0 : 1 + rnd(2)];
      // Mostly above every address so far; sometimes below (a block freed late).
      const Addr addr = rnd(8) == 0 ? 0x1000 + 0x200 * static_cast<Addr>(step) : next_addr;
      next_addr += 0x200;
      set.insert(FreeEntry{stream, size, addr, 0});
      ref.emplace(stream, size, addr);
      continue;
    }
    const Bytes request = sizes[rnd(3)] - 512 * rnd(2);
    StreamBlocks* blocks = set.find(stream);
    const StreamBlocks::Pos p = blocks->lower_bound(size_addr(request, 0));
    const auto it = ref.lower_bound({stream, request, 0});
    if (it == ref.end()) {
      ASSERT_TRUE(blocks->is_end(p)) << "step " << step;
      continue;
    }
    ASSERT_FALSE(blocks->is_end(p)) << "step " << step;
    ASSERT_EQ(std::make_tuple(stream, blocks->size_at(p), blocks->addr_at(p)), *it) << "step " << step;
    blocks->erase(p);
    ref.erase(it);
    if (step % 101 == 0) {
      ASSERT_EQ(walk_both_ways(*blocks, stream), std::vector(ref.begin(), ref.end())) << "step " << step;
    }
  }
  // Drain to empty: an empty pool has no best fit and begin() is end().
  StreamBlocks* blocks = set.find(stream);
  while (!ref.empty()) {
    const StreamBlocks::Pos p = blocks->lower_bound(size_addr(0, 0));
    ASSERT_EQ(std::make_tuple(stream, blocks->size_at(p), blocks->addr_at(p)), *ref.begin());
    blocks->erase(p);
    ref.erase(ref.begin());
  }
  EXPECT_EQ(blocks->size(), 0u);
  EXPECT_TRUE(blocks->is_end(blocks->lower_bound(size_addr(512, 0))));
  EXPECT_TRUE(blocks->is_end(blocks->begin()));
  EXPECT_EQ(blocks->begin(), blocks->end());
}

// The size classes follow the sizes' order (so the class order is the set's order), by hand:
// 8 classes per power of two, the largest size in the last used class.
TEST(FreeBlockSet, SizeClassesAreMonotonic) {
  EXPECT_EQ(StreamBlocks::class_of(0), 0u);
  EXPECT_EQ(StreamBlocks::class_of(7), 7u);
  EXPECT_EQ(StreamBlocks::class_of(8), 8u);    // 2^3: first class of the power-of-two part
  EXPECT_EQ(StreamBlocks::class_of(9), 9u);    // 8 classes of width 1 from 8 to 15
  EXPECT_EQ(StreamBlocks::class_of(16), 16u);  // 2^4: 8 classes of width 2
  EXPECT_EQ(StreamBlocks::class_of(17), 16u);
  EXPECT_EQ(StreamBlocks::class_of(512), 8u + 8u * 6u);       // 2^9
  EXPECT_EQ(StreamBlocks::class_of(512 + 63), 8u + 8u * 6u);  // 512/8 = 64 per class
  EXPECT_EQ(StreamBlocks::class_of(512 + 64), 8u + 8u * 6u + 1u);
  EXPECT_EQ(StreamBlocks::class_of(~Bytes{0}), 8u + 8u * 60u + 7u);  // 2^63: 8 + 8 (63 - 3)
  EXPECT_LT(StreamBlocks::class_of(~Bytes{0}), StreamBlocks::kClasses);
  std::uint64_t state = 99;
  for (int i = 0; i < 100000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const Bytes a = state >> (state % 64);
    const Bytes b = a + (state >> 40) % 4096;
    if (b < a) continue;  // wrapped
    ASSERT_LE(StreamBlocks::class_of(a), StreamBlocks::class_of(b)) << a << " " << b;
  }
}

}  // namespace
}  // namespace fraglab::cca::test
