// offline: hand-derived offsets of the greedy-by-size plan, the arena, OOM and the stats.
//
// Facts used below (policies/offline/greedy_plan.hpp, fraglab/planned_requests.hpp, SimDevice):
//  - time is counted in event positions: an initial allocation begins at 0, the alloc of event i
//    at i + 1; a request ends at (index of the event completing its free) + 1, or at events + 1
//    when never freed; two requests overlap iff their [begin, end) overlap;
//  - sizes round up to 512 B (u = 512 below), at least one unit;
//  - placement order: size desc, then longer [begin, end) first, then request order; each
//    request goes to the smallest gap (lowest offset on ties) below the top of the placed
//    requests that overlap it in time, else to that top;
//  - the arena is one malloc of the heap size in prepare(), before event 0, on a fresh device:
//    at kBase (the bump pointer's start; 2 MiB aligned); so a block's address is B + offset and
//    reserved = the heap size (a multiple of 512) from the start, with no device call during the
//    events.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "fraglab/planned_requests.hpp"
#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"
#include "offline/greedy_plan.hpp"
#include "offline/occupancy_index.hpp"
#include "policies/offline_reference.hpp"
#include "policies/rig.hpp"
#include "support/real_traces.hpp"

namespace fraglab::test {
namespace {

constexpr Addr B = kBase;
constexpr Bytes u = 512;

void expect_clean_and_served(const PolicyRun& run) {
  expect_clean(run);
  EXPECT_EQ(run.result.metrics.num_ooms, 0u);
}

std::int64_t stat(const ReplayResult& result, const std::string& key) {
  for (const auto& [name, value] : result.detailed_stats) {
    if (name == key) return value;
  }
  ADD_FAILURE() << "no detailed stat " << key;
  return -1;
}

// A plan's offsets and sizes as std::vectors (the plan's vectors have an allocator that leaves
// them unwritten until the planner writes them).
std::vector<Bytes> offsets_of(const offline::GreedyPlan& plan) { return {plan.offsets.begin(), plan.offsets.end()}; }
std::vector<Bytes> sizes_of(const offline::GreedyPlan& plan) { return {plan.sizes.begin(), plan.sizes.end()}; }

PlannedRequest request(std::uint64_t begin, std::uint64_t end, Bytes size) {
  PlannedRequest r;
  r.begin = begin;
  r.end = end;
  r.size = size;
  return r;
}

// ---- the policy on hand-built traces ----------------------------------------------------------

TEST(Offline, GreedyBySizeBeatsFirstFitInTimeOrder) {
  // Intervals: A 1K [1,3), B 2K [2,5), C 2K [4,6).
  // First fit in time order (what an online allocator does): A at 0, B at 1K (A live), free A;
  // C (2K) does not fit the 1K hole at 0, so C at 3K: 5K in all.
  // Greedy by size: B (2K, lives 3) first -> 0. C (2K, lives 2) overlaps B (position 4) -> the
  // top of B: 2K. A (1K) overlaps B (position 2) but not C -> occupied [0,2K), no gap -> 2K.
  // Heap 4K = the most bytes live (B + C at position 4).
  const Trace t = make_trace({
      alloc(1, 1 * KiB),  // 0: A
      alloc(2, 2 * KiB),  // 1: B
      free_of(1),         // 2
      alloc(3, 2 * KiB),  // 3: C
      free_of(2),         // 4
      free_of(3),         // 5
  });
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B + 2 * KiB);
  EXPECT_EQ(run.addr(1), B);
  EXPECT_EQ(run.addr(3), B + 2 * KiB);
  EXPECT_EQ(run.result.metrics.peak_reserved, 4 * KiB);
  EXPECT_EQ(run.result.metrics.reserved_at_start, 4 * KiB);  // the arena is there before event 0
  EXPECT_EQ(run.reserved_at_end, 4 * KiB);                   // ... and held to the end
  EXPECT_TRUE(run.calls.empty());                            // no device call during the events
  EXPECT_EQ(run.result.metrics.num_device_alloc, 0u);
  EXPECT_EQ(run.result.metrics.num_device_free, 0u);
  EXPECT_EQ(stat(run.result, "plan_heap_bytes"), 4096);
  EXPECT_EQ(stat(run.result, "lower_bound_bytes"), 4096);
  EXPECT_EQ(stat(run.result, "plan_overhead_ppm"), 0);
  EXPECT_EQ(stat(run.result, "planned_buffers"), 3);
}

TEST(Offline, BestFitTakesTheSmallestGapNotTheLowest) {
  // Intervals (u = 512 B): K 8u [1,5), M1 6u [2,9), N 4u [3,6), M2 3u [4,10), S 2u [7,8).
  // Order K, M1, N, M2, S (sizes differ).
  //  K -> 0: [0,8u).
  //  M1 overlaps K -> top: [8u,14u).
  //  N overlaps K and M1 -> [0,14u) taken -> top: [14u,18u).
  //  M2 overlaps K (position 4), M1, N -> [0,18u) taken -> top: [18u,21u).
  //  S overlaps M1 and M2 only (K ended at 5, N at 6) -> taken [8u,14u) and [18u,21u): gaps
  //  [0,8u) (8u) and [14u,18u) (4u) both fit 2u; the smaller wins -> 14u (first fit: 0).
  // Heap 21u = K + M1 + N + M2 live at position 4.
  const Trace t = make_trace({
      alloc(1, 8 * u),  // 0: K
      alloc(2, 6 * u),  // 1: M1
      alloc(3, 4 * u),  // 2: N
      alloc(4, 3 * u),  // 3: M2
      free_of(1),       // 4
      free_of(3),       // 5
      alloc(5, 2 * u),  // 6: S
      free_of(5),       // 7
      free_of(2),       // 8
      free_of(4),       // 9
  });
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 8 * u);
  EXPECT_EQ(run.addr(2), B + 14 * u);
  EXPECT_EQ(run.addr(3), B + 18 * u);
  EXPECT_EQ(run.addr(6), B + 14 * u);
  EXPECT_EQ(run.result.metrics.peak_reserved, 21 * u);
  EXPECT_EQ(stat(run.result, "lower_bound_bytes"), static_cast<std::int64_t>(21 * u));
}

TEST(Offline, EqualSizesGoLongerLifetimeFirstThenRequestOrder) {
  // All 1K. Intervals: A [1,3), B [2,6) (never freed: 5 events -> end 6), C [4,5); P [1,3) and
  // Q [2,4) in a second trace.
  // Trace 1: B lives longest -> placed first at 0; A overlaps B -> 1K; C overlaps B only -> the
  // top of B: 1K. (Request order would have given A 0, B 1K.)
  const Trace t1 = make_trace({alloc(1, 1 * KiB), alloc(2, 1 * KiB), free_of(1), alloc(3, 1 * KiB), free_of(3)});
  const PolicyRun run1 = run_policy("offline", t1);
  expect_clean_and_served(run1);
  EXPECT_EQ(run1.addr(0), B + 1 * KiB);
  EXPECT_EQ(run1.addr(1), B);
  EXPECT_EQ(run1.addr(3), B + 1 * KiB);
  EXPECT_EQ(run1.result.metrics.peak_reserved, 2 * KiB);
  // Trace 2: same size and same lifetime (2): request order decides, P first at 0, Q at 1K.
  const Trace t2 = make_trace({alloc(1, 1 * KiB), alloc(2, 1 * KiB), free_of(1), free_of(2)});
  const PolicyRun run2 = run_policy("offline", t2);
  expect_clean_and_served(run2);
  EXPECT_EQ(run2.addr(0), B);
  EXPECT_EQ(run2.addr(1), B + 1 * KiB);
}

TEST(Offline, ZeroByteRequestsTakeOneUnitEach) {
  // Both 0 B -> 512 B blocks (a block needs an address of its own). A [1,3), B [2,4): same size
  // and lifetime, request order: A at 0, B overlaps A -> 512.
  const Trace t = make_trace({alloc(1, 0), alloc(2, 0), free_of(1), free_of(2)});
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 512);
  EXPECT_EQ(run.blocks[0]->size, 512u);
  EXPECT_EQ(run.blocks[0]->requested, 0u);
  EXPECT_EQ(run.result.metrics.peak_reserved, 1024u);
}

TEST(Offline, DeferredFreeEndsAtFreeCompleted) {
  // A [1,4) (free requested at 1, completed at 3), B [3,6), C [5,7); all 1K (2u).
  // Same size; lifetimes A 3, B 3, C 2: order A, B, C.
  //  A -> 0. B overlaps A (position 3: A's free has not completed) -> 1K. C overlaps B only ->
  //  the gap [0,1K) below B fits -> 0.
  // Had A ended at its free_requested (position 2), B would have taken 0.
  const Trace t = make_trace({
      alloc(1, 1 * KiB),              // 0: A
      with_op(Op::FreeRequested, 1),  // 1
      alloc(2, 1 * KiB),              // 2: B
      with_op(Op::FreeCompleted, 1),  // 3
      alloc(3, 1 * KiB),              // 4: C
      free_of(2),                     // 5
      free_of(3),                     // 6
  });
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(2), B + 1 * KiB);
  EXPECT_EQ(run.addr(4), B);
  EXPECT_EQ(run.result.metrics.peak_reserved, 2 * KiB);
}

TEST(Offline, NeverFreedRequestsStayTakenToTheEnd) {
  // A 2K [1,6) never freed (5 events), B 1K [2,3), C 1K [4,5).
  //  A -> 0. B (lifetime 1) before C (lifetime 1, later request): B overlaps A -> 2K. C overlaps
  //  A only -> top of A: 2K (B's place, B is gone).
  const Trace t = make_trace({alloc(1, 2 * KiB), alloc(2, 1 * KiB), free_of(2), alloc(3, 1 * KiB), free_of(3)});
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(1), B + 2 * KiB);
  EXPECT_EQ(run.addr(3), B + 2 * KiB);
  EXPECT_EQ(run.result.metrics.peak_reserved, 3 * KiB);
  EXPECT_EQ(run.reserved_at_end, 3 * KiB);
}

TEST(Offline, InitialAllocationsAreLiveFromTheStart) {
  // Initial I1 3000 B (6u) freed at event 0 -> [0,1); I2 1000 B (2u), free requested before the
  // trace, completed at event 3 -> [0,4). Event 1 allocates A 2K (4u) -> [2,3).
  // Order I1 (6u), A (4u), I2 (2u):
  //  I1 -> 0: [0,6u). A does not overlap I1 (it ended at 1) -> 0: [0,4u).
  //  I2 overlaps I1 and A -> [0,6u) taken -> top: [6u,8u).
  // Heap 8u = I1 + I2 at position 0 (A + I2 = 6u at position 2).
  Trace t = make_trace({
      free_of(1),                     // 0
      alloc(3, 2 * KiB),              // 1: A
      free_of(3),                     // 2
      with_op(Op::FreeCompleted, 2),  // 3
  });
  t.initial.allocations = {InitialAllocation{1, 0, 3000, 0, 0, false}, InitialAllocation{2, 0, 1000, 0, 0, true}};

  struct InitialBlocks final : ReplayObserver {
    std::vector<Block> blocks;
    void on_initial_block(const InitialAllocation&, const Block& block) override { blocks.push_back(block); }
    void on_event(const ReplayPoint&) override {}
  } initial;
  SimDevice device(SimDeviceConfig{80 * GiB, 0});
  std::unique_ptr<Policy> policy = create_policy("offline", device);
  InvariantChecker checker(device);
  BlockLog blocks;
  Replayer replayer(t, *policy, device);
  replayer.add_observer(&initial);
  replayer.add_observer(&checker);
  replayer.add_observer(&blocks);
  const ReplayResult result = replayer.run("offline");
  EXPECT_TRUE(checker.violations().empty()) << checker.violations().front();
  ASSERT_EQ(initial.blocks.size(), 2u);
  EXPECT_EQ(initial.blocks[0].addr, B);
  EXPECT_EQ(initial.blocks[0].size, 6 * u);
  EXPECT_EQ(initial.blocks[1].addr, B + 6 * u);
  EXPECT_EQ(initial.blocks[1].size, 2 * u);
  ASSERT_TRUE(blocks.blocks[1].has_value());
  EXPECT_EQ(blocks.blocks[1]->addr, B);
  EXPECT_EQ(result.metrics.reserved_at_start, 8 * u);
  EXPECT_EQ(result.metrics.peak_reserved, 8 * u);
  EXPECT_EQ(result.metrics.num_device_alloc, 0u);
  EXPECT_EQ(stat(result, "lower_bound_bytes"), static_cast<std::int64_t>(8 * u));
}

TEST(Offline, GreedyCanMissTheLowerBoundAndTheStatsSayBy) {
  // Intervals (u = 512 B; events 1-2 are empty_cache, which the policy ignores):
  // r0 4u [1,5), r1 4u [4,8), r2 3u [6,10), r3 3u [7,9).
  // Order: r0 and r1 tie on size and lifetime (4) -> r0 first; then r2 (lifetime 4), r3 (2).
  //  r0 -> 0: [0,4u). r1 overlaps r0 -> [4u,8u).
  //  r2 overlaps r1 only -> gap [0,4u) fits 3u -> [0,3u).
  //  r3 overlaps r1 and r2 -> taken [0,3u), [4u,8u): the 1u gap is too small -> top: [8u,11u).
  // Heap 11u. Most bytes live: r1 + r2 + r3 = 10u at position 7 (r0 + r1 = 8u at 4), so the
  // plan is 1u (10%) above the lower bound; 10u is reachable (r1 0, r0 4u, r2 4u, r3 7u).
  const Trace t = make_trace({
      alloc(1, 4 * u),      // 0: r0
      empty_cache_event(),  // 1
      empty_cache_event(),  // 2
      alloc(2, 4 * u),      // 3: r1
      free_of(1),           // 4
      alloc(3, 3 * u),      // 5: r2
      alloc(4, 3 * u),      // 6: r3
      free_of(2),           // 7
      free_of(4),           // 8
      free_of(3),           // 9
  });
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B);
  EXPECT_EQ(run.addr(3), B + 4 * u);
  EXPECT_EQ(run.addr(5), B);
  EXPECT_EQ(run.addr(6), B + 8 * u);
  EXPECT_EQ(run.result.metrics.peak_reserved, 11 * u);
  EXPECT_EQ(stat(run.result, "plan_heap_bytes"), static_cast<std::int64_t>(11 * u));
  EXPECT_EQ(stat(run.result, "lower_bound_bytes"), static_cast<std::int64_t>(10 * u));
  EXPECT_EQ(stat(run.result, "plan_overhead_ppm"), 100000);  // 1u / 10u
  EXPECT_EQ(stat(run.result, "planned_buffers"), 4);
  EXPECT_EQ(stat(run.result, "alignment_bytes"), 512);
  EXPECT_TRUE(run.calls.empty());  // empty_cache gives nothing back: the plan needs the arena
}

TEST(Offline, AlignmentOptionRoundsEveryRequest) {
  // alignment 4096: 1000 B -> 4K, 5000 B -> 8K. A [1,3), B [2,4): B (8K) first -> 0; A overlaps
  // B -> 8K. Heap 12K.
  const Trace t = make_trace({alloc(1, 1000), alloc(2, 5000), free_of(1), free_of(2)});
  const PolicyRun run = run_policy("offline:alignment:4096", t);
  expect_clean_and_served(run);
  EXPECT_EQ(run.addr(0), B + 8 * KiB);
  EXPECT_EQ(run.addr(1), B);
  EXPECT_EQ(run.blocks[0]->size, 4 * KiB);
  EXPECT_EQ(run.blocks[1]->size, 8 * KiB);
  EXPECT_EQ(run.result.metrics.peak_reserved, 12 * KiB);
}

TEST(Offline, PlanLargerThanTheDeviceFailsEveryRequest) {
  // Two live 3 MiB requests need a 6 MiB arena; the device has 4 MiB. The arena malloc fails in
  // prepare(), so both allocations report OOM with the same plan size; nothing is reserved.
  const Trace t = make_trace({alloc(1, 3 * MiB), alloc(2, 3 * MiB), free_of(1), free_of(2)});
  const PolicyRun run = run_policy("offline", t, 4 * MiB);
  EXPECT_TRUE(run.violations.empty()) << run.violations.front();
  EXPECT_EQ(run.result.metrics.num_ooms, 2u);
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 0u);  // no cache to flush
  ASSERT_EQ(run.result.ooms.size(), 2u);
  EXPECT_EQ(run.result.ooms[0].event_index, 0u);
  EXPECT_EQ(run.result.ooms[1].event_index, 1u);
  EXPECT_EQ(run.result.ooms[0].message,
            "offline: the plan needs 6291456 bytes of one arena; the device has 4194304 free "
            "(request of 3145728 bytes; 0 of 4194304 bytes reserved)");
  EXPECT_EQ(run.result.metrics.peak_reserved, 0u);
  EXPECT_TRUE(run.calls.empty());
  EXPECT_EQ(stat(run.result, "plan_heap_bytes"), static_cast<std::int64_t>(6 * MiB));
}

TEST(Offline, SamePlanTwice) {
  Rng rng(7);
  std::vector<Event> events;
  std::vector<AllocId> live;
  AllocId next_id = 1;
  for (int i = 0; i < 400; ++i) {
    if (live.empty() || rng.below(3) != 0) {
      events.push_back(alloc(next_id, 1 + rng.below(64 * KiB)));
      live.push_back(next_id++);
    } else {
      const std::size_t victim = rng.below(live.size());
      events.push_back(free_of(live[victim]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
  }
  const Trace t = make_trace(events);
  const PolicyRun first = run_policy("offline", t);
  const PolicyRun second = run_policy("offline", t);
  expect_clean_and_served(first);
  expect_clean_and_served(second);
  for (std::size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(first.blocks[i].has_value(), second.blocks[i].has_value());
    if (first.blocks[i]) {
      EXPECT_EQ(first.blocks[i]->addr, second.blocks[i]->addr) << "event " << i;
    }
  }
  EXPECT_EQ(first.result.metrics.peak_reserved, second.result.metrics.peak_reserved);
  EXPECT_EQ(first.result.detailed_stats, second.result.detailed_stats);
}

TEST(Offline, OptionErrorsNameTheKeyAndTheAcceptedValues) {
  const auto message = spec_error;
  EXPECT_EQ(message("offline:colour:red"), "offline: unknown option 'colour' (accepted: alignment)");
  const std::string expected_alignment =
      "offline: alignment: expected a power of two from 1 to 1073741824 (bytes), got ";
  EXPECT_EQ(message("offline:alignment:0"), expected_alignment + "'0'");
  EXPECT_EQ(message("offline:alignment:768"), expected_alignment + "'768'");
  EXPECT_EQ(message("offline:alignment:4KiB"), expected_alignment + "'4KiB'");
  EXPECT_EQ(message("offline:alignment:-512"), expected_alignment + "'-512'");
  EXPECT_EQ(message("offline:alignment:2147483648"), expected_alignment + "'2147483648'");
  EXPECT_NE(message("offline:alignment").find("offline: option 'alignment' has no value"), std::string::npos);
  EXPECT_EQ(message("offline:alignment:1"), "(no error)");
  EXPECT_EQ(message("offline:alignment:1073741824"), "(no error)");
}

// ---- the policy driven by hand: call order, segments -------------------------------------------

TEST(Offline, CallsOutsideThePlanAreLogicErrors) {
  const Trace t = make_trace({alloc(1, 1 * KiB), free_of(1)});
  SimDevice device;
  std::unique_ptr<Policy> unprepared = create_policy("offline", device);
  EXPECT_THROW(unprepared->allocate(1 * KiB, 0), std::logic_error);

  std::unique_ptr<Policy> policy = create_policy("offline", device);
  policy->prepare(t);
  EXPECT_THROW(policy->allocate(2 * KiB, 0), std::logic_error);  // the plan's request 0 is 1 KiB
  std::unique_ptr<Policy> again = create_policy("offline", device);
  again->prepare(t);
  EXPECT_TRUE(again->allocate(1 * KiB, 0).has_value());
  EXPECT_THROW(again->allocate(1 * KiB, 0), std::logic_error);  // one request planned, two calls
}

TEST(Offline, SegmentsShowTheArenaWithItsLiveBlocks) {
  // The first trace of GreedyBySizeBeatsFirstFitInTimeOrder: A 2K, B 0, C 2K (arena 4K).
  const Trace t =
      make_trace({alloc(1, 1 * KiB), alloc(2, 2 * KiB), free_of(1), alloc(3, 2 * KiB), free_of(2), free_of(3)});
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("offline", device);
  policy->prepare(t);
  EXPECT_EQ(device.reserved(), 4 * KiB);
  const std::optional<Block> a = policy->allocate(1 * KiB, 0);
  const std::optional<Block> b = policy->allocate(2 * KiB, 0);
  ASSERT_TRUE(a && b);
  using Piece = SegmentView::Piece;
  const auto pieces = [](const std::vector<SegmentView>& segments) {
    std::vector<std::tuple<Addr, Bytes, bool>> out;
    for (const Piece& p : segments.at(0).blocks) out.emplace_back(p.addr, p.size, p.allocated);
    return out;
  };
  std::vector<SegmentView> segments = policy->segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].addr, B);
  EXPECT_EQ(segments[0].size, 4 * KiB);
  EXPECT_EQ(segments[0].pool, "arena");
  // B [0,2K) live, A [2K,3K) live, [3K,4K) never used while both live.
  EXPECT_EQ(pieces(segments), (std::vector<std::tuple<Addr, Bytes, bool>>{
                                  {B, 2 * KiB, true}, {B + 2 * KiB, 1 * KiB, true}, {B + 3 * KiB, 1 * KiB, false}}));
  policy->free(*a);
  EXPECT_EQ(pieces(policy->segments()),
            (std::vector<std::tuple<Addr, Bytes, bool>>{{B, 2 * KiB, true}, {B + 2 * KiB, 2 * KiB, false}}));
  policy->empty_cache();
  EXPECT_EQ(device.reserved(), 4 * KiB);  // nothing cached to give back
}

// ---- the planner on its own: intervals chosen freely ------------------------------------------

TEST(OfflinePlan, EqualGapsGoToTheLowestOffset) {
  // A 2u [0,10), L1 2u [9,18), B 2u [9,17), L2 1u [9,18), Q 1u [17,18).
  // Order: 2u by lifetime A (10), L1 (9), B (8); then 1u: L2 (9), Q (1).
  //  A -> 0: [0,2u). L1 overlaps A -> top: [2u,4u). B overlaps A and L1 -> [4u,6u).
  //  L2 overlaps A, L1, B -> [6u,7u).
  //  Q overlaps L1 and L2 only (A ended at 10, B at 17) -> taken [2u,4u), [6u,7u): gaps [0,2u)
  //  and [4u,6u) are equal -> the lower, 0.
  const std::vector<PlannedRequest> requests = {request(0, 10, 2 * u), request(9, 18, 2 * u), request(9, 17, 2 * u),
                                                request(9, 18, 1 * u), request(17, 18, 1 * u)};
  const offline::GreedyPlan plan = offline::plan_greedy_by_size(requests, 512);
  EXPECT_EQ(offsets_of(plan), (std::vector<Bytes>{0, 2 * u, 4 * u, 6 * u, 0}));
  EXPECT_EQ(plan.heap_size, 7 * u);
  EXPECT_EQ(plan.lower_bound, 7 * u);  // A + L1 + B + L2 at 9
}

TEST(OfflinePlan, HalfOpenIntervalsThatTouchShareMemory) {
  // [0,5) and [5,9) touch but do not overlap: both at 0. [4,6) overlaps both -> on top.
  const std::vector<PlannedRequest> requests = {request(0, 5, 4 * u), request(5, 9, 4 * u), request(4, 6, 1 * u)};
  const offline::GreedyPlan plan = offline::plan_greedy_by_size(requests, 512);
  EXPECT_EQ(offsets_of(plan), (std::vector<Bytes>{0, 0, 4 * u}));
  EXPECT_EQ(plan.heap_size, 5 * u);
  EXPECT_EQ(plan.lower_bound, 5 * u);
}

// The plan against a direct transcription of the algorithm (offline_reference.hpp: every placed
// request checked against every other): same offsets on random traces; and no two overlapping
// requests share a byte.
TEST(OfflinePlan, MatchesTheQuadraticDefinitionOnRandomIntervals) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    std::vector<PlannedRequest> requests;
    const std::uint64_t horizon = 50 + rng.below(300);
    for (int i = 0; i < 150; ++i) {
      const std::uint64_t begin = rng.below(horizon);
      const std::uint64_t length = rng.below(4) == 0 ? 1 + rng.below(horizon) : 1 + rng.below(8);
      const Bytes size = rng.below(8) == 0 ? 0 : (1 + rng.below(12)) * 256;  // sub-unit sizes and ties
      requests.push_back(request(begin, begin + length, size));
    }
    std::sort(requests.begin(), requests.end(),
              [](const PlannedRequest& a, const PlannedRequest& b) { return a.begin < b.begin; });
    const offline::GreedyPlan plan = offline::plan_greedy_by_size(requests, 512);
    const ReferencePlan reference = reference_plan(requests, 512);
    const std::vector<Bytes>& offsets = reference.offsets;
    const std::vector<Bytes>& sizes = reference.sizes;
    const Bytes heap = reference.heap_size;
    ASSERT_EQ(offsets_of(plan), offsets) << "seed " << seed;
    EXPECT_EQ(sizes_of(plan), sizes);
    EXPECT_EQ(plan.heap_size, heap);
    for (std::size_t a = 0; a < requests.size(); ++a) {
      for (std::size_t b = a + 1; b < requests.size(); ++b) {
        const bool in_time = requests[a].begin < requests[b].end && requests[b].begin < requests[a].end;
        const bool in_space = offsets[a] < offsets[b] + sizes[b] && offsets[b] < offsets[a] + sizes[a];
        ASSERT_FALSE(in_time && in_space) << "seed " << seed << ": requests " << a << " and " << b;
      }
    }
    Bytes most_live = 0;
    for (std::uint64_t t = 0; t <= horizon * 2; ++t) {
      Bytes live = 0;
      for (std::size_t k = 0; k < requests.size(); ++k) {
        if (requests[k].begin <= t && t < requests[k].end) live += sizes[k];
      }
      most_live = std::max(most_live, live);
    }
    EXPECT_EQ(plan.lower_bound, most_live) << "seed " << seed;
  }
}

// The index's answer against the union of every inserted run whose slot range meets the query's,
// with the cover cache on every level, on none, and on the upper levels only; each time both with
// the queries announced up front (the planner's use: sets no later query reads are skipped) and
// without.
TEST(OfflinePlan, OccupancyIndexAnswersTheUnionOfOverlappingRuns) {
  struct Step {
    bool insert;
    offline::SlotRange slots;
    offline::OffsetRun run;  // for an insert
  };
  for (const std::uint32_t cached_depth : {0u, 3u, 40u}) {
    Rng rng(cached_depth + 1);
    const std::uint32_t slots = 300;
    std::vector<Step> steps;
    std::vector<offline::SlotRange> queries;
    for (int step = 0; step < 1500; ++step) {
      const auto first = static_cast<std::uint32_t>(rng.below(slots));
      const auto last = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(slots, first + 1 + (rng.below(5) == 0 ? rng.below(slots) : rng.below(6))));
      const bool insert = rng.below(2) == 0;
      const Bytes begin = rng.below(200) * 8;
      steps.push_back({insert, {first, last}, {begin, begin + 8 * (1 + rng.below(10))}});
      if (!insert) queries.push_back({first, last});
    }
    for (const bool announced : {false, true}) {
      offline::OccupancyIndex index(
          slots, announced ? std::span<const offline::SlotRange>(queries) : std::span<const offline::SlotRange>(),
          cached_depth);
      std::vector<const Step*> inserted;
      for (std::size_t k = 0; k < steps.size(); ++k) {
        const auto [first, last] = steps[k].slots;
        if (steps[k].insert) {
          index.insert(first, last, steps[k].run);
          inserted.push_back(&steps[k]);
          continue;
        }
        std::vector<offline::OffsetRun> expected;
        for (const Step* i : inserted) {
          if (i->slots.first < last && first < i->slots.last) expected.push_back(i->run);
        }
        std::sort(expected.begin(), expected.end(),
                  [](const offline::OffsetRun& a, const offline::OffsetRun& b) { return a.begin < b.begin; });
        std::vector<std::pair<Bytes, Bytes>> merged;  // touching runs merge too
        for (const offline::OffsetRun& r : expected) {
          if (!merged.empty() && r.begin <= merged.back().second) {
            merged.back().second = std::max(merged.back().second, r.end);
          } else {
            merged.emplace_back(r.begin, r.end);
          }
        }
        std::vector<std::pair<Bytes, Bytes>> answer;
        for (const offline::OffsetRun& r : index.occupied(first, last)) answer.emplace_back(r.begin, r.end);
        ASSERT_EQ(answer, merged) << "cached_depth " << cached_depth << ", announced " << announced << ", step " << k;
      }
    }
  }
}

// Announced queries must come in the announced order: the index has skipped the sets that only
// other queries would read.
TEST(OfflinePlan, OccupancyIndexRefusesAQueryItWasNotTold) {
  const std::vector<offline::SlotRange> queries = {{0, 2}, {1, 3}};
  offline::OccupancyIndex index(4, queries);
  EXPECT_THROW(index.occupied(1, 3), std::logic_error);  // the first announced is [0, 2)
  EXPECT_TRUE(index.occupied(0, 2).empty());
  index.insert(0, 2, offline::OffsetRun{0, 512});
  EXPECT_EQ(index.occupied(1, 3).size(), 1u);
  EXPECT_THROW(index.occupied(0, 2), std::logic_error);  // none announced is left
  EXPECT_THROW(offline::OccupancyIndex(4, std::vector<offline::SlotRange>{{2, 5}}), std::logic_error);
}

// The placement order on keys wider than a digit (the order is sorted digit by digit): sizes from
// one unit to 2^(size_shift + 10) bytes, lifetimes up to ~2^life_bits positions, with ties in
// both; checked against the order's definition through the plan of requests that all overlap
// (each goes on top of the ones placed before it, so the offsets spell the order out).
void expect_spatial_order(std::uint64_t seed, std::uint64_t size_shift, std::uint64_t life_bits) {
  Rng rng(seed);
  std::vector<PlannedRequest> requests;
  const std::uint64_t middle = std::uint64_t{1} << (life_bits + 1);  // every interval contains it
  for (int i = 0; i < 400; ++i) {
    const Bytes size = rng.below(4) == 0 ? Bytes{512} << rng.below(4) : (1 + rng.below(1000)) << rng.below(size_shift);
    const std::uint64_t before = rng.below(3) == 0 ? 100 : rng.below(std::uint64_t{1} << life_bits);
    const std::uint64_t after = 1 + (rng.below(3) == 0 ? 50 : rng.below(std::uint64_t{1} << life_bits));
    requests.push_back(request(middle - before, middle + after, size));
  }
  std::sort(requests.begin(), requests.end(),
            [](const PlannedRequest& a, const PlannedRequest& b) { return a.begin < b.begin; });
  const offline::GreedyPlan plan = offline::plan_greedy_by_size(requests, 512);
  std::vector<std::size_t> order(requests.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::uint64_t life_a = requests[a].end - requests[a].begin;
    const std::uint64_t life_b = requests[b].end - requests[b].begin;
    if (plan.sizes[a] != plan.sizes[b]) return plan.sizes[a] > plan.sizes[b];
    if (life_a != life_b) return life_a > life_b;
    return a < b;
  });
  Bytes top = 0;
  for (const std::size_t k : order) {
    ASSERT_EQ(plan.offsets[k], top) << "request " << k;
    top += plan.sizes[k];
  }
  EXPECT_EQ(plan.heap_size, top);
}

// Sizes to terabytes, lifetimes to ~2^18: size and lifetime fit one 64-bit sort key.
TEST(OfflinePlan, PlacementOrderHoldsForWideSizesAndLifetimes) { expect_spatial_order(7, 31, 17); }

// Sizes to 2^54 bytes in 512-byte steps (~46 bits below the largest) and lifetimes to ~2^20 (21
// bits): more than 64 bits together, so the sizes are sorted in a pass of their own.
TEST(OfflinePlan, PlacementOrderHoldsWhenSizeAndLifetimeOverflowOneKey) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) expect_spatial_order(seed, 45, 20);
}

// A recorded PyTorch run (324 allocations live at the start, deferred frees): the plan is valid
// (invariant checker), never below the lower bound, and every allocation gets a block.
TEST(Offline, ReplaysARealSnapshotCleanly) {
  const std::string path = std::string(FRAGLAB_REAL_TRACES) + "/lm2.7b-ctx128-fullstep.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(path);
  const Trace t = read_trace(path);
  const PolicyRun run = run_policy("offline", t);
  expect_clean_and_served(run);
  const std::int64_t heap = stat(run.result, "plan_heap_bytes");
  EXPECT_EQ(run.result.metrics.peak_reserved, static_cast<Bytes>(heap));
  EXPECT_GE(heap, stat(run.result, "lower_bound_bytes"));
  EXPECT_GE(static_cast<Bytes>(stat(run.result, "lower_bound_bytes")), run.result.metrics.peak_requested);
}

TEST(OfflinePlan, NoRequestsNoHeap) {
  const offline::GreedyPlan plan = offline::plan_greedy_by_size({}, 512);
  EXPECT_EQ(plan.heap_size, 0u);
  EXPECT_EQ(plan.lower_bound, 0u);
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("offline", device);
  policy->prepare(make_trace({empty_cache_event()}));
  EXPECT_EQ(device.reserved(), 0u);
  EXPECT_TRUE(policy->segments().empty());
}

}  // namespace
}  // namespace fraglab::test
