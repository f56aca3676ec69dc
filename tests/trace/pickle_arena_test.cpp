// The pickle arena keeps one released chunk per thread for the next document (pickle.hpp Arena,
// kMaxSpareChunk), so that parsing again does not have the kernel fault in and zero fresh pages.
// These tests pin who may get that chunk: the next arena of the same thread whose first request
// fits, never a live document, never another thread, never a chunk above the limit. Addresses are
// compared as integers (the arena that held them is gone).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

#include "support/pickle_bytes.hpp"
#include "trace/pickle.hpp"

namespace fraglab::pickle {
namespace {

using testing::from_hex;

constexpr std::size_t kSmall = 64 * 1024;

// Where an arena's first allocation lands.
std::uintptr_t first_allocation(Arena& arena) { return reinterpret_cast<std::uintptr_t>(arena.allocate(16)); }

// Starts from nothing kept, then has a 64 KiB chunk kept: returns where it starts.
std::uintptr_t keep_a_small_chunk() {
  Arena::release_spare_chunk();
  Arena a(kSmall);
  return first_allocation(a);
}

TEST(PickleArena, AReleasedChunkServesTheNextArenaOfTheThread) {
  const std::uintptr_t first = keep_a_small_chunk();
  Arena b(kSmall);
  EXPECT_EQ(first_allocation(b), first);
}

TEST(PickleArena, AKeptChunkTooSmallForTheRequestIsLeftAndLaterReplacedByABiggerOne) {
  const std::uintptr_t small = keep_a_small_chunk();
  std::uintptr_t big = 0;
  {
    Arena b(16 * kSmall);  // the kept 64 KiB chunk cannot serve it
    big = first_allocation(b);
    EXPECT_NE(big, small);
  }
  // The bigger chunk is kept now: a small request gets it.
  Arena c(kSmall);
  EXPECT_EQ(first_allocation(c), big);
}

TEST(PickleArena, ChunksAboveTheLimitAreNotKept) {
  const std::uintptr_t small = keep_a_small_chunk();
  {
    Arena huge(Arena::kMaxSpareChunk + 1);  // address space only: nothing is written
    first_allocation(huge);
  }
  // The 64 KiB chunk is still the kept one: the huge chunk went back to the system.
  Arena c(kSmall);
  EXPECT_EQ(first_allocation(c), small);
}

TEST(PickleArena, ALiveArenaIsNeverHandedOut) {
  Arena::release_spare_chunk();
  Arena live(kSmall);
  const std::uintptr_t held = first_allocation(live);
  Arena other(kSmall);
  EXPECT_NE(first_allocation(other), held);
}

TEST(PickleArena, EachThreadKeepsItsOwnChunk) {
  const std::uintptr_t mine = keep_a_small_chunk();
  std::uintptr_t theirs = 0;
  std::thread([&] {
    Arena b(kSmall);  // this thread has kept nothing yet
    theirs = first_allocation(b);
  }).join();  // its kept chunk is freed as the thread ends (LeakSanitizer would report it)
  EXPECT_NE(theirs, mine);
  Arena c(kSmall);
  EXPECT_EQ(first_allocation(c), mine);
}

// Documents parsed in turn into the same reused memory read right, and one still alive is not
// disturbed by those parsed and destroyed after it. Both pickles are CPython 3.11's
// pickle.dumps(..., protocol=4) of the dicts named below.
TEST(PickleArena, DocumentsInReusedMemoryReadRightAndALiveOneIsUntouched) {
  const std::string first = from_hex(  // {'a': [1, 2], 's': 'xyz'}
      "8004951b000000000000007d94288c0161945d94284b014b02658c0173948c0378797a94752e");
  const std::string second = from_hex(  // {'b': [3], 's': 'uvwxyz', 't': (4, 5)}
      "80049525000000000000007d94288c0162945d944b03618c0173948c0675767778797a948c0174944b044b0586"
      "94752e");
  Arena::release_spare_chunk();
  PickleDocument kept(first, "first.pickle");
  for (int round = 0; round < 3; ++round) {
    PickleDocument doc(second, "second.pickle");  // from round 1 on, in the last round's chunk
    const Value& root = doc.root();
    ASSERT_TRUE(root.is_dict());
    EXPECT_EQ(root.dict_size(), 3u);
    ASSERT_NE(root.find("b"), nullptr);
    ASSERT_EQ(root.find("b")->items().size(), 1u);
    EXPECT_EQ(root.find("b")->items()[0].integer, 3);
    EXPECT_EQ(root.find("s")->str(), "uvwxyz");
    ASSERT_EQ(root.find("t")->kind, Kind::Tuple);
    ASSERT_EQ(root.find("t")->items().size(), 2u);
    EXPECT_EQ(root.find("t")->items()[1].integer, 5);
    EXPECT_EQ(root.find("a"), nullptr);
  }
  const Value& root = kept.root();
  ASSERT_TRUE(root.is_dict());
  EXPECT_EQ(root.dict_size(), 2u);
  auto a = root.find("a")->items();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].integer, 1);
  EXPECT_EQ(a[1].integer, 2);
  EXPECT_EQ(root.find("s")->str(), "xyz");
}

}  // namespace
}  // namespace fraglab::pickle
