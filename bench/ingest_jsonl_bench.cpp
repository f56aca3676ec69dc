// JSONL ingest and write speed on a deterministic synthetic trace of ~1 M events: the shape of a
// recorded training run (allocs and frees of mixed sizes on a few streams, tags, recorded
// addresses and times, deferred cross-stream frees, step marks). items_per_second = events.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "fraglab/rng.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/trace_stream.hpp"

namespace {

using namespace fraglab;

Trace synthetic_trace(std::size_t target_events) {
  Trace t;
  t.name = "synthetic";
  t.source = "ingest_jsonl_bench";
  const std::uint32_t tags[] = {t.intern("param"), t.intern("grad"), t.intern("act"),
                                t.intern("opt"),   t.intern("comm"), t.intern("temp")};
  const std::uint32_t step_label = t.intern("step");
  const StreamId streams[] = {0, 0x55d0c4a3f1b0, 0x55d0c4a3f2c0};
  struct Live {
    AllocId id;
    bool deferred;
  };
  std::vector<Live> live;
  Rng rng{42};
  AllocId next_id = 1;
  Addr next_addr = 0x7f0000000000;
  std::int64_t now = 1'700'000'000'000'000;
  std::size_t step = 0;
  while (t.events.size() < target_events) {
    now += static_cast<std::int64_t>(1 + rng.below(50));
    if (t.events.size() % 20000 == 0) {
      Event m;
      m.op = Op::Mark;
      m.id = step_label;
      m.size = t.intern(std::to_string(step++));
      t.events.push_back(m);
      continue;
    }
    // Grow the live set to ~2000 allocations, then keep it there.
    bool do_alloc = live.size() < 100 || (live.size() < 4000 && rng.below(2) == 0);
    if (do_alloc) {
      Event e;
      e.op = Op::Alloc;
      e.id = next_id++;
      std::uint64_t r = rng.below(100);
      e.size = r < 70   ? 512 * (1 + rng.below(2048))                    // small: up to 1 MiB
               : r < 95 ? MiB * (1 + rng.below(20))                      // medium
                        : MiB * (20 + rng.below(44)) + rng.below(4096);  // large, odd sizes
      e.stream = streams[rng.below(10) < 8 ? 0 : 1 + rng.below(2)];
      e.has_addr = true;
      e.addr = next_addr;
      next_addr += (e.size + 511) / 512 * 512;
      e.tag = tags[rng.below(6)];
      e.has_time = true;
      e.time_us = now;
      t.events.push_back(e);
      live.push_back({e.id, e.stream != 0 && rng.below(4) == 0});
    } else {
      std::size_t k = rng.below(live.size());
      Live victim = live[k];
      live[k] = live.back();
      live.pop_back();
      Event e;
      e.id = victim.id;
      e.has_time = true;
      e.time_us = now;
      if (victim.deferred) {  // a cross-stream use: the free completes a little later
        e.op = Op::FreeRequested;
        t.events.push_back(e);
        e.op = Op::FreeCompleted;
        e.time_us = now + 3;
      } else {
        e.op = Op::Free;
      }
      t.events.push_back(e);
    }
  }
  return t;
}

const Trace& bench_trace() {
  static const Trace trace = synthetic_trace(1'000'000);
  return trace;
}

const std::string& bench_text() {
  static const std::string text = [] {
    std::ostringstream out;
    write_jsonl(bench_trace(), out);
    return std::move(out).str();
  }();
  return text;
}

void BM_ParseJsonl(benchmark::State& state) {
  const std::string& text = bench_text();
  std::size_t events = 0;
  for (auto _ : state) {
    Trace t = parse_jsonl(text, "bench");
    events = t.events.size();
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_ParseJsonl)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same text streamed from a file (fraglab/trace_stream.hpp, what `replay` does with a plain
// JSONL file): read a window at a time into one reused buffer and parsed into one reused vector,
// never held whole; the file is in the page cache after the first round.
void BM_StreamJsonl(benchmark::State& state) {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() / "fraglab-bench-stream.jsonl").string();
    std::ofstream(p, std::ios::binary) << bench_text();
    return p;
  }();
  std::size_t events = 0;
  std::vector<Event> window;
  for (auto _ : state) {
    std::unique_ptr<TraceStream> stream = TraceStream::open(path);
    if (!stream) {
      state.SkipWithError("cannot stream the bench file");
      return;
    }
    events = 0;
    while (stream->next(window)) events += window.size();
    benchmark::DoNotOptimize(window.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bench_text().size()));
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_StreamJsonl)->Unit(benchmark::kMillisecond)->UseRealTime();

// Counts bytes and drops them: measures the writer, not a growing ostringstream.
class DiscardBuf : public std::streambuf {
 public:
  std::size_t bytes = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<std::size_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    ++bytes;
    return c;
  }
};

void BM_WriteJsonl(benchmark::State& state) {
  const Trace& trace = bench_trace();
  std::size_t bytes = 0;
  for (auto _ : state) {
    DiscardBuf buf;
    std::ostream out(&buf);
    write_jsonl(trace, out);
    bytes = buf.bytes;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * trace.events.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_WriteJsonl)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
