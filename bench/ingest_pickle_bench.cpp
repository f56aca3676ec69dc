// PyTorch snapshot ingest speed, end to end (pickle bytes in memory -> validated Trace):
//  - each real snapshot in ../shared/traces/real (every entry carries 14-263 stack frames, so
//    most of each file is frames);
//  - a synthetic frame-less snapshot of ~1 M entries, encoded below the way Python's
//    pickle.dump (protocol 4) encodes _dump_snapshot()'s dict: FRAMEs of 64 KiB, MEMOIZE after
//    each container and new string, repeated keys fetched with BINGET.
// items_per_second = snapshot trace entries (Trace::source_entries), events_per_second = trace
// events made from them. The *Pickle* variants time the pickle reader alone, as parse_snapshot
// runs it (stack frames skipped), to show where the time goes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fraglab/rng.hpp"
#include "fraglab/trace_io.hpp"
#include "trace/pickle.hpp"

namespace {

using namespace fraglab;

// A protocol-4 pickle writer for exactly the shapes a snapshot needs.
class SnapshotPickler {
 public:
  SnapshotPickler() { out_ = "\x80\x04"; }

  void begin_dict() {
    op('}');
    memoize();
    op('(');
  }
  void end_dict() { op('u'); }
  void begin_list() {
    op(']');
    memoize();
    op('(');
    batch_.push_back(0);
  }
  // After each item of the innermost list: CPython's pickler ends an APPENDS batch every 1000
  // items (pickle._BATCHSIZE), so a long list never sits whole on the unpickler's stack.
  void list_item() {
    if (++batch_.back() == 1000) {
      op('e');
      op('(');
      batch_.back() = 0;
    }
  }
  void end_list() {
    op('e');
    batch_.pop_back();
  }
  void empty_list() {
    op(']');
    memoize();
  }
  void empty_dict() {
    op('}');
    memoize();
  }
  void boolean(bool b) { op(b ? '\x88' : '\x89'); }

  // A str: the first occurrence is written and memoized, later ones are memo GETs (CPython
  // memoizes by object identity; snapshot keys and actions are interned, so this is its output).
  void str(const std::string& s) {
    if (auto it = strings_.find(s); it != strings_.end()) {
      if (it->second < 256) {
        op('h');
        le(it->second, 1);
      } else {
        op('j');
        le(it->second, 4);
      }
      return;
    }
    op('\x8c');
    le(s.size(), 1);
    body_ += s;
    strings_[s] = memo_;
    memoize();
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      le(static_cast<std::uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      op('M');
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<std::uint64_t>(v), 4);
    } else {
      std::string bytes;
      for (std::int64_t x = v;;) {
        bytes.push_back(static_cast<char>(x & 0xff));
        std::int64_t rest = x >> 8;
        bool sign = bytes.back() & 0x80;
        if ((rest == 0 && !sign) || (rest == -1 && sign)) break;
        x = rest;
      }
      op('\x8a');
      le(bytes.size(), 1);
      body_ += bytes;
    }
  }
  void key(const char* k) { str(k); }

  // Python's framer commits a frame once it reaches 64 KiB, at an opcode boundary.
  void maybe_commit_frame() {
    if (body_.size() >= 65536) commit_frame();
  }
  std::string finish() {
    op('.');
    commit_frame();
    return std::move(out_);
  }

 private:
  void op(char c) { body_.push_back(c); }
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) body_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void memoize() {
    op('\x94');
    ++memo_;
  }
  void commit_frame() {
    if (body_.empty()) return;
    out_.push_back('\x95');
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((body_.size() >> (8 * i)) & 0xff));
    out_ += body_;
    body_.clear();
  }

  std::string out_;
  std::string body_;
  std::uint32_t memo_ = 0;
  std::map<std::string, std::uint32_t> strings_;
  std::vector<int> batch_;  // items in the current APPENDS batch, per open list
};

// ~`entries` trace entries without frames: one 8 GiB segment allocated first, then allocs of
// mixed sizes and their frees (a free_requested/free_completed pair, 1 in 8 deferred past later
// entries), keeping ~1000 allocations live; everything is freed by the end, so the snapshot's
// segment holds one inactive block.
std::string synthetic_snapshot(std::size_t entries) {
  const std::uint64_t base = 0x7f3a00000000, seg_size = 8 * GiB;
  SnapshotPickler p;
  Rng rng{7};
  std::int64_t now = 1'748'730'219'595'970;
  auto entry = [&](const char* action, std::uint64_t addr, std::uint64_t size) {
    p.begin_dict();
    p.key("action");
    p.str(action);
    p.key("addr");
    p.integer(static_cast<std::int64_t>(addr));
    p.key("size");
    p.integer(static_cast<std::int64_t>(size));
    p.key("stream");
    p.integer(0);
    p.key("time_us");
    p.integer(now += 1 + static_cast<std::int64_t>(rng.below(40)));
    p.key("frames");
    p.empty_list();
    p.end_dict();
    p.list_item();
    p.maybe_commit_frame();
  };

  p.begin_dict();
  p.key("segments");
  p.begin_list();
  p.begin_dict();
  p.key("device");
  p.integer(0);
  p.key("address");
  p.integer(static_cast<std::int64_t>(base));
  p.key("total_size");
  p.integer(static_cast<std::int64_t>(seg_size));
  p.key("allocated_size");
  p.integer(0);
  p.key("active_size");
  p.integer(0);
  p.key("requested_size");
  p.integer(0);
  p.key("stream");
  p.integer(0);
  p.key("segment_type");
  p.str("large");
  p.key("is_expandable");
  p.boolean(false);
  p.key("frames");
  p.empty_list();
  p.key("blocks");
  p.begin_list();
  p.begin_dict();
  p.key("address");
  p.integer(static_cast<std::int64_t>(base));
  p.key("size");
  p.integer(static_cast<std::int64_t>(seg_size));
  p.key("requested_size");
  p.integer(0);
  p.key("state");
  p.str("inactive");
  p.key("frames");
  p.empty_list();
  p.end_dict();
  p.end_list();
  p.end_dict();
  p.end_list();

  p.key("device_traces");
  p.begin_list();
  p.begin_list();
  entry("segment_alloc", base, seg_size);
  // Slots of 4 MiB inside the segment; a slot is reused only after its free completed.
  const std::size_t slots = 2048;
  std::vector<std::uint64_t> live_size(slots, 0);
  std::vector<std::size_t> deferred;  // slots with a free_requested awaiting completion
  std::size_t written = 1, live = 0;
  while (written + 4 < entries) {
    std::size_t slot = rng.below(slots);
    std::uint64_t addr = base + slot * 4 * MiB;
    if (live_size[slot] == 0 && live < 1000) {
      std::uint64_t size = 1 + rng.below(rng.below(4) == 0 ? 4 * MiB : 64 * KiB);
      entry("alloc", addr, size);
      live_size[slot] = size;
      ++live;
      ++written;
    } else if (live_size[slot] != 0 && std::find(deferred.begin(), deferred.end(), slot) == deferred.end()) {
      entry("free_requested", addr, live_size[slot]);
      ++written;
      if (rng.below(8) == 0) {
        deferred.push_back(slot);
      } else {
        entry("free_completed", addr, live_size[slot]);
        live_size[slot] = 0;
        --live;
        ++written;
      }
    }
    if (deferred.size() > 4 || (!deferred.empty() && rng.below(16) == 0)) {
      std::size_t s = deferred.front();
      deferred.erase(deferred.begin());
      entry("free_completed", base + s * 4 * MiB, live_size[s]);
      live_size[s] = 0;
      --live;
      ++written;
    }
  }
  // Free everything still live (the snapshot's block is inactive).
  for (std::size_t s = 0; s < slots; ++s) {
    if (!live_size[s]) continue;
    if (std::find(deferred.begin(), deferred.end(), s) == deferred.end())
      entry("free_requested", base + s * 4 * MiB, live_size[s]);
    entry("free_completed", base + s * 4 * MiB, live_size[s]);
  }
  p.end_list();
  p.end_list();

  p.key("allocator_settings");
  p.begin_dict();
  p.key("PYTORCH_CUDA_ALLOC_CONF");
  p.str("");
  p.key("max_split_size");
  p.integer(-1);
  p.key("expandable_segments");
  p.boolean(false);
  p.end_dict();
  p.end_dict();
  return p.finish();
}

// Items are the snapshot's trace entries: its events, as PyTorch (`max_entries` "alloc/free
// events") and shared/traces/real/README.md count them. With `first_parse`, each parse starts
// without the arena chunk the last one kept (pickle::Arena::kMaxSpareChunk), as the first parse
// of a process does: the kernel faults in and zeroes the arena's pages again.
void run_snapshot(benchmark::State& state, const std::string& bytes, const std::string& origin,
                  bool first_parse = false, std::uint32_t frames = 0) {
  std::uint64_t entries = 0, events = 0;
  for (auto _ : state) {
    if (first_parse) {
      state.PauseTiming();
      pickle::Arena::release_spare_chunk();
      state.ResumeTiming();
    }
    Trace t = parse_snapshot(bytes, origin, TraceReadOptions{.frames = frames});
    entries = t.source_entries;
    events = t.events.size();
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * entries));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
  state.counters["entries"] = static_cast<double>(entries);
  // Trace events made: fewer than entries, as a free_requested followed by its free_completed
  // becomes one free event.
  state.counters["trace_events_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * events), benchmark::Counter::kIsRate);
}

void run_pickle_only(benchmark::State& state, const std::string& bytes, const std::string& origin) {
  const std::uint64_t entries = parse_snapshot(bytes, origin).source_entries;
  for (auto _ : state) {
    pickle::PickleDocument doc(bytes, origin, {.skip_key = "frames"});
    benchmark::DoNotOptimize(doc.root().kind);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * entries));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

bool load_real(benchmark::State& state, const char* file, std::string& bytes, std::string& path) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  path = (dir / file).string();
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("real traces not found");
    return false;
  }
  bytes = read_file_bytes(path);
  return true;
}

void BM_SnapshotReal(benchmark::State& state, const char* file) {
  std::string bytes, path;
  if (!load_real(state, file, bytes, path)) return;
  run_snapshot(state, bytes, path);
}

void BM_SnapshotRealFirstParse(benchmark::State& state, const char* file) {
  std::string bytes, path;
  if (!load_real(state, file, bytes, path)) return;
  run_snapshot(state, bytes, path, /*first_parse=*/true);
}

// With --frames N (state.range(0)): every container built, the top N frames of each entry interned.
void BM_SnapshotRealFrames(benchmark::State& state, const char* file) {
  std::string bytes, path;
  if (!load_real(state, file, bytes, path)) return;
  run_snapshot(state, bytes, path, false, static_cast<std::uint32_t>(state.range(0)));
}

// A snapshot converted with --frames N, read back as JSONL (frames and stacks tables in the
// header, a "stack" on each event line).
void BM_ParseJsonlRealFrames(benchmark::State& state, const char* file) {
  std::string bytes, path;
  if (!load_real(state, file, bytes, path)) return;
  std::ostringstream out;
  write_jsonl(parse_snapshot(bytes, path, TraceReadOptions{.frames = static_cast<std::uint32_t>(state.range(0))}), out);
  const std::string text = out.str();
  std::uint64_t events = 0;
  for (auto _ : state) {
    Trace t = parse_jsonl(text, path);
    events = t.events.size();
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

void BM_PickleReal(benchmark::State& state, const char* file) {
  std::string bytes, path;
  if (!load_real(state, file, bytes, path)) return;
  run_pickle_only(state, bytes, path);
}

void BM_SnapshotSyntheticNoFrames(benchmark::State& state) {
  const std::string bytes = synthetic_snapshot(static_cast<std::size_t>(state.range(0)));
  run_snapshot(state, bytes, "synthetic.pickle");
}

void BM_PickleSyntheticNoFrames(benchmark::State& state) {
  const std::string bytes = synthetic_snapshot(static_cast<std::size_t>(state.range(0)));
  run_pickle_only(state, bytes, "synthetic.pickle");
}

#define FRAGLAB_REAL_SNAPSHOT(name, file)                                        \
  BENCHMARK_CAPTURE(BM_SnapshotReal, name, file)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_PickleReal, name, file)->Unit(benchmark::kMillisecond)

FRAGLAB_REAL_SNAPSHOT(tiny_segments, "tiny-segments.pickle");
FRAGLAB_REAL_SNAPSHOT(finetune_oldformat, "finetune-step-oldformat.pickle");
FRAGLAB_REAL_SNAPSHOT(gpt2medium_cutoff, "gpt2medium-ctx128-train-cutoff.pickle");
FRAGLAB_REAL_SNAPSHOT(lm_forward_nosegments, "lm-forward-bf16-nosegments.pickle");
FRAGLAB_REAL_SNAPSHOT(lm27b_ctx128_fullstep, "lm2.7b-ctx128-fullstep.pickle");
FRAGLAB_REAL_SNAPSHOT(lm27b_ctx512_forward, "lm2.7b-ctx512-forward-bf16.pickle");

BENCHMARK_CAPTURE(BM_SnapshotRealFirstParse, lm27b_ctx128_fullstep, "lm2.7b-ctx128-fullstep.pickle")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_SnapshotRealFrames, lm27b_ctx128_fullstep, "lm2.7b-ctx128-fullstep.pickle")
    ->Arg(0)
    ->Arg(16)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ParseJsonlRealFrames, lm27b_ctx128_fullstep, "lm2.7b-ctx128-fullstep.pickle")
    ->Arg(0)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SnapshotSyntheticNoFrames)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PickleSyntheticNoFrames)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
