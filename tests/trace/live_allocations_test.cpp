// LiveAllocations (src/trace/live_allocations.hpp) keeps dense ids (below 1024 + twice the
// allocations seen) in directly indexed pages and every other id in a hash table. Which table an
// id is in must never show: the lifetime rules of trace.hpp, written out again here as a plain
// map, decide every event the same way, including for an id that went to the hash table while it
// was above the bound and is below it by the time it comes back.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "fraglab/trace.hpp"
#include "trace/live_allocations.hpp"

namespace fraglab {
namespace {

// The rules of trace.hpp ("Lifetime rules"), one map entry per live id: what each event is
// refused for, or "" when it is allowed.
class Reference {
 public:
  std::string apply(Op op, AllocId id, std::uint64_t requested) {
    auto it = live_.find(id);
    switch (op) {
      case Op::Alloc:
        if (it != live_.end()) return "alloc of an id that is already live (duplicate live id)";
        live_[id] = {requested, false};
        return "";
      case Op::Free:
        if (it == live_.end()) return "free of an id that is not live (unknown id or double free)";
        if (it->second.free_requested)
          return "free of an id whose free was already requested (expected free_completed)";
        released = it->second.requested;
        live_.erase(it);
        return "";
      case Op::FreeRequested:
        if (it == live_.end()) return "free_requested of an id that is not live (unknown id or double free)";
        if (it->second.free_requested) return "free_requested twice for the same allocation";
        it->second.free_requested = true;
        return "";
      case Op::FreeCompleted:
        if (it == live_.end()) return "free_completed of an id that is not live (unknown id or double free)";
        if (!it->second.free_requested) return "free_completed of an allocation whose free was never requested";
        released = it->second.requested;
        live_.erase(it);
        return "";
      default:
        return "";
    }
  }
  std::uint64_t requested(AllocId id) const {
    auto it = live_.find(id);
    return it == live_.end() ? 0 : it->second.requested;
  }
  std::size_t size() const { return live_.size(); }
  std::uint64_t released = 0;

 private:
  struct Live {
    std::uint64_t requested;
    bool free_requested;
  };
  std::unordered_map<AllocId, Live> live_;
};

std::string outcome(const char* what) { return what == nullptr ? "" : what; }

TEST(LiveAllocations, AnIdHashedAboveTheBoundIsStillFoundOnceTheBoundPassesIt) {
  detail::LiveAllocations live;
  // A fresh table pages ids below 1024; 5000 goes to the hash table.
  ASSERT_EQ(live.apply(Op::Alloc, 5000, 77), nullptr);
  // 2,000 more allocations lift the bound to 1024 + 2 * 2001 = 5026, past 5000.
  for (AllocId id = 0; id < 2000; ++id) ASSERT_EQ(live.apply(Op::Alloc, id, id + 1), nullptr) << id;
  EXPECT_EQ(live.size(), 2001u);
  // 5000 is now below the bound, and its page (ids 4096..5119) does not exist: it must still be
  // found in the hash table, not allocated again in a new page.
  EXPECT_EQ(outcome(live.apply(Op::Alloc, 5000, 1)), "alloc of an id that is already live (duplicate live id)");
  EXPECT_EQ(live.requested(5000), 77u);
  // Its page now exists (4100 is paged), and 5000 is still only in the hash table.
  ASSERT_EQ(live.apply(Op::Alloc, 4100, 5), nullptr);
  EXPECT_EQ(outcome(live.apply(Op::Alloc, 5000, 1)), "alloc of an id that is already live (duplicate live id)");
  ASSERT_EQ(live.apply(Op::FreeRequested, 5000, 0), nullptr);
  EXPECT_EQ(outcome(live.apply(Op::Free, 5000, 0)),
            "free of an id whose free was already requested (expected free_completed)");
  ASSERT_EQ(live.apply(Op::FreeCompleted, 5000, 0), nullptr);
  EXPECT_EQ(live.last_released(), 77u);
  EXPECT_EQ(live.requested(5000), 0u);
  // Gone from both tables: allocated again, it goes to its page.
  ASSERT_EQ(live.apply(Op::Alloc, 5000, 9), nullptr);
  EXPECT_EQ(live.requested(5000), 9u);
  EXPECT_EQ(live.size(), 2002u);
}

TEST(LiveAllocations, APageEmptiedAndFilledAgainKeepsNothingOfItsPast) {
  detail::LiveAllocations live;
  for (AllocId id = 0; id < 1024; ++id) ASSERT_EQ(live.apply(Op::Alloc, id, 1000 + id), nullptr);
  ASSERT_EQ(live.apply(Op::FreeRequested, 3, 0), nullptr);
  for (AllocId id = 0; id < 1024; ++id) {
    ASSERT_EQ(live.apply(id == 3 ? Op::FreeCompleted : Op::Free, id, 0), nullptr) << id;
    EXPECT_EQ(live.last_released(), 1000 + id);
  }
  EXPECT_EQ(live.size(), 0u);
  // The first page was dropped when its last id was freed (and may be reused for another).
  for (AllocId id : {0u, 3u, 1023u}) {
    EXPECT_EQ(live.requested(id), 0u);
    EXPECT_EQ(outcome(live.apply(Op::Free, id, 0)), "free of an id that is not live (unknown id or double free)");
    EXPECT_EQ(outcome(live.apply(Op::FreeRequested, id, 0)),
              "free_requested of an id that is not live (unknown id or double free)");
    EXPECT_EQ(outcome(live.apply(Op::FreeCompleted, id, 0)),
              "free_completed of an id that is not live (unknown id or double free)");
  }
  ASSERT_EQ(live.apply(Op::Alloc, 2000, 5), nullptr);  // a second page, from the dropped one
  ASSERT_EQ(live.apply(Op::Alloc, 3, 6), nullptr);     // the first page again
  EXPECT_EQ(outcome(live.apply(Op::FreeCompleted, 3, 0)),
            "free_completed of an allocation whose free was never requested");
  EXPECT_EQ(live.requested(3), 6u);
  EXPECT_EQ(live.requested(2000), 5u);
  EXPECT_EQ(live.requested(2001), 0u);
  EXPECT_EQ(live.size(), 2u);
}

TEST(LiveAllocations, InitialAllocationsFollowTheSameRules) {
  detail::LiveAllocations live;
  EXPECT_TRUE(live.add_initial(7, 100, /*free_requested=*/true));
  EXPECT_TRUE(live.add_initial(std::uint64_t{1} << 63, 200, false));
  EXPECT_FALSE(live.add_initial(7, 1, false));
  EXPECT_FALSE(live.add_initial(std::uint64_t{1} << 63, 1, true));
  EXPECT_EQ(outcome(live.apply(Op::Free, 7, 0)),
            "free of an id whose free was already requested (expected free_completed)");
  ASSERT_EQ(live.apply(Op::FreeCompleted, 7, 0), nullptr);
  EXPECT_EQ(live.last_released(), 100u);
  ASSERT_EQ(live.apply(Op::Free, std::uint64_t{1} << 63, 0), nullptr);
  EXPECT_EQ(live.last_released(), 200u);
  EXPECT_EQ(live.size(), 0u);
}

TEST(LiveAllocations, EveryOutcomeMatchesTheRulesUnderRandomEvents) {
  // Dense ids around the moving bound, ids far above it, and a few huge ones; every op, often on
  // ids that are not live, so every message is exercised from both tables.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    detail::LiveAllocations live;
    Reference reference;
    std::mt19937_64 rng(seed);
    AllocId next = 0;  // allocations counted so far, roughly where the bound is
    for (int step = 0; step < 300000; ++step) {
      AllocId id;
      switch (rng() % 4) {
        case 0:
          id = next;
          break;
        case 1:
          id = rng() % (next + 1);
          break;
        case 2:
          id = 1024 + 2 * next + rng() % 4096;  // just above the bound: hashed, paged later
          break;
        default:
          id = rng() % 8 == 0 ? rng() : rng() % (4 * next + 8192);
          break;
      }
      const Op op = static_cast<Op>(rng() % 4 == 0 ? rng() % 4 : rng() % 2);  // alloc and free most
      const std::uint64_t requested = op == Op::Alloc ? 1 + rng() % 100000 : 0;
      const std::string expected = reference.apply(op, id, requested);
      ASSERT_EQ(outcome(live.apply(op, id, requested)), expected) << "seed " << seed << " step " << step;
      if (op == Op::Alloc && expected.empty()) ++next;
      if ((op == Op::Free || op == Op::FreeCompleted) && expected.empty()) {
        ASSERT_EQ(live.last_released(), reference.released);
      }
      ASSERT_EQ(live.size(), reference.size());
      if (step % 1000 == 0) {
        for (AllocId probe = 0; probe < next + 64; probe += 1 + rng() % 16)
          ASSERT_EQ(live.requested(probe), reference.requested(probe)) << probe;
      }
    }
  }
}

}  // namespace
}  // namespace fraglab
