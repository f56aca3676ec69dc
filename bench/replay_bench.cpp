// Replay throughput: a parsed trace through a policy on a fresh simulated device per iteration.
// items_per_second = trace events replayed per second (single thread).
#include <benchmark/benchmark.h>

#include <filesystem>

#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab {
namespace {

const std::string kReal = FRAGLAB_REAL_TRACES;

void replay_real_trace(benchmark::State& state, const std::string& file, const std::string& spec) {
  const std::string path = kReal + "/" + file;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  const Trace trace = read_trace(path);
  for (auto _ : state) {
    SimDevice device;
    auto policy = create_policy(spec, device);
    Replayer replayer(trace, *policy, device);
    ReplayResult result = replayer.run(spec);
    benchmark::DoNotOptimize(result.metrics.peak_reserved);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * trace.events.size()));
}

BENCHMARK_CAPTURE(replay_real_trace, lm27b_pytorch_default, "lm2.7b-ctx128-fullstep.pickle", "pytorch")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(replay_real_trace, lm27b_pytorch_expandable, "lm2.7b-ctx128-fullstep.pickle",
                  "pytorch:expandable_segments:True")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(replay_real_trace, lm27b_nocache, "lm2.7b-ctx128-fullstep.pickle", "nocache")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fraglab
