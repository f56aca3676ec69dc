// Sweep throughput: 210 settings of the pytorch policy over the real lm2.7b full-step snapshot
// (19.3k events), on 1 and 2 worker threads. The trace is parsed once, outside the timing, as
// `fraglab sweep` does. items_per_second = replays per second; wall time is the figure that
// matters (UseRealTime) and process CPU time shows whether the machine was shared while it ran.
// Targets (the sweep issue): the 210 runs in under 10 s on 2 cores; 2 threads >= 1.8x 1 thread.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "fraglab/sweep.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab {
namespace {

const std::string kTrace = std::string(FRAGLAB_REAL_TRACES) + "/lm2.7b-ctx128-fullstep.pickle";

// 7 x 2 x 5 x 3 = 210 settings: the knobs users sweep (what users tune in PYTORCH_CUDA_ALLOC_CONF).
std::vector<Setting> bench_settings() {
  SweepGrid grid;
  grid.axes = {parse_grid_axis("max_split_size_mb=none,20,32,64,128,256,512"),
               parse_grid_axis("expandable_segments=False,True"),
               parse_grid_axis("roundup_power2_divisions=none,1,2,4,8"),
               parse_grid_axis("garbage_collection_threshold=none,0.5,0.8")};
  return expand_grid(grid);
}

void sweep_lm27b(benchmark::State& state) {
  if (!std::filesystem::exists(kTrace)) {
    state.SkipWithError(("missing " + kTrace).c_str());
    return;
  }
  static const Trace trace = read_trace(kTrace);
  const std::vector<Setting> settings = bench_settings();
  std::vector<SweepJob> jobs;
  jobs.reserve(settings.size());
  for (const Setting& s : settings) jobs.push_back({&trace, s.spec});
  SweepRunOptions options;
  options.threads = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    Bytes total = 0;
    run_sweep(jobs, options, [&](std::size_t, const ReplayResult& r) { total += r.metrics.peak_reserved; });
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * jobs.size()));
  state.counters["settings"] = static_cast<double>(jobs.size());
}

BENCHMARK(sweep_lm27b)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Iterations(3);

}  // namespace
}  // namespace fraglab
