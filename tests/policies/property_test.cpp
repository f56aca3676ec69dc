// Properties every registered policy must have (issue 5), checked on seeded random traces:
//  - the invariant checker finds nothing (no overlap, blocks backed, block >= request,
//    reserved <= capacity);
//  - peak reserved >= peak requested (the floor no policy can beat) when nothing was flushed;
//  - the same trace replays to the same addresses and the same results, twice;
//  - on a device too small for the trace, OOMs are reported, not crashed on.
// Policies are taken from the registry, so a new policy is covered the day it registers.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "fraglab/report.hpp"
#include "fraglab/rng.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

enum class SizeMix { Small, Large, Llm };

struct TraceShape {
  const char* name;
  SizeMix mix;
  int streams;
  double deferred_free;  // probability that a free is deferred (free_requested .. free_completed)
};

const std::vector<TraceShape> kShapes = {
    {"small_one_stream", SizeMix::Small, 1, 0.0},
    {"large_one_stream", SizeMix::Large, 1, 0.0},
    {"llm_three_streams_deferred", SizeMix::Llm, 3, 0.3},
    {"mixed_two_streams", SizeMix::Llm, 2, 0.1},
};

const std::vector<std::string> kTags = {"param", "grad", "opt", "act", "temp", "step"};
constexpr std::uint32_t kStepLabel = 5;

Bytes draw_size(Rng& rng, SizeMix mix) {
  auto log_uniform = [&](double lo, double hi) {
    return static_cast<Bytes>(std::exp(std::log(lo) + rng.uniform() * (std::log(hi) - std::log(lo))));
  };
  switch (mix) {
    case SizeMix::Small:
      return log_uniform(1, 1 * MiB);
    case SizeMix::Large:
      return log_uniform(1 * MiB, 256 * MiB);
    case SizeMix::Llm:
      // Transformer-like: a few recurring shapes (weights, activations) plus odd sizes.
      if (rng.below(3) != 0) {
        static constexpr Bytes kShapes[] = {4 * MiB, 10 * MiB, 40 * MiB, 50 * MiB + 512, 160 * MiB, 96 * KiB};
        return kShapes[rng.below(6)];
      }
      return log_uniform(1, 512 * MiB);
  }
  return 1;
}

// A random but well-formed trace: at most `live_cap` allocations live, frees in random order,
// deferred frees completed a few events later, step marks every 500 events, tags on everything.
Trace random_trace(const TraceShape& shape, std::uint64_t seed, int events = 3000, int live_cap = 60) {
  Rng rng(seed);
  Trace t;
  t.name = std::string(shape.name) + "-" + std::to_string(seed);
  t.strings = kTags;
  t.strings.emplace_back("0");
  std::vector<AllocId> live;
  std::vector<std::pair<int, AllocId>> completing;  // (event count at which to complete, id)
  AllocId next_id = 1;
  for (int i = 0; static_cast<int>(t.events.size()) < events; ++i) {
    if (i % 500 == 0) t.events.push_back(mark(kStepLabel, 6));
    for (size_t k = 0; k < completing.size();) {
      if (completing[k].first <= i) {
        t.events.push_back(with_op(Op::FreeCompleted, completing[k].second));
        completing.erase(completing.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
    const bool do_alloc = live.empty() || (static_cast<int>(live.size()) < live_cap && rng.below(100) < 55);
    if (do_alloc) {
      Event e = tagged_alloc(next_id, draw_size(rng, shape.mix), static_cast<std::uint32_t>(rng.below(5)),
                             rng.below(static_cast<std::uint64_t>(shape.streams)));
      live.push_back(next_id++);
      t.events.push_back(e);
    } else {
      const size_t k = rng.below(live.size());
      const AllocId id = live[k];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      if (rng.uniform() < shape.deferred_free) {
        t.events.push_back(with_op(Op::FreeRequested, id));
        completing.emplace_back(i + 1 + static_cast<int>(rng.below(20)), id);
      } else {
        t.events.push_back(free_of(id));
      }
    }
  }
  for (const auto& [when, id] : completing) t.events.push_back(with_op(Op::FreeCompleted, id));
  validate_trace(t, t.name);
  return t;
}

std::vector<std::string> registered_policies() {
  std::vector<std::string> names;
  for (const PolicyInfo* info : PolicyRegistry::instance().all()) names.push_back(info->name);
  return names;
}

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPolicy, InvariantsHoldAndPeakReservedIsAtLeastPeakRequested) {
  for (const TraceShape& shape : kShapes) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      const Trace t = random_trace(shape, seed);
      const PolicyRun run = run_policy(GetParam(), t);
      SCOPED_TRACE(t.name);
      EXPECT_TRUE(run.violations.empty()) << run.violations.front();
      const Metrics& m = run.result.metrics;
      EXPECT_EQ(m.num_ooms, 0u) << "80 GiB is plenty for these traces";
      if (m.num_alloc_retries == 0) {
        EXPECT_GE(m.peak_reserved, m.peak_requested);
      }
    }
  }
}

TEST_P(EveryPolicy, ReplaysAreDeterministic) {
  for (const TraceShape& shape : kShapes) {
    const Trace t = random_trace(shape, 7);
    const PolicyRun a = run_policy(GetParam(), t);
    const PolicyRun b = run_policy(GetParam(), t);
    SCOPED_TRACE(t.name);
    EXPECT_EQ(run_json(a.result).dump(), run_json(b.result).dump());
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    for (size_t i = 0; i < a.blocks.size(); ++i) {
      ASSERT_EQ(a.blocks[i].has_value(), b.blocks[i].has_value()) << "event " << i;
      if (a.blocks[i]) {
        ASSERT_EQ(a.blocks[i]->addr, b.blocks[i]->addr) << "event " << i;
        ASSERT_EQ(a.blocks[i]->size, b.blocks[i]->size) << "event " << i;
      }
    }
    EXPECT_EQ(a.calls, b.calls);
  }
}

TEST_P(EveryPolicy, ReportsOutOfMemoryOnADeviceTooSmall) {
  // Up to 60 live requests of up to 512 MiB cannot fit in 1 GiB.
  const Trace t = random_trace(kShapes[2], 11);
  const PolicyRun run = run_policy(GetParam(), t, 1 * GiB);
  EXPECT_GT(run.result.metrics.num_ooms, 0u);
  EXPECT_EQ(run.result.metrics.num_ooms, run.result.ooms.size());
  EXPECT_FALSE(run.result.ooms.front().message.empty());
  EXPECT_LE(run.result.metrics.peak_reserved, 1 * GiB);
  EXPECT_TRUE(run.violations.empty()) << run.violations.front();
}

TEST_P(EveryPolicy, EmptyCacheAfterEverythingIsFreedLeavesNothingReservedButWhatThePolicyPins) {
  Trace t = random_trace(kShapes[3], 5);
  // Free whatever is still live, then flush.
  std::vector<AllocId> live;
  for (const Event& e : t.events) {
    if (e.op == Op::Alloc) live.push_back(e.id);
    if (e.op == Op::Free || e.op == Op::FreeCompleted) std::erase(live, e.id);
  }
  for (AllocId id : live) t.events.push_back(free_of(id));
  Event flush;
  flush.op = Op::EmptyCache;
  t.events.push_back(flush);
  const PolicyRun after = run_policy(GetParam(), t);
  EXPECT_TRUE(after.violations.empty()) << after.violations.front();
  // Only a planner holding one arena for the whole replay may keep memory past empty_cache.
  if (GetParam() != "offline") {
    EXPECT_EQ(after.reserved_at_end, 0u) << "policy kept memory after empty_cache";
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryPolicy, ::testing::ValuesIn(registered_policies()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(PropertyTraces, AreWellFormedAndExerciseDeferredFreesAndStreams) {
  const Trace t = random_trace(kShapes[2], 1);
  int deferred = 0, streams_seen = 0;
  std::vector<bool> stream(3, false);
  for (const Event& e : t.events) {
    if (e.op == Op::FreeRequested) ++deferred;
    if (e.op == Op::Alloc && !stream[e.stream]) {
      stream[e.stream] = true;
      ++streams_seen;
    }
  }
  EXPECT_GT(deferred, 50);
  EXPECT_EQ(streams_seen, 3);
  EXPECT_GE(t.events.size(), 3000u);
}

}  // namespace
}  // namespace fraglab::test
