// Policy::allocate_into, which the Replayer calls at every alloc: the same block allocate() hands
// out, written into the caller's slot; on OOM false and the slot left as it was. pytorch
// overrides it; nocache has the default (allocate() copied through).
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "fraglab/policy.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/types.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

constexpr Bytes kMiB = 1024 * 1024;
const Block kUntouched{0xdead, 7, 3, 9, 42};

void expect_same(const Block& a, const Block& b) {
  EXPECT_EQ(a.addr, b.addr);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.requested, b.requested);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.cookie, b.cookie);
}

void expect_untouched(const Block& b) { expect_same(b, kUntouched); }

// Two identical policies on identical devices: one asked through allocate(), one through
// allocate_into(), for the same requests; every block must match.
void check_matches_allocate(const char* spec) {
  SimDevice device_a(SimDeviceConfig{64 * kMiB, 0});
  SimDevice device_b(SimDeviceConfig{64 * kMiB, 0});
  std::unique_ptr<Policy> a = create_policy(spec, device_a);
  std::unique_ptr<Policy> b = create_policy(spec, device_b);
  for (const Bytes size : {Bytes{1}, Bytes{1000}, 3 * kMiB, 5 * kMiB + 1, Bytes{0}}) {
    SCOPED_TRACE(size);
    const std::optional<Block> expected = a->allocate(size, 0);
    ASSERT_TRUE(expected.has_value());
    Block out = kUntouched;
    ASSERT_TRUE(b->allocate_into(size, 0, out));
    expect_same(out, *expected);
    EXPECT_EQ(out.requested, size);
  }
  // More than the 64 MiB device holds: out of memory, the slot is not written.
  Block out = kUntouched;
  EXPECT_FALSE(b->allocate_into(100 * kMiB, 0, out));
  expect_untouched(out);
  EXPECT_EQ(b->counters().num_ooms, 1u);
}

TEST(AllocateInto, PytorchHandsOutWhatAllocateDoes) { check_matches_allocate("pytorch"); }
TEST(AllocateInto, PytorchExpandableHandsOutWhatAllocateDoes) {
  check_matches_allocate("pytorch:expandable_segments:True");
}
TEST(AllocateInto, DefaultHandsOutWhatAllocateDoes) { check_matches_allocate("nocache"); }

TEST(AllocateInto, PytorchRoundsAsAllocatorModelSaysIntoTheSlot) {
  // allocator-model §1: a 1-byte request is a 512-byte block carved from the low end of a new
  // 2 MiB small-pool segment, which the empty SimDevice places at its base address.
  SimDevice device(SimDeviceConfig{64 * kMiB, 0});
  std::unique_ptr<Policy> policy = create_policy("pytorch", device);
  Block out = kUntouched;
  ASSERT_TRUE(policy->allocate_into(1, 5, out));
  EXPECT_EQ(out.addr, SimDevice::kBaseAddress);
  EXPECT_EQ(out.size, 512u);
  EXPECT_EQ(out.requested, 1u);
  EXPECT_EQ(out.stream, 5u);
}

// offline overrides it too: the planned block of each call, in call order. Greedy by size puts
// the 3 MiB request at offset 0 and the 1000-byte one (1024 with the 512-byte alignment) on top
// of it, since their lifetimes overlap (greedy_plan.hpp); the first call is the 1000-byte one.
TEST(AllocateInto, OfflineHandsOutThePlannedBlockIntoTheSlot) {
  const Trace trace = make_trace({alloc(1, 1000), alloc(2, 3 * kMiB, 4), free_of(1), free_of(2)});
  SimDevice device(SimDeviceConfig{64 * kMiB, 0});
  std::unique_ptr<Policy> policy = create_policy("offline", device);
  policy->prepare(trace);
  Block out = kUntouched;
  ASSERT_TRUE(policy->allocate_into(1000, 0, out));
  expect_same(out, Block{SimDevice::kBaseAddress + 3 * kMiB, 1024, 1000, 0, 0});
  ASSERT_TRUE(policy->allocate_into(3 * kMiB, 4, out));
  expect_same(out, Block{SimDevice::kBaseAddress, 3 * kMiB, 3 * kMiB, 4, 1});
}

// A plan larger than the device: every call is out of memory, the slot is not written.
TEST(AllocateInto, OfflineOutOfMemoryLeavesTheSlot) {
  const Trace trace = make_trace({alloc(1, 3 * kMiB), alloc(2, 3 * kMiB), free_of(1), free_of(2)});
  SimDevice device(SimDeviceConfig{4 * kMiB, 0});
  std::unique_ptr<Policy> policy = create_policy("offline", device);
  policy->prepare(trace);
  Block out = kUntouched;
  EXPECT_FALSE(policy->allocate_into(3 * kMiB, 0, out));
  expect_untouched(out);
  EXPECT_EQ(policy->counters().num_ooms, 1u);
}

}  // namespace
}  // namespace fraglab::test
