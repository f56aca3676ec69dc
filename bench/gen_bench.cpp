// Trace generation speed (fraglab gen): 50 training steps of T5-3B at micro-batch 64, N=2, bf16,
// recomputation on, dynamic padding, under DeepSpeed ZeRO-3 and FSDP1 — the size of the runs in
// docs/workloads.md. Target: under 2 s each in a Release build. items_per_second = events.
#include <benchmark/benchmark.h>

#include "fraglab/workload.hpp"

namespace fraglab {
namespace {

void generate_t5_3b(benchmark::State& state, Framework framework) {
  WorkloadOptions o;
  o.model = builtin_model("t5-3b");
  o.framework = framework;
  o.world_size = 2;
  o.micro_batch = 64;
  o.steps = 50;
  o.padding = Padding::Longest;
  std::size_t events = 0;
  for (auto _ : state) {
    Trace t = generate_trace(o);
    events = t.events.size();
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.counters["events"] = static_cast<double>(events);
}

BENCHMARK_CAPTURE(generate_t5_3b, zero3_b64_50_steps, Framework::Zero3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_t5_3b, fsdp1_b64_50_steps, Framework::Fsdp1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fraglab
