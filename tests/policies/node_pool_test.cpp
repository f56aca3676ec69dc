// NodePoolAllocator (policies/common/node_pool.hpp): containers with pooled nodes behave exactly
// as the same containers with std::allocator (the reference), and freed nodes are reused.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "common/node_pool.hpp"
#include "fraglab/rng.hpp"

namespace fraglab::test {
namespace {

TEST(NodePool, PooledMapAndSetMatchStdContainersUnderRandomOperations) {
  Rng rng(7);
  PooledMap<std::uint64_t, std::uint64_t> map;
  std::map<std::uint64_t, std::uint64_t> ref_map;
  PooledSet<std::uint64_t> set;
  std::set<std::uint64_t> ref_set;
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t key = rng.below(300);
    if (rng.below(2) == 0) {
      map[key] = step;
      ref_map[key] = step;
      set.insert(key);
      ref_set.insert(key);
    } else {
      EXPECT_EQ(map.erase(key), ref_map.erase(key));
      EXPECT_EQ(set.erase(key), ref_set.erase(key));
    }
    if (step % 997 == 0) {
      ASSERT_EQ(std::vector(map.begin(), map.end()), std::vector(ref_map.begin(), ref_map.end()));
      ASSERT_EQ(std::vector(set.begin(), set.end()), std::vector(ref_set.begin(), ref_set.end()));
      PooledMap<std::uint64_t, std::uint64_t> copy = map;  // copies and moves as std::map does
      PooledMap<std::uint64_t, std::uint64_t> moved = std::move(copy);
      EXPECT_EQ(moved, map);
    }
  }
  ASSERT_EQ(std::vector(map.begin(), map.end()), std::vector(ref_map.begin(), ref_map.end()));
}

TEST(NodePool, AFreedNodeIsTheNextOneHandedOut) {
  NodePoolAllocator<std::pair<const int, long>> alloc;
  auto* a = alloc.allocate(1);
  alloc.deallocate(a, 1);
  auto* b = alloc.allocate(1);
  EXPECT_EQ(a, b);
  auto* many = alloc.allocate(4);  // arrays (hash buckets) bypass the pool
  EXPECT_NE(many, b);
  alloc.deallocate(many, 4);
  alloc.deallocate(b, 1);
}

TEST(NodePool, UnorderedMapWithPooledNodesMatchesTheReference) {
  Rng rng(11);
  std::unordered_map<std::uint64_t, int, std::hash<std::uint64_t>, std::equal_to<>,
                     NodePoolAllocator<std::pair<const std::uint64_t, int>>>
      pooled;
  std::map<std::uint64_t, int> ref;
  for (int step = 0; step < 5000; ++step) {
    const std::uint64_t key = rng.below(500);
    if (rng.below(3) != 0) {
      pooled[key] = step;
      ref[key] = step;
    } else {
      EXPECT_EQ(pooled.erase(key), ref.erase(key));
    }
  }
  ASSERT_EQ(pooled.size(), ref.size());
  for (const auto& [key, value] : ref) EXPECT_EQ(pooled.at(key), value);
}

}  // namespace
}  // namespace fraglab::test
