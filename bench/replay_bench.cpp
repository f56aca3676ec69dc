// Replay throughput: a parsed trace through a policy on a fresh simulated device per iteration,
// through run_replay as every command replays, with the options of `fraglab replay` without
// --stats (no detailed statistics: the pytorch policy then skips its usage statistics).
// items_per_second = trace events replayed per second (single thread). Targets: every policy
// >= 1 M events/s on lm2.7b-ctx128-fullstep; offline plans and replays 1 M events < 10 s.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>

#include "fraglab/run_replay.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"

namespace fraglab {
namespace {

const std::string kReal = FRAGLAB_REAL_TRACES;

void replay(benchmark::State& state, const Trace& trace, const std::string& spec) {
  const DeviceSpec device;  // the default sim device, 80 GiB
  ReplayOptions options;
  options.detailed_stats = false;
  for (auto _ : state) {
    ReplayResult result = run_replay(trace, spec, device, options);
    benchmark::DoNotOptimize(result.metrics.peak_reserved);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * trace.events.size()));
  state.counters["events"] = static_cast<double>(trace.events.size());
}

void replay_real_trace(benchmark::State& state, const std::string& file, const std::string& spec) {
  const std::string path = kReal + "/" + file;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  static const Trace trace = read_trace(path);  // one file for every entry below
  replay(state, trace, spec);
}

// The same file read with its stack frames kept (--frames 64): the replay ignores them, so this
// should match replay_real_trace under the same policy.
void replay_real_trace_frames(benchmark::State& state, const std::string& file, const std::string& spec) {
  const std::string path = kReal + "/" + file;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  static const Trace trace = read_trace(path, TraceReadOptions{.frames = 64});
  replay(state, trace, spec);
}

// A tagged ZeRO-3 trace of GPT2-XL (gemini needs tags; the real snapshots have none).
const Trace& gpt2_xl_zero3(std::uint32_t steps) {
  static std::map<std::uint32_t, Trace> traces;
  auto it = traces.find(steps);
  if (it != traces.end()) return it->second;
  WorkloadOptions o;
  o.model = builtin_model("gpt2-xl");
  o.framework = Framework::Zero3;
  o.micro_batch = 8;
  o.steps = steps;
  return traces.emplace(steps, generate_trace(o)).first->second;
}

void replay_generated(benchmark::State& state, std::uint32_t steps, const std::string& spec) {
  replay(state, gpt2_xl_zero3(steps), spec);
}

#define LM27B(name, spec)                                                                   \
  BENCHMARK_CAPTURE(replay_real_trace, lm27b_##name, "lm2.7b-ctx128-fullstep.pickle", spec) \
      ->Unit(benchmark::kMillisecond)

LM27B(pytorch_default, "pytorch");
LM27B(pytorch_expandable, "pytorch:expandable_segments:True");
LM27B(nocache, "nocache");
LM27B(bestfit, "bestfit");
LM27B(buddy, "buddy");
LM27B(tlsf, "tlsf");
LM27B(cuda_async, "cuda_async");
LM27B(gmlake, "gmlake");
LM27B(offline, "offline");
BENCHMARK_CAPTURE(replay_real_trace_frames, lm27b_pytorch_default_frames64, "lm2.7b-ctx128-fullstep.pickle", "pytorch")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(replay_generated, gpt2xl_zero3_3steps_gemini, 3, "gemini")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(replay_generated, gpt2xl_zero3_3steps_pytorch, 3, "pytorch")->Unit(benchmark::kMillisecond);
// The 1 M-event target of offline: 75 steps of the same workload are about 1.05 M events.
BENCHMARK_CAPTURE(replay_generated, gpt2xl_zero3_1M_events_offline, 75, "offline")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace fraglab
