// SnapshotRecorder on a hand-built run, with the expected entries and end state derived from the
// allocator model: a request of 1000 B rounds to 1024 B and is served from a new 2 MiB small-pool
// segment; 3 MiB is a large request below 10 MiB, served from a new 20 MiB segment (§1.2, §1.5);
// a block is carved from the low end of its segment, so it starts at the segment's address.
#include <gtest/gtest.h>

#include <string>

#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/snapshot_export.hpp"
#include "support/events.hpp"
#include "trace/pickle.hpp"

namespace fraglab {
namespace {

using test::alloc;
using test::with_op;
constexpr Bytes kMiB = 1 << 20;

struct Exported {
  std::vector<SnapshotRecorder::Entry> entries;
  std::string pickle;
};

Exported export_run(const Trace& trace, const std::string& spec, Bytes capacity = 80ull << 30) {
  PolicyOnDevice run(spec, device_spec(SimDeviceConfig{.capacity = capacity}));
  SnapshotRecorder recorder(run.device());
  run.device().add_listener(&recorder);
  run.run(trace, {}, {.extra = {&recorder}});
  run.device().remove_listener(&recorder);
  return {recorder.entries(), recorder.snapshot(run.policy())};
}

// Stream 7 hands its 3 MiB block over with a free_requested whose completion the trace never
// shows: it is still pending at the end.
Trace pending_free_run() {
  Trace t;
  t.name = "hand-built";
  t.events = {alloc(1, 1000), alloc(2, 3 * kMiB, 7), with_op(Op::FreeRequested, 2), with_op(Op::Free, 1)};
  return t;
}

TEST(SnapshotRecorder, EntriesFollowPyTorchsOrderAtTheSimulatedAddresses) {
  using A = SnapshotRecorder::Action;
  const Exported out = export_run(pending_free_run(), "pytorch");
  const auto& e = out.entries;
  ASSERT_EQ(e.size(), 7u);
  const A actions[] = {A::SegmentAlloc,  A::Alloc,         A::SegmentAlloc, A::Alloc,
                       A::FreeRequested, A::FreeRequested, A::FreeCompleted};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].action, actions[i]) << i;
  EXPECT_EQ(e[0].size, 2 * kMiB);
  EXPECT_EQ(e[1].addr, e[0].addr);
  EXPECT_EQ(e[1].size, 1000u);  // the requested bytes, as PyTorch records an alloc
  EXPECT_EQ(e[2].size, 20 * kMiB);
  EXPECT_EQ(e[3].addr, e[2].addr);
  EXPECT_EQ(e[3].size, 3 * kMiB);
  EXPECT_EQ(e[2].stream, 7u);  // the segment belongs to the stream of the request that needed it
  EXPECT_EQ(e[3].stream, 7u);
  EXPECT_EQ(e[4].addr, e[3].addr);  // the pending free of the 3 MiB block
  EXPECT_EQ(e[5].addr, e[1].addr);  // then the free of the first one, as a pair
  EXPECT_EQ(e[6].addr, e[1].addr);
  EXPECT_EQ(e[6].size, 1000u);
}

TEST(SnapshotRecorder, SegmentsAtTheEndCarryBlockStates) {
  const Exported out = export_run(pending_free_run(), "pytorch");
  const pickle::PickleDocument doc(out.pickle, "export");
  const auto segments = doc.root().find("segments")->items();
  ASSERT_EQ(segments.size(), 2u);
  // Address order: which comes first depends on the device, so find each by its size.
  const pickle::Value* small = nullptr;
  const pickle::Value* large = nullptr;
  for (const pickle::Value& s : segments) (s.find("total_size")->integer == 2 * kMiB ? small : large) = &s;
  ASSERT_TRUE(small && large);
  EXPECT_EQ(small->find("segment_type")->str(), "small");
  const auto small_blocks = small->find("blocks")->items();
  ASSERT_EQ(small_blocks.size(), 1u);  // freed and merged back into one block
  EXPECT_EQ(small_blocks[0].find("state")->str(), "inactive");
  EXPECT_EQ(small_blocks[0].find("size")->integer, 2 * kMiB);

  EXPECT_EQ(large->find("segment_type")->str(), "large");
  EXPECT_EQ(large->find("stream")->integer, 7);
  EXPECT_EQ(large->find("total_size")->integer, 20 * kMiB);
  EXPECT_EQ(large->find("active_size")->integer, 3 * kMiB);
  EXPECT_EQ(large->find("allocated_size")->integer, 0);  // pending frees are active, not allocated
  const auto blocks = large->find("blocks")->items();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].find("state")->str(), "active_pending_free");
  EXPECT_EQ(blocks[0].find("requested_size")->integer, 3 * kMiB);
  EXPECT_EQ(blocks[1].find("state")->str(), "inactive");
  EXPECT_EQ(blocks[1].find("size")->integer, 17 * kMiB);

  const pickle::Value& settings = *doc.root().find("allocator_settings");
  EXPECT_EQ(settings.find("max_split_size")->integer, -1);  // no limit, as PyTorch writes SIZE_MAX
  EXPECT_FALSE(settings.find("expandable_segments")->boolean);
  EXPECT_EQ(settings.find("roundup_power2_divisions")->dict_size(), 16u);
}

// §5.3: a flush of the cache first completes every pending free. On 50 MiB, the second 30 MiB
// request fits neither beside the first segment nor in it (its block is pending on stream 1), so
// the malloc reaches the retry rung: the pending block completes, its segment is freed, and the
// new segment is allocated. PyTorch records the completion there; the trace's own later
// free_completed adds nothing.
TEST(SnapshotRecorder, ARetryCompletesPendingFreesBeforeItsSegmentFrees) {
  using A = SnapshotRecorder::Action;
  Trace t;
  t.name = "hand-built";
  t.events = {alloc(1, 30 * kMiB, 1), with_op(Op::FreeRequested, 1), alloc(2, 30 * kMiB, 0),
              with_op(Op::FreeCompleted, 1), with_op(Op::Free, 2)};
  const auto e = export_run(t, "pytorch", 50 * kMiB).entries;
  const A actions[] = {A::SegmentAlloc, A::Alloc, A::FreeRequested, A::FreeCompleted, A::SegmentFree,
                       A::SegmentAlloc, A::Alloc, A::FreeRequested, A::FreeCompleted};
  ASSERT_EQ(e.size(), std::size(actions));
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].action, actions[i]) << i;
  EXPECT_EQ(e[3].addr, e[1].addr);  // the completion is the pending block's
  EXPECT_EQ(e[4].addr, e[0].addr);  // then its segment goes
  EXPECT_EQ(e[4].stream, 1u);
  EXPECT_EQ(e[8].addr, e[6].addr);
}

// §5.5: empty_cache() synchronises too: the pending block completes, then its segment is freed.
TEST(SnapshotRecorder, EmptyCacheCompletesPendingFreesFirst) {
  using A = SnapshotRecorder::Action;
  Trace t;
  t.name = "hand-built";
  Event flush;
  flush.op = Op::EmptyCache;
  t.events = {alloc(1, 1000, 1), with_op(Op::FreeRequested, 1), flush, with_op(Op::FreeCompleted, 1)};
  const auto e = export_run(t, "pytorch").entries;
  const A actions[] = {A::SegmentAlloc, A::Alloc, A::FreeRequested, A::FreeCompleted, A::SegmentFree};
  ASSERT_EQ(e.size(), std::size(actions));
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].action, actions[i]) << i;
  EXPECT_EQ(e[4].size, 2 * kMiB);
}

TEST(SnapshotRecorder, OtherPoliciesWriteNoAllocatorSettings) {
  const Exported out = export_run(pending_free_run(), "bestfit");
  const pickle::PickleDocument doc(out.pickle, "export");
  EXPECT_EQ(doc.root().find("allocator_settings"), nullptr);
  EXPECT_EQ(doc.root().find("device_traces")->items().size(), 1u);
}

}  // namespace
}  // namespace fraglab
