// gemini: Gemini's chunk-size search, and tagged tensors packed into chunks with the rest going to
// an inner policy. Expected values are derived by hand from the rules in policies/gemini/ and
// SimDevice's placement: a malloc goes at the bump pointer, 512-byte aligned below 2 MiB and
// 2 MiB aligned from 2 MiB on, and the bump pointer never goes back. Most runs use `nocache` as
// the inner policy: one malloc per untagged request, so its addresses are easy to follow.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "fraglab/anatomy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/timeline.hpp"
#include "gemini/chunk_search.hpp"
#include "gemini/placement.hpp"
#include "policies/rig.hpp"

namespace fraglab::test {
namespace {

using gemini::SearchOptions;
using gemini::SearchResult;

// Strings of the packing traces: tags, then a label for untagged activations.
constexpr std::uint32_t kParam = 0;
constexpr std::uint32_t kGrad = 1;
constexpr std::uint32_t kOpt = 2;
Trace tagged(std::vector<Event> events) { return make_trace(std::move(events), {"param", "grad", "opt", "act"}); }

Event empty_cache() {
  Event e;
  e.op = Op::EmptyCache;
  return e;
}

DeviceCallRecord malloc_at(Addr offset, Bytes size) { return {DeviceCall::Malloc, kBase + offset, size}; }
DeviceCallRecord free_at(Addr offset, Bytes size) { return {DeviceCall::Free, kBase + offset, size}; }

std::int64_t stat(const ReplayResult& result, const std::string& key) {
  for (const auto& [name, value] : result.detailed_stats) {
    if (name == key) return value;
  }
  ADD_FAILURE() << "no stat " << key;
  return -2;
}

// ---- the search ---------------------------------------------------------------------------------

TEST(GeminiSearch, PicksTheCandidateWithTheFewestUnusedBytes) {
  // Total 1800 >= min chunk 600, so Gemini searches. Largest size 700 -> candidates 700..1100 by
  // 100. Packing in order (a size that does not fit closes the chunk; tails count, the last too):
  //  700: [300] [500 200] [700] [100] -> 400 + 0 + 0 + 600 = 1000
  //  800: [300 500] [200] [700 100]   -> 0 + 600 + 0      = 600
  //  900: [300 500] [200 700] [100]   -> 100 + 0 + 800    = 900
  // 1000: [300 500 200] [700 100]     -> 0 + 200          = 200
  // 1100: [300 500 200] [700 100]     -> 100 + 300        = 400
  const SearchOptions options{/*search_range=*/400, /*search_interval=*/100, /*min_chunk_size=*/600,
                              /*filter_exlarge_params=*/false};
  const SearchResult r = gemini::search_chunk_size({300, 500, 200, 700, 100}, options);
  EXPECT_EQ(r.chunk_size, 1000u);
  EXPECT_EQ(r.waste, 200u);
  EXPECT_EQ(r.candidates, 5u);
  EXPECT_EQ(r.parameter_bytes, 1800u);
  EXPECT_DOUBLE_EQ(r.waste_percent(), 10.0);  // 200 / (1800 + 200)
  EXPECT_FALSE(r.keep_gathered);
  EXPECT_EQ(gemini::unused_bytes({300, 500, 200, 700, 100}, 700), 1000u);
  EXPECT_EQ(gemini::unused_bytes({300, 500, 200, 700, 100}, 900), 900u);
}

TEST(GeminiSearch, TiesGoToTheSmallestCandidate) {
  // 500 and 1000 both pack {500, 500} with no waste; 750 wastes 250 + 250.
  const SearchResult r = gemini::search_chunk_size({500, 500}, SearchOptions{500, 250, 0, false});
  EXPECT_EQ(r.chunk_size, 500u);
  EXPECT_EQ(r.waste, 0u);
  EXPECT_EQ(r.candidates, 3u);
}

TEST(GeminiSearch, ExtraLargeParamsAreLeftOut) {
  // Ten 10s and one 2000: mean 190.9, population sigma 572.1, limit mean + 3 sigma = 1907.2, so
  // 2000 is left out. Then the largest is 10 < min chunk 50: one candidate, 50, packing the ten
  // 10s into two full chunks.
  std::vector<Bytes> sizes(10, 10);
  sizes.push_back(2000);
  const SearchResult filtered = gemini::search_chunk_size(sizes, SearchOptions{0, 10, 50, true});
  EXPECT_EQ(filtered.filtered, 1u);
  EXPECT_EQ(filtered.chunk_size, 50u);
  EXPECT_EQ(filtered.waste, 0u);
  EXPECT_EQ(filtered.parameter_bytes, 2100u);  // the total counts the filtered one
  // Kept, 2000 is the only candidate: [100 of 10s] then 2000 does not fit: 1900 + 0.
  const SearchResult kept = gemini::search_chunk_size(sizes, SearchOptions{0, 10, 50, false});
  EXPECT_EQ(kept.chunk_size, 2000u);
  EXPECT_EQ(kept.waste, 1900u);
}

TEST(GeminiSearch, ParamsBelowTheMinimumStayGatheredInOneChunk) {
  const SearchResult r = gemini::search_chunk_size({100, 200}, SearchOptions{1000, 10, 1000, true});
  EXPECT_TRUE(r.keep_gathered);
  EXPECT_EQ(r.chunk_size, 300u);
  EXPECT_EQ(r.candidates, 0u);
  // No parameters at all: the smallest candidate, min chunk rounded up to the interval.
  EXPECT_EQ(gemini::search_chunk_size({}, SearchOptions{1000, 300, 1000, true}).chunk_size, 1200u);
}

TEST(GeminiSearch, SkippingHopelessCandidatesNeverChangesTheAnswer) {
  // The search skips candidates whose lower bound (ceil(total / c) chunks) cannot beat the best
  // so far. Gemini's loop as written, every candidate packed, must agree on random size lists.
  std::uint64_t state = 12345;
  auto next = [&](std::uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<Bytes> sizes(1 + next(40));
    for (Bytes& s : sizes) s = 1 + next(next(2) == 0 ? 50 : 5000);
    const SearchOptions options{next(3000), 1 + next(90), next(4000), false};
    Bytes start = std::max(options.min_chunk_size, *std::max_element(sizes.begin(), sizes.end()));
    start = (start + options.search_interval - 1) / options.search_interval * options.search_interval;
    Bytes best = ~Bytes{0};
    Bytes best_size = start;
    for (Bytes c = start; c <= start + options.search_range; c += options.search_interval) {
      const Bytes waste = gemini::unused_bytes(sizes, c);
      if (waste < best) {
        best = waste;
        best_size = c;
      }
    }
    const SearchResult r = gemini::search_chunk_size(sizes, options);
    if (r.keep_gathered) continue;
    EXPECT_EQ(r.chunk_size, best_size) << "round " << round;
    EXPECT_EQ(r.waste, best) << "round " << round;
  }
}

TEST(GeminiSearch, ParameterSizesAreTheResidentParamTensorsOfTheFirstStep) {
  // Strings: "step" 0, "1" 1, "2" 2, "param" 3. Window: events before the second step mark (e6).
  // Resident (not freed inside the window): ids 1, 2 and 4; id 3 is a transient gathered copy,
  // id 5 comes after the window.
  const Trace t = make_trace({tagged_alloc(1, 3000, 3), tagged_alloc(2, 5000, 3), mark(0, 1), tagged_alloc(3, 8000, 3),
                              free_of(3), tagged_alloc(4, 1000, 3), mark(0, 2), tagged_alloc(5, 9000, 3)},
                             {"step", "1", "2", "param"});
  const gemini::ParameterSizes p = gemini::parameter_sizes(t, planned_requests(t), 3);
  EXPECT_EQ(p.sizes, (std::vector<Bytes>{3000, 5000, 1000}));
  EXPECT_EQ(p.window_requests, 4u);
  EXPECT_TRUE(p.resident_only);
  // Without step marks the window is the whole trace; with nothing resident, every param counts.
  const Trace transient =
      make_trace({tagged_alloc(1, 700, 0), free_of(1), tagged_alloc(2, 900, 0), free_of(2)}, {"param"});
  const gemini::ParameterSizes q = gemini::parameter_sizes(transient, planned_requests(transient), 0);
  EXPECT_EQ(q.sizes, (std::vector<Bytes>{700, 900}));
  EXPECT_FALSE(q.resident_only);
  // A trace without a "param" string has no parameters; its untagged requests are not ones.
  const Trace grads_only = make_trace({alloc(1, 100), tagged_alloc(2, 200, 0)}, {"grad"});
  EXPECT_TRUE(gemini::parameter_sizes(grads_only, planned_requests(grads_only), kNoString).sizes.empty());
}

TEST(Gemini, TheSearchedChunkSizePacksTheParams) {
  // The first search test scaled to MiB: params {3, 5, 2, 7, 1} MiB, min chunk 6 MiB, range
  // 4 MiB, interval 1 MiB: chunk 10 MiB, 2 MiB wasted. Chunk 1 (10 MiB, 2 MiB aligned at kBase)
  // holds 3, 5, 2; 7 does not fit: chunk 2 at kBase + 10 MiB holds 7 and 1.
  const Trace t =
      tagged({tagged_alloc(1, 3 * MiB, kParam), tagged_alloc(2, 5 * MiB, kParam), tagged_alloc(3, 2 * MiB, kParam),
              tagged_alloc(4, 7 * MiB, kParam), tagged_alloc(5, 1 * MiB, kParam)});
  const PolicyRun run =
      run_policy("gemini:inner:nocache,min_chunk_size_mb:6,search_range_mb:4,search_interval:1MiB", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), kBase);
  EXPECT_EQ(run.addr(1), kBase + 3 * MiB);
  EXPECT_EQ(run.addr(2), kBase + 8 * MiB);
  EXPECT_EQ(run.addr(3), kBase + 10 * MiB);
  EXPECT_EQ(run.addr(4), kBase + 17 * MiB);
  EXPECT_EQ(stat(run.result, "chunk_size_bytes"), static_cast<std::int64_t>(10 * MiB));
  EXPECT_EQ(stat(run.result, "search_candidates"), 5);
  EXPECT_EQ(stat(run.result, "search_param_tensors"), 5);
  EXPECT_EQ(stat(run.result, "search_waste_bytes"), static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(stat(run.result, "search_waste_pct_x100"), 1000);  // 10.00 %
  EXPECT_EQ(run.result.metrics.peak_reserved, 20 * MiB);
  EXPECT_EQ(run.blocks[0]->size, 3 * MiB);  // no rounding inside a chunk
}

// ---- packing ------------------------------------------------------------------------------------

TEST(Gemini, PacksClosesRecyclesAndGivesOversizedTensorsTheirOwnChunk) {
  constexpr Bytes K = KiB;
  const Trace t = tagged({
      tagged_alloc(1, 400 * K, kParam),   // e0: chunk A = malloc 1 MiB at 0; tensor at 0
      tagged_alloc(2, 500 * K, kParam),   // e1: fits A (900 KiB): at 400 KiB
      tagged_alloc(3, 300 * K, kParam),   // e2: 1200 KiB > 1 MiB: A closes; chunk B at 1 MiB
      alloc(4, 100 * K),                  // e3: untagged -> nocache: malloc at 2 MiB
      tagged_alloc(5, 200 * K, kGrad),    // e4: grad's own chunk C at 2 MiB + 100 KiB
      free_of(1),                         // e5
      free_of(2),                         // e6: A (closed) has no live tensor: cached
      tagged_alloc(6, 900 * K, kParam),   // e7: B (300 used) is full for it: B closes; A reused: at 0
      tagged_alloc(7, 3 * MiB, kOpt),     // e8: larger than a chunk: own 3 MiB chunk D, 2 MiB aligned: 4 MiB
      tagged_alloc(8, 100 * K, kOpt),     // e9: D is full: closes; chunk E at 7 MiB
      free_of(6),                         // e10: A is param's open chunk: empties, fills from 0 again
      tagged_alloc(9, 1000 * K, kParam),  // e11: at 0
      free_of(9),                         // e12: A empty and open
      free_of(3),                         // e13: B (closed) empty: cached
      empty_cache(),                      // e14: frees A and B (no live tensor), in address order
      tagged_alloc(10, 100 * K, kParam),  // e15: new chunk F at 8 MiB (the bump pointer never goes back)
  });
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:1", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), kBase);
  EXPECT_EQ(run.addr(1), kBase + 400 * K);
  EXPECT_EQ(run.addr(2), kBase + 1 * MiB);
  EXPECT_EQ(run.addr(3), kBase + 2 * MiB);
  EXPECT_EQ(run.addr(4), kBase + 2 * MiB + 100 * K);
  EXPECT_EQ(run.addr(7), kBase);
  EXPECT_EQ(run.addr(8), kBase + 4 * MiB);
  EXPECT_EQ(run.addr(9), kBase + 7 * MiB);
  EXPECT_EQ(run.addr(11), kBase);
  EXPECT_EQ(run.addr(15), kBase + 8 * MiB);
  EXPECT_EQ(run.calls,
            (std::vector<DeviceCallRecord>{
                malloc_at(0, 1 * MiB), malloc_at(1 * MiB, 1 * MiB), malloc_at(2 * MiB, 100 * K),
                malloc_at(2 * MiB + 100 * K, 1 * MiB), malloc_at(4 * MiB, 3 * MiB), malloc_at(7 * MiB, 1 * MiB),
                free_at(0, 1 * MiB), free_at(1 * MiB, 1 * MiB), malloc_at(8 * MiB, 1 * MiB)}));
  // Before e14: A, B, C, D, E (1 + 1 + 1 + 3 + 1 MiB) and the 100 KiB untagged block.
  EXPECT_EQ(run.result.metrics.peak_reserved, 7 * MiB + 100 * K);
  EXPECT_EQ(stat(run.result, "chunk_reuses"), 1);
  EXPECT_EQ(stat(run.result, "dedicated_chunks"), 1);
  EXPECT_EQ(stat(run.result, "chunk_mallocs"), 6);
  EXPECT_EQ(stat(run.result, "chunks"), 4);  // C, D, E, F
  EXPECT_EQ(stat(run.result, "chunk_tensor_bytes"), static_cast<std::int64_t>(200 * K + 3 * MiB + 100 * K + 100 * K));
}

TEST(Gemini, SegmentsListTheChunksWithTheirTensorsAndTheInnerPolicysSegments) {
  const Trace t =
      tagged({tagged_alloc(1, 100 * KiB, kParam), tagged_alloc(2, 200 * KiB, kParam), free_of(1), alloc(3, 4 * MiB)});
  SimDevice device;
  std::unique_ptr<Policy> policy = create_policy("gemini:chunk_size_mb:1", device);
  Replayer(t, *policy, device).run("gemini");
  const std::vector<SegmentView> segments = policy->segments();
  // The param chunk at kBase (free 100 KiB, tensor 2, free tail), then the pytorch policy's
  // segment for the 4 MiB request (a 20 MiB "large" segment, allocator-model), 2 MiB aligned: kBase + 2 MiB.
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].addr, kBase);
  EXPECT_EQ(segments[0].pool, "gemini_param");
  ASSERT_EQ(segments[0].blocks.size(), 3u);
  EXPECT_FALSE(segments[0].blocks[0].allocated);
  EXPECT_EQ(segments[0].blocks[1].addr, kBase + 100 * KiB);
  EXPECT_EQ(segments[0].blocks[1].size, 200 * KiB);
  EXPECT_TRUE(segments[0].blocks[1].allocated);
  EXPECT_EQ(segments[0].blocks[2].size, 1 * MiB - 300 * KiB);
  EXPECT_EQ(segments[1].addr, kBase + 2 * MiB);
  EXPECT_EQ(segments[1].pool, "large");
  EXPECT_EQ(segments[1].size, 20 * MiB);
}

TEST(Gemini, DeferredFreesOfChunkTensorsCompleteAtFreeCompleted) {
  // A chunk tensor whose free is only requested still holds its chunk: the next param tensor
  // after the chunk fills cannot reuse it.
  const Trace t =
      tagged({tagged_alloc(1, 1 * MiB, kParam), with_op(Op::FreeRequested, 1), tagged_alloc(2, 1 * MiB, kParam),
              with_op(Op::FreeCompleted, 1), tagged_alloc(3, 1 * MiB, kParam)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:1", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), kBase + 1 * MiB);  // chunk A still busy: new chunk B
  EXPECT_EQ(run.addr(4), kBase);            // A cached at e3, reused
}

// ---- inner policy and errors ---------------------------------------------------------------------

TEST(Gemini, UntaggedRequestsGoToTheInnerPolicy) {
  // Tags present but these three requests are untagged (or 0 bytes): nocache mallocs each.
  const Trace t = tagged({alloc(1, 1000), tagged_alloc(2, 0, kParam), alloc(3, 3 * MiB), tagged_alloc(4, 1000, kGrad)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:1", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(0), kBase);         // 1000 -> footprint 1024
  EXPECT_EQ(run.addr(1), kBase + 1024);  // the 0-byte tagged request: nocache, footprint 512
  EXPECT_EQ(run.addr(2), kBase + 2 * MiB);
  EXPECT_EQ(run.addr(3), kBase + 5 * MiB);  // grad chunk, after the 3 MiB block
  EXPECT_EQ(run.calls.size(), 4u);
}

TEST(Gemini, AnUntaggedTraceIsRefused) {
  const Trace t = make_trace({alloc(1, 1000), free_of(1)}, {"act"});
  try {
    run_policy("gemini", t);
    ADD_FAILURE() << "(no error)";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "gemini: trace 'hand-built' has no param/grad/opt tags; gemini packs tagged tensors into chunks "
              "(generate a tagged trace with fraglab gen)");
  }
  EXPECT_TRUE(PolicyRegistry::instance().find("gemini")->needs_tags);
}

TEST(Gemini, OutOfMemoryFlushesEmptyChunksAndTheInnerCacheThenReports) {
  // Capacity 2 MiB. e0: chunk A (1 MiB) at 0; e1: nocache 900 KiB at 1 MiB; e2 empties A (it
  // stays param's open chunk); e3 needs a 1.5 MiB grad chunk with 124 KiB left: refused; the
  // flush frees A; still only 1148 KiB: out of memory. e4: nocache takes 1 MiB at the bump
  // pointer, 1 MiB + 900 KiB.
  const Trace t = tagged({tagged_alloc(1, 600 * KiB, kParam), alloc(2, 900 * KiB), free_of(1),
                          tagged_alloc(3, 1536 * KiB, kGrad), alloc(4, 1 * MiB)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:1", t, 2 * MiB);
  expect_clean(run);
  EXPECT_FALSE(run.blocks[3].has_value());
  EXPECT_EQ(run.addr(4), kBase + 1924 * KiB);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_at(0, 1 * MiB), malloc_at(1 * MiB, 900 * KiB),
                                                      free_at(0, 1 * MiB), malloc_at(1924 * KiB, 1 * MiB)}));
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_EQ(run.result.ooms[0].message,
            "gemini: out of memory opening a 1572864-byte chunk for a 1572864-byte grad tensor (chunk size 1048576): "
            "921600 of 2097152 bytes reserved, 0 of them in chunks");
}

TEST(Gemini, AnInnerOutOfMemoryIsRetriedAfterFreeingEmptyChunks) {
  // Capacity 2 MiB. e1 empties chunk A; e2: nocache cannot get 1.5 MiB with A's 1 MiB held;
  // gemini frees A and nocache tries again: at the bump pointer, 1 MiB.
  const Trace t = tagged({tagged_alloc(1, 600 * KiB, kParam), free_of(1), alloc(2, 1536 * KiB)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:1", t, 2 * MiB);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), kBase + 1 * MiB);
  EXPECT_EQ(run.result.metrics.num_alloc_retries, 1u);
  EXPECT_EQ(run.result.metrics.num_ooms, 0u);
  SimDevice device(SimDeviceConfig{2 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy("gemini:inner:nocache,chunk_size_mb:1", device);
  Replayer(t, *policy, device).run("gemini");
  EXPECT_EQ(policy->counters().num_ooms, 0u);  // nocache's refusal was turned around
}

TEST(Gemini, BadOptionsNameTheKeyAndTheAcceptedValues) {
  const auto message = spec_error;
  EXPECT_EQ(message("gemini:colour:red"),
            "gemini: unknown option 'colour' (accepted: inner, chunk_size_mb, search_range_mb, search_interval, "
            "min_chunk_size_mb, filter_exlarge_params, placement, shard_param_frac, offload_optim_frac, "
            "offload_param_frac, warmup_non_model_data_ratio, steady_cuda_cap_ratio)");
  EXPECT_EQ(message("gemini:chunk_size_mb:0"),
            "gemini: chunk_size_mb: expected a number of MiB > 0 (e.g. 64 or 0.5), got '0'");
  EXPECT_EQ(message("gemini:search_range_mb:-1"),
            "gemini: search_range_mb: expected a number of MiB >= 0 (e.g. 64 or 0.5), got '-1'");
  EXPECT_EQ(message("gemini:search_interval:0"),
            "gemini: search_interval: expected a positive number of bytes (e.g. 2048 or 4KiB), got '0'");
  EXPECT_EQ(message("gemini:filter_exlarge_params:maybe"),
            "gemini: filter_exlarge_params: expected True or False (also true, false, 1, 0), got 'maybe'");
  EXPECT_EQ(message("gemini:search_interval:1"),
            "gemini: search_range_mb / search_interval make 67108865 candidate chunk sizes, at most 4194304 are "
            "searched (raise search_interval or lower search_range_mb)");
  EXPECT_EQ(message("gemini:inner:gemini"),
            "gemini: inner: expected the spec of another policy, bracketed when it has options (e.g. pytorch or "
            "[pytorch:expandable_segments:True]), got 'gemini'");
  EXPECT_EQ(message("gemini:inner:[nocache:x:1]").rfind("gemini: inner: nocache: takes no options", 0), 0u)
      << message("gemini:inner:[nocache:x:1]");
  EXPECT_EQ(message("gemini:inner:[pytorch:expandable_segments:True],chunk_size_mb:0.5,filter_exlarge_params:False"),
            "(no error)");
}

// ---- placement (ColossalAI colossalai/zero/gemini/placement_policy.py, gemini_mgr.py) ------------

// Strings of the placement traces: the tags, then the mark labels and values.
constexpr std::uint32_t kStep = 4;
constexpr std::uint32_t kPhase = 5;
constexpr std::uint32_t kOne = 6;
constexpr std::uint32_t kTwo = 7;
constexpr std::uint32_t kOptimizer = 8;
Trace with_marks(std::vector<Event> events) {
  return make_trace(std::move(events), {"param", "grad", "opt", "act", "step", "phase", "1", "2", "optimizer"});
}

TEST(GeminiPlacement, StaticOffloadsTheFirstOptimizerChunksUpToTheFraction) {
  // setup_grads_device: a chunk goes to the CPU while the bytes offloaded before it are below
  // frac x total. Four 2 MiB chunks (total 8 MiB): 0.5 -> target 4 MiB: chunks 1 (0 < 4) and 2
  // (2 < 4), not 3 (4 >= 4). 0.25 -> target 2: chunk 1 only. 0.26 -> 2.08: chunks 1 and 2.
  // 1.0 -> all four; 0 -> none.
  const std::vector<Bytes> sizes{1536 * KiB, 1536 * KiB, 1536 * KiB, 1536 * KiB};  // one chunk each
  EXPECT_EQ(gemini::host_chunk_count(sizes, 2 * MiB, 0.5), 2u);
  EXPECT_EQ(gemini::host_chunk_count(sizes, 2 * MiB, 0.25), 1u);
  EXPECT_EQ(gemini::host_chunk_count(sizes, 2 * MiB, 0.26), 2u);
  EXPECT_EQ(gemini::host_chunk_count(sizes, 2 * MiB, 1.0), 4u);
  EXPECT_EQ(gemini::host_chunk_count(sizes, 2 * MiB, 0.0), 0u);
  // A larger-than-chunk tensor opens a chunk of its own size: {5 MiB, 1 MiB, 1 MiB} in 2 MiB
  // chunks -> chunks 5 and 2 MiB (the two 1 MiB share one): 0.5 of 7 = 3.5 -> the 5 MiB one only.
  EXPECT_EQ(gemini::host_chunk_count({5 * MiB, 1 * MiB, 1 * MiB}, 2 * MiB, 0.5), 1u);
}

TEST(GeminiPlacement, StaticOffloadOptimFracHalfPutsTheFirstTwoOfFourOptimizerChunksOnTheHost) {
  // Four 1.5 MiB opt tensors in 2 MiB chunks: one chunk each (A, B, C, D); 0.5 -> A and B on the
  // host. A closes when the second tensor comes (moved to the host then), B when the third does;
  // C and D stay. Each chunk is a reserved range with its 2 MiB mapped while on the device.
  const Trace t = with_marks({tagged_alloc(1, 1536 * KiB, kOpt), tagged_alloc(2, 1536 * KiB, kOpt),
                              tagged_alloc(3, 1536 * KiB, kOpt), tagged_alloc(4, 1536 * KiB, kOpt)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:2,offload_optim_frac:0.5", t);
  expect_clean(run);
  const Addr a = run.addr(0), b = run.addr(1), c = run.addr(2), d = run.addr(3);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{{DeviceCall::Map, a, 2 * MiB},
                                                      {DeviceCall::Unmap, a, 2 * MiB},
                                                      {DeviceCall::Map, b, 2 * MiB},
                                                      {DeviceCall::Unmap, b, 2 * MiB},
                                                      {DeviceCall::Map, c, 2 * MiB},
                                                      {DeviceCall::Map, d, 2 * MiB}}));
  EXPECT_EQ(stat(run.result, "chunk_host_bytes"), static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(stat(run.result, "device_to_host_bytes"), static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(stat(run.result, "host_to_device_bytes"), 0);
  EXPECT_EQ(run.result.metrics.host_bytes_moved, 4 * MiB);
  EXPECT_EQ(run.result.metrics.peak_reserved, 4 * MiB);  // never more than two chunks mapped
  EXPECT_EQ(run.reserved_at_end, 4 * MiB);               // C and D
}

TEST(GeminiPlacement, AnOffloadedChunkGoesToTheHostAtAMarkAndComesBackForTheNextTensor) {
  // offload_optim_frac 1.0: opt chunk A (4 MiB) is filled on the device and moved to the host at
  // the next mark (4 MiB device->host); the next opt tensor is appended to A, which comes back
  // first (4 MiB host->device) and leaves again at the following mark: 12 MiB moved in all.
  const Trace t = with_marks({tagged_alloc(1, 1 * MiB, kOpt), mark(kPhase, kOptimizer), tagged_alloc(2, 1 * MiB, kOpt),
                              mark(kPhase, kOptimizer)});
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:4,offload_optim_frac:1.0", t);
  expect_clean(run);
  EXPECT_EQ(run.addr(2), run.addr(0) + 1 * MiB);  // the same chunk, at the same address
  EXPECT_EQ(stat(run.result, "device_to_host_bytes"), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(stat(run.result, "host_to_device_bytes"), static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(stat(run.result, "chunk_fetches"), 1);
  EXPECT_EQ(run.result.metrics.host_bytes_moved, 12 * MiB);
  EXPECT_EQ(run.reserved_at_end, 0u);
}

// The trace of AutoEvicts... below (y0, z, then two steps of x1, y1, x2, y2) and its spec.
Trace auto_evict_trace() {
  return with_marks({
      tagged_alloc(1, 512 * KiB, kGrad),                                                                    // y0
      tagged_alloc(2, 4 * MiB, kParam),                                                                     // z
      mark(kStep, kOne), tagged_alloc(3, 1 * MiB, kParam),                                                  // x1
      tagged_alloc(4, 1 * MiB, kGrad),                                                                      // y1
      tagged_alloc(5, 512 * KiB, kParam),                                                                   // x2
      tagged_alloc(6, 512 * KiB, kGrad),                                                                    // y2
      free_of(3), free_of(4), free_of(5), free_of(6), mark(kStep, kTwo), tagged_alloc(7, 1 * MiB, kParam),  // x1
      tagged_alloc(8, 1 * MiB, kGrad),                                                                      // y1
      tagged_alloc(9, 512 * KiB, kParam),                                                                   // x2
      tagged_alloc(10, 512 * KiB, kGrad),                                                                   // y2
  });
}
const std::string kAutoEvictSpec =
    "gemini:inner:nocache,chunk_size_mb:4,placement:auto,warmup_non_model_data_ratio:0.2,steady_cuda_cap_ratio:0.5";

TEST(GeminiPlacement, AutoEvictsTheChunkWhoseNextUseIsFurthestAfterTheWarmUp) {
  // 4 MiB chunks, capacity 20 MiB, warm-up ratio 0.2 (model data may use 16 MiB), steady ratio
  // 0.5 (10 MiB minus the recorded non-model data, here 0: there is no untagged request).
  //  init:   grad y0 -> chunk Y; param z (4 MiB) -> chunk Z (full).
  //  step 1 (warm-up): x1 -> new param chunk X (Z closes, keeps z), y1 -> Y, x2 -> X, y2 -> Y;
  //          12 MiB of chunks <= 16: nothing moves. Compute list: X, Y, X, Y.
  //  step 2: x1 -> X (on the device, empty): demand 0, avail 10 - 12 = -2 < 0: 2 MiB to free.
  //          Movable: Y (y0 live) and Z, in address order Y, Z; next use after op 0: Y at op 1,
  //          Z never (4): Z goes first, and its 4 MiB are enough. Y stays (address order alone
  //          would have moved Y).
  const Trace t = auto_evict_trace();
  const PolicyRun run = run_policy(kAutoEvictSpec, t, 20 * MiB);
  expect_clean(run);
  const Addr y = run.addr(0), z = run.addr(1), x = run.addr(3);
  ASSERT_LT(y, z);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{{DeviceCall::Map, y, 4 * MiB},
                                                      {DeviceCall::Map, z, 4 * MiB},
                                                      {DeviceCall::Map, x, 4 * MiB},
                                                      {DeviceCall::Unmap, z, 4 * MiB}}));
  EXPECT_EQ(run.addr(12), x);                           // x1 again at X's start
  EXPECT_EQ(run.addr(13), y + 512 * KiB + 1536 * KiB);  // Y's fill point: y0, y1, y2 of step 1
  EXPECT_EQ(stat(run.result, "chunk_evictions"), 1);
  EXPECT_EQ(stat(run.result, "chunk_host_bytes"), static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(stat(run.result, "warmup_ops"), 4);
  EXPECT_EQ(run.result.metrics.host_bytes_moved, 4 * MiB);
  EXPECT_EQ(run.result.metrics.num_ooms, 0u);
  EXPECT_EQ(run.reserved_at_end, 8 * MiB);
}

// The anatomy after the last event of the AutoEvicts trace, by hand: X and Y mapped (8 MiB
// reserved), Z on the host holding z (4 MiB). Live: y0 0.5, z 4, and step 2's x1 1, y1 1, x2 0.5,
// y2 0.5 MiB: 7.5 MiB requested and held (a chunk tensor's block is its request: no rounding).
// Free in the mapped chunks: X 4 - 1.5 = 2.5, Y 4 - (0.5 + 1 + 0.5) = 2 MiB, all usable. z is
// host-resident: 4 MiB apart, so other = 8 - (7.5 - 4) - 4.5 = 0 (it was -4 MiB when z counted
// as held on the device), and the parts add up to reserved + host-resident - requested = 4.5 MiB.
TEST(GeminiPlacement, AnatomyListsHostResidentTensorsApartAndNoPartGoesNegative) {
  const Trace t = auto_evict_trace();
  SimDevice device(SimDeviceConfig{20 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy(kAutoEvictSpec, device);
  AnatomyAtEvent at_end(device, static_cast<std::int64_t>(t.events.size()) - 1);
  Replayer replayer(t, *policy, device);
  replayer.add_observer(&at_end);
  replayer.run(kAutoEvictSpec);
  ASSERT_TRUE(at_end.anatomy().has_value());
  const Anatomy& a = *at_end.anatomy();
  EXPECT_EQ(a.reserved, 8 * MiB);
  EXPECT_EQ(a.requested, 7 * MiB + 512 * KiB);
  EXPECT_EQ(a.host_resident, 4 * MiB);
  EXPECT_EQ(a.rounding, 0u);
  EXPECT_EQ(a.cached_free_usable, 4 * MiB + 512 * KiB);
  EXPECT_EQ(a.stream_bound, 0u);
  EXPECT_EQ(a.oversize_locked, 0u);
  EXPECT_EQ(a.small_pool, 0u);
  EXPECT_EQ(a.other, 0);
  EXPECT_EQ(a.sum_of_parts(), static_cast<std::int64_t>(4 * MiB + 512 * KiB));
  EXPECT_EQ(a.gap(), a.sum_of_parts());
}

// The same end state in a --timeline-anatomy row: host_resident_bytes is the last column, 4 MiB
// (z on the host), and the six parts add up to reserved + host-resident - requested =
// 8 + 4 - 7.5 = 4.5 MiB, by hand as above.
TEST(GeminiPlacement, TimelineAnatomyRowsListHostResidentBytes) {
  const Trace t = auto_evict_trace();
  std::ostringstream csv;
  TimelineWriter writer(csv, "gemini", 1, true);
  ReplayObservers observers;
  observers.timeline = &writer;
  run_replay(t, kAutoEvictSpec, parse_device_spec("sim:20MiB"), {}, observers);
  std::string text = csv.str();
  ASSERT_FALSE(text.empty());
  text.pop_back();  // the last row's newline
  std::vector<std::string> cells;
  std::stringstream last(text.substr(text.rfind('\n') + 1));
  for (std::string cell; std::getline(last, cell, ',');) cells.push_back(cell);
  ASSERT_EQ(cells.size(), 16u) << text;
  EXPECT_EQ(cells[1], std::to_string(t.events.size() - 1));
  EXPECT_EQ(std::stoll(cells[3]), static_cast<std::int64_t>(7 * MiB + 512 * KiB));  // requested
  EXPECT_EQ(std::stoll(cells[5]), static_cast<std::int64_t>(8 * MiB));              // reserved
  EXPECT_EQ(std::stoll(cells[15]), static_cast<std::int64_t>(4 * MiB));             // host_resident
  std::int64_t parts = 0;
  for (size_t i = 9; i < 15; ++i) parts += std::stoll(cells[i]);
  EXPECT_EQ(parts, static_cast<std::int64_t>(4 * MiB + 512 * KiB));
}

// A policy that keeps nothing on the host lists nothing there (the default placement).
TEST(GeminiPlacement, StaticPlacementHasNoHostResidentBytes) {
  const Trace t = auto_evict_trace();
  SimDevice device(SimDeviceConfig{20 * MiB, 0});
  std::unique_ptr<Policy> policy = create_policy("gemini:inner:nocache,chunk_size_mb:4", device);
  AnatomyAtEvent at_end(device, static_cast<std::int64_t>(t.events.size()) - 1);
  Replayer replayer(t, *policy, device);
  replayer.add_observer(&at_end);
  replayer.run("gemini");
  ASSERT_TRUE(at_end.anatomy().has_value());
  EXPECT_EQ(at_end.anatomy()->host_resident, 0u);
  EXPECT_EQ(at_end.anatomy()->reserved, 12 * MiB);  // X, Y and Z stay mapped
  EXPECT_EQ(at_end.anatomy()->other, 0);
}

TEST(GeminiPlacement, AutoReportsOutOfMemoryWhenEvictingEverythingIsNotEnough) {
  // Warm-up ratio 0.9 of 20 MiB leaves 2 MiB to model data: the first 4 MiB chunk cannot be made
  // room for (nothing to move): Gemini's "Adjust layout failed", an out-of-memory result here.
  const Trace t = with_marks({tagged_alloc(1, 1 * MiB, kParam)});
  const PolicyRun run =
      run_policy("gemini:inner:nocache,chunk_size_mb:4,placement:auto,warmup_non_model_data_ratio:0.9", t, 20 * MiB);
  EXPECT_EQ(run.result.metrics.num_ooms, 1u);
  ASSERT_EQ(run.result.ooms.size(), 1u);
  EXPECT_NE(run.result.ooms[0].message.find("Adjust layout failed! No enough CUDA memory! Need 2097152, freed 0"),
            std::string::npos)
      << run.result.ooms[0].message;
}

TEST(GeminiPlacement, OtherPoliciesMoveNoHostBytesAndTheDefaultPlacementNone) {
  const Trace t = with_marks({tagged_alloc(1, 1 * MiB, kOpt), mark(kPhase, kOptimizer)});
  EXPECT_EQ(run_policy("pytorch", t).result.metrics.host_bytes_moved, 0u);
  const PolicyRun run = run_policy("gemini:inner:nocache,chunk_size_mb:4", t);
  EXPECT_EQ(run.result.metrics.host_bytes_moved, 0u);
  EXPECT_EQ(run.calls, (std::vector<DeviceCallRecord>{malloc_at(0, 4 * MiB)}));  // one malloc, as before
}

TEST(GeminiPlacement, BadPlacementOptionsNameTheKeyAndTheAcceptedValues) {
  const auto message = spec_error;
  EXPECT_EQ(message("gemini:placement:cpu"), "gemini: placement: expected static or auto, got 'cpu'");
  EXPECT_EQ(message("gemini:offload_optim_frac:1.5"),
            "gemini: offload_optim_frac: expected a number from 0 to 1 (e.g. 0.5), got '1.5'");
  EXPECT_EQ(message("gemini:steady_cuda_cap_ratio:1"),
            "gemini: steady_cuda_cap_ratio: expected a number between 0 and 1, both excluded (e.g. 0.9), got '1'");
  EXPECT_EQ(
      message("gemini:shard_param_frac:0.5"),
      "gemini: shard_param_frac: expected 1.0 (the trace's sharding is fixed by the run that made it), got '0.5'");
  EXPECT_EQ(message("gemini:offload_optim_frac:1.0,offload_param_frac:0.5"),
            "gemini: offload_param_frac: only 0 is modelled (offloading parameter chunks after each use is not); use "
            "placement:auto to move parameter chunks between device and host");
  EXPECT_EQ(message("gemini:placement:auto,warmup_non_model_data_ratio:0.5,steady_cuda_cap_ratio:0.95"), "(no error)");
}

}  // namespace
}  // namespace fraglab::test
