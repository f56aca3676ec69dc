// NodeArena / ArenaMap (fraglab/node_pool.hpp): a map whose nodes come from an arena behaves
// exactly as the same std::map with std::allocator (the reference); freed nodes are reused, and
// a node size other than the arena's goes to the heap.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "fraglab/node_pool.hpp"
#include "fraglab/rng.hpp"

namespace fraglab::test {
namespace {

TEST(NodeArena, ArenaMapMatchesStdMapUnderRandomOperations) {
  Rng rng(11);
  NodeArena arena;
  ArenaMap<std::uint64_t, std::uint64_t> map = make_arena_map<std::uint64_t, std::uint64_t>(arena);
  std::map<std::uint64_t, std::uint64_t> ref;
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t key = rng.below(500);
    switch (rng.below(3)) {
      case 0:
        map[key] = static_cast<std::uint64_t>(step);
        ref[key] = static_cast<std::uint64_t>(step);
        break;
      case 1: {  // insert with a hint, as SimDevice does
        auto hint = map.lower_bound(key);
        map.emplace_hint(hint, key, 1);
        ref.emplace(key, 1);
        break;
      }
      default:
        EXPECT_EQ(map.erase(key), ref.erase(key));
    }
    if (step % 997 == 0) {
      ASSERT_EQ(std::vector(map.begin(), map.end()), std::vector(ref.begin(), ref.end()));
    }
  }
  ASSERT_EQ(std::vector(map.begin(), map.end()), std::vector(ref.begin(), ref.end()));
  map.clear();  // every node back to the arena before it goes (the destructor order of an owner)
}

TEST(NodeArena, FreedNodesAreReusedAndNodesAreDistinct) {
  NodeArena arena;
  ArenaMap<int, int> map = make_arena_map<int, int>(arena);
  // 200 nodes span several slabs: every node is a distinct address.
  std::set<const void*> addresses;
  for (int i = 0; i < 200; ++i) addresses.insert(&*map.emplace(i, i).first);
  EXPECT_EQ(addresses.size(), 200u);
  // The node freed last is the next one handed out.
  const void* freed = &*map.find(57);
  map.erase(57);
  EXPECT_EQ(&*map.emplace(1000, 0).first, freed);
}

TEST(NodeArena, ServesOneNodeSizeOnly) {
  NodeArena arena;
  void* a = arena.take(48);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(arena.serves(48));
  EXPECT_FALSE(arena.serves(64));
  EXPECT_EQ(arena.take(64), nullptr);  // another size: the allocator falls back to the heap
  // Through the allocator: a type of another size still gets memory, from the heap.
  struct Big {
    std::uint64_t words[8];  // 64 bytes
  };
  ArenaAllocator<Big> other(arena);
  Big* p = other.allocate(1);
  ASSERT_NE(p, nullptr);
  other.deallocate(p, 1);
  arena.give(a);
  EXPECT_EQ(arena.take(48), a);
}

}  // namespace
}  // namespace fraglab::test
