// StreamedReplay (fraglab/run_replay.hpp) over a TraceStream (fraglab/trace_stream.hpp): a trace
// fed to the Replayer a window at a time gives the result of the whole-trace replay, field for
// field, for every policy that may be streamed, on the shipped samples, on generated traces and on
// request-only traces made from the real snapshots.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "fraglab/report.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/trace_identity.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/trace_stream.hpp"
#include "fraglab/workload.hpp"
#include "support/command.hpp"
#include "support/events.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;

// Every policy whose prepare() needs no events (the CLI streams these: src/cli/streamed_replay.cpp).
const std::vector<std::string> kSpecs = {"pytorch",
                                         "pytorch:expandable_segments:True",
                                         "pytorch:max_split_size_mb:20,roundup_power2_divisions:4",
                                         "tlsf",
                                         "nocache",
                                         "buddy",
                                         "bestfit",
                                         "gmlake",
                                         "cuda_async"};

// Everything a run reports: its JSON (metrics, OOMs, stats, notes, anatomy, invariant count).
std::string result_text(const ReplayResult& r) {
  return run_json(r, ReportOptions{.include_timing = false, .include_stats = true}).dump();
}

ReplayResult streamed_run(const fs::path& path, const std::string& spec, const DeviceSpec& device,
                          const ReplayOptions& options, const ReplayObservers& observers, std::size_t window,
                          std::string* hash = nullptr) {
  std::unique_ptr<TraceStream> stream = TraceStream::open(path.string(), {}, window);
  EXPECT_NE(stream, nullptr);
  if (!stream) return {};
  StreamedReplay replay(spec, device, stream->trace(), options, observers);
  RequestHasher hasher;
  std::vector<Event> events;
  while (stream->next(events)) {
    for (const Event& e : events) hasher.add(e);
    replay.feed(events);
  }
  if (hash != nullptr) *hash = hasher.value();
  ReplayResult result = replay.finish();
  if (replay.needs_anatomy_pass()) {
    std::unique_ptr<TraceStream> again = TraceStream::open(path.string(), {}, window);
    StreamedReplay second(spec, device, again->trace(), options, {}, result.metrics.peak_reserved_event);
    while (again->next(events)) second.feed(events);
    result.anatomy_at_peak = second.finish().anatomy_at_peak;
  }
  return result;
}

// Streamed (in windows of each size) and whole: the same result for every spec.
// `invariants`: also check them after every event (costly on long traces).
void expect_streamed_equals_whole(const fs::path& path, const std::string& device_text,
                                  const std::vector<std::size_t>& windows, bool stop_on_oom = false,
                                  bool invariants = true) {
  const Trace whole = read_trace(path.string());
  const DeviceSpec device = parse_device_spec(device_text);
  ReplayOptions options;
  options.stop_on_oom = stop_on_oom;
  ReplayObservers observers;
  observers.anatomy = true;
  observers.check_invariants = invariants;
  for (const std::string& spec : kSpecs) {
    SCOPED_TRACE(spec + " on " + device_text);
    const std::string expected = result_text(run_replay(whole, spec, device, options, observers));
    for (std::size_t window : windows) {
      SCOPED_TRACE(window);
      std::string hash;
      EXPECT_EQ(result_text(streamed_run(path, spec, device, options, observers, window, &hash)), expected);
      EXPECT_EQ(hash, request_hash(whole));
    }
  }
}

TEST(StreamedReplay, ShippedSamplesGiveTheWholeReplaysResults) {
  int streamed = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGLAB_SOURCE_DIR) / "traces/samples")) {
    if (entry.path().extension() != ".jsonl" || !TraceStream::open(entry.path().string())) continue;
    SCOPED_TRACE(entry.path());
    ++streamed;
    // 80 GiB, and small enough for retries and OOMs (the samples peak at 100-300 MiB).
    expect_streamed_equals_whole(entry.path(), "sim:80GiB", {300, TraceStream::kDefaultWindow});
    expect_streamed_equals_whole(entry.path(), "sim:150MiB", {300});
    expect_streamed_equals_whole(entry.path(), "sim:150MiB", {300}, true);
  }
  EXPECT_GE(streamed, 4);  // all but those with a start state
}

TEST(StreamedReplay, GeneratedTracesGiveTheWholeReplaysResults) {
  const fs::path dir = testing::scratch_dir("streamed_replay");
  struct Case {
    const char* model;
    Framework framework;
    std::uint32_t steps;
  };
  for (const Case& c : {Case{"gpt2-xl", Framework::Zero3, 1}, Case{"t5-3b", Framework::Fsdp1, 1}}) {
    WorkloadOptions o;
    o.model = builtin_model(c.model);
    o.framework = c.framework;
    o.micro_batch = 1;
    o.steps = c.steps;
    const fs::path path = dir / (std::string(c.model) + ".jsonl");
    write_jsonl_file(generate_trace(o), path.string());
    SCOPED_TRACE(path);
    expect_streamed_equals_whole(path, "sim:80GiB", {65536}, false, false);
    expect_streamed_equals_whole(path, "sim:4GiB", {TraceStream::kDefaultWindow}, false, false);
  }
}

// A streamed replay keeps live ids in pages of 4,096 slots, dropping a page once nothing in it is
// live and keeping the last one dropped as a spare for the next new page. This trace empties
// pages and takes the spare back under other page numbers: page 0 emptied, then page 1 made from
// it; alloc/free pairs through the rest of page 1 and into page 2, which empties after every pair;
// then page 1 emptied, and new ids in page 0 land on slots that held ids of page 2. A slot left as
// it was by a page's earlier use would count the page's live slots wrong: a free ignored, or a
// page dropped with an allocation still live, and the results would differ from the whole replay.
TEST(StreamedReplay, PagesEmptiedAndTakenBackGiveTheWholeReplaysResults) {
  using test::alloc;
  using test::with_op;
  std::vector<Event> events = {alloc(1, 1 * MiB),    alloc(2, 3 * MiB),    alloc(3, 500 * KiB), with_op(Op::Free, 1),
                               with_op(Op::Free, 2), with_op(Op::Free, 3), alloc(4100, 2 * MiB)};
  for (AllocId id = 4101; id <= 8300; ++id) {
    events.push_back(alloc(id, (id * 7919) % (5 * MiB) + 1));
    events.push_back(with_op(Op::Free, id));
  }
  events.push_back(with_op(Op::Free, 4100));
  for (const AllocId id : {5, 6, 8199}) events.push_back(alloc(id, id * KiB));
  for (const AllocId id : {6, 8199, 5}) events.push_back(with_op(Op::Free, id));
  Trace trace;
  trace.name = "pages";
  trace.events = std::move(events);
  validate_trace(trace, "pages");
  const fs::path path = testing::scratch_dir("streamed_replay") / "pages.jsonl";
  write_jsonl_file(trace, path.string());
  expect_streamed_equals_whole(path, "sim:80GiB", {300, TraceStream::kDefaultWindow});
  expect_streamed_equals_whole(path, "sim:12MiB", {300});  // OOMs: their slots are freed too
}

// A real snapshot's requests without its start state and observed events: what a streamed replay
// reads (the frees of allocations live at the start go with them).
Trace requests_only(const Trace& t) {
  Trace out;
  out.name = t.name;
  out.source = "test";
  out.strings = t.strings;
  std::set<AllocId> initial;
  for (const InitialAllocation& a : t.initial.allocations) initial.insert(a.id);
  for (const Event& e : t.events) {
    if (is_observed(e.op)) continue;
    const bool release = e.op == Op::Free || e.op == Op::FreeCompleted;
    if ((release || e.op == Op::FreeRequested) && initial.count(e.id)) {
      if (release) initial.erase(e.id);
      continue;
    }
    out.events.push_back(e);
  }
  validate_trace(out, "requests_only");
  return out;
}

TEST(StreamedReplay, RealSnapshotsRequestsGiveTheWholeReplaysResults) {
  const fs::path real(FRAGLAB_REAL_TRACES);
  FRAGLAB_NEEDS_REAL_TRACE(real);
  const fs::path dir = testing::scratch_dir("streamed_replay");
  int n = 0;
  for (const auto& entry : fs::directory_iterator(real)) {
    if (entry.path().extension() != ".pickle") continue;
    SCOPED_TRACE(entry.path());
    const Trace requests = requests_only(read_trace(entry.path().string()));
    if (requests.events.empty()) continue;
    const fs::path path = dir / (entry.path().stem().string() + ".jsonl");
    write_jsonl_file(requests, path.string());
    expect_streamed_equals_whole(path, "sim:80GiB", {65536}, false, false);
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace fraglab
