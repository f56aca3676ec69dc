// InvariantChecker: each invariant is shown to catch a policy that breaks it, and to stay quiet
// for one that keeps it. The broken policies below are deliberately wrong in one way each.
#include <gtest/gtest.h>

#include "fraglab/invariants.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

using test::alloc;
using test::with_op;

// One 64 MiB malloc'd arena, blocks handed out by a bump pointer that a test can bend.
class BumpPolicy : public Policy {
 public:
  explicit BumpPolicy(Device& device) : device_(device) {}
  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    if (!arena_) arena_ = device_.malloc(64 * MiB);
    Block b{*arena_ + next_, round(size), size, stream, 0};
    next_ += advance(b.size);
    return b;
  }
  void free_requested(const Block&) override {}
  void free_completed(const Block&) override {}
  PolicyCounters counters() const override { return counters_; }

 protected:
  virtual Bytes round(Bytes size) { return (size + 511) / 512 * 512; }
  virtual Bytes advance(Bytes block_size) { return block_size; }
  Device& device_;
  std::optional<Addr> arena_;
  Bytes next_ = 0;
  PolicyCounters counters_;
};

struct OverlappingPolicy final : BumpPolicy {  // hands out every block at the same address
  using BumpPolicy::BumpPolicy;
  Bytes advance(Bytes) override { return 0; }
};
struct ShortPolicy final : BumpPolicy {  // blocks 512 bytes short of the request
  using BumpPolicy::BumpPolicy;
  Bytes round(Bytes size) override { return size > 512 ? size - 512 : size; }
};
struct RunawayPolicy final : BumpPolicy {  // walks off the end of its arena
  using BumpPolicy::BumpPolicy;
  Bytes advance(Bytes) override { return 40 * MiB; }
};
struct EagerReleasePolicy final : BumpPolicy {  // gives the arena back while blocks are live
  using BumpPolicy::BumpPolicy;
  void free_requested(const Block&) override {
    if (arena_) device_.free(*arena_);
    arena_.reset();
  }
};

struct FlushingPolicy final : BumpPolicy {  // same address each time, after a cache flush
  using BumpPolicy::BumpPolicy;
  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    if (arena_) ++counters_.num_alloc_retries;
    return BumpPolicy::allocate(size, stream);
  }
  Bytes advance(Bytes) override { return 0; }
};

struct FreeListingPolicy : BumpPolicy {  // lists its whole arena as free, live blocks included
  using BumpPolicy::BumpPolicy;
  std::vector<SegmentView> segments() const override {
    if (!arena_) return {};
    return {SegmentView{*arena_, 64 * MiB, 0, "arena", false, {{*arena_, 64 * MiB, false}}}};
  }
};
struct HonestListingPolicy final : BumpPolicy {  // what it handed out, then the free rest
  using BumpPolicy::BumpPolicy;
  std::vector<SegmentView> segments() const override {
    if (!arena_) return {};
    return {SegmentView{
        *arena_, 64 * MiB, 0, "arena", false, {{*arena_, next_, true}, {*arena_ + next_, 64 * MiB - next_, false}}}};
  }
};

template <typename P>
std::vector<std::string> check(const std::vector<Event>& events) {
  Trace t;
  t.events = events;
  SimDevice device;
  P policy(device);
  InvariantChecker checker(device);
  Replayer replayer(t, policy, device);
  replayer.add_observer(&checker);
  replayer.run("test");
  EXPECT_EQ(checker.violation_count() == 0, checker.ok());
  return checker.violations();
}

TEST(InvariantChecker, QuietForACorrectPolicy) {
  EXPECT_TRUE(check<BumpPolicy>({alloc(1, 1000), alloc(2, 5000), with_op(Op::Free, 1), alloc(3, 1)}).empty());
}

TEST(InvariantChecker, CatchesOverlappingLiveBlocks) {
  const auto v = check<OverlappingPolicy>({alloc(1, 1000), alloc(2, 1000)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0],
            "event 1 (alloc id=2): block [0x7f0000000000, +1024) overlaps live block id=1 [0x7f0000000000, +1024)");
}

TEST(InvariantChecker, OverlapWithAFreedBlockIsFine) {
  EXPECT_TRUE(check<OverlappingPolicy>({alloc(1, 1000), with_op(Op::Free, 1), alloc(2, 1000)}).empty());
}

TEST(InvariantChecker, ABlockAwaitingFreeCompletionIsStillLive) {
  const auto v = check<OverlappingPolicy>(
      {alloc(1, 1000), with_op(Op::FreeRequested, 1), alloc(2, 1000), with_op(Op::FreeCompleted, 1)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("(free not completed)"), std::string::npos) << v[0];
}

// PyTorch's flush synchronises every stream, so it may reuse a block before free_completed.
TEST(InvariantChecker, AFlushFreesBlocksAwaitingFreeCompletion) {
  EXPECT_TRUE(check<FlushingPolicy>(
                  {alloc(1, 1000), with_op(Op::FreeRequested, 1), alloc(2, 1000), with_op(Op::FreeCompleted, 1)})
                  .empty());
}

TEST(InvariantChecker, CatchesABlockSmallerThanTheRequest) {
  const auto v = check<ShortPolicy>({alloc(1, 4096)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], "event 0 (alloc id=1): block [0x7f0000000000, +3584) is smaller than the 4096 bytes requested");
}

TEST(InvariantChecker, CatchesABlockOutsideBackedMemory) {
  // Blocks at arena + 0, + 40 MiB (inside the 64 MiB arena), + 80 MiB (outside).
  const auto v = check<RunawayPolicy>({alloc(1, 1 * MiB), alloc(2, 1 * MiB), alloc(3, 1 * MiB)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], "event 2 (alloc id=3): block [0x7f0005000000, +1048576) lies outside the memory the device backs");
}

// 7.: 1000 bytes are held in a 1024-byte block, and the policy calls all 64 MiB of its arena free.
TEST(InvariantChecker, CatchesHeldBytesListedAsFree) {
  const auto v = check<FreeListingPolicy>({alloc(1, 1000)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0],
            "event 0 (alloc id=1): the held blocks (1024 bytes) and the free pieces the policy lists (67108864 bytes) "
            "exceed the 67108864 bytes reserved");
  // A pending block is still held: listing it as free is the same fault.
  EXPECT_TRUE(check<HonestListingPolicy>({alloc(1, 1000), with_op(Op::FreeRequested, 1), alloc(2, 5000),
                                          with_op(Op::FreeCompleted, 1), with_op(Op::Free, 2)})
                  .empty());
}

TEST(InvariantChecker, CatchesDeviceMemoryReleasedUnderALiveBlock) {
  const auto v = check<EagerReleasePolicy>({alloc(1, 1000), alloc(2, 1000), with_op(Op::FreeRequested, 1)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0],
            "event 2 (free_requested id=1): device free of [0x7f0000000000, +67108864) under live block id=1 "
            "[0x7f0000000000, +1024)");
}

}  // namespace
}  // namespace fraglab
