// Sharing is exact: on every shipped trace (the samples and the real snapshots), from each start
// state, a sweep that answers settings from replays that cover them gives the same row for every
// setting as replaying each one (SweepRunOptions::share = false), on 1 and 2 threads. The grid
// varies every knob the decision bounds record (max_split_size_mb, roundup_power2_divisions,
// garbage_collection_threshold) and some they do not (expandable_segments, the memory fraction),
// on a device just above the trace's default peak, so flushes, collections and OOMs happen.
#include <gtest/gtest.h>

#include <filesystem>

#include "fraglab/device_spec.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/trace_io.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;

SweepGrid exactness_grid() {
  SweepGrid grid;
  grid.axes = {
      parse_grid_axis("max_split_size_mb=none,20,64,256"), parse_grid_axis("roundup_power2_divisions=none,1,4"),
      parse_grid_axis("garbage_collection_threshold=none,0.3,0.6,0.9"),
      parse_grid_axis("expandable_segments=False,True"), parse_grid_axis("per_process_memory_fraction=none,0.9")};
  return grid;
}

struct Outcome {
  std::vector<SweepRow> rows;
  std::vector<std::size_t> ooms;
  SweepRunStats stats;
};

Outcome sweep(const Trace& trace, const std::vector<Setting>& settings, const DeviceSpec& device, StartState start,
              unsigned threads, bool share, bool stop_on_oom) {
  std::vector<SweepJob> jobs;
  jobs.reserve(settings.size());
  for (const Setting& s : settings) jobs.push_back({&trace, s.spec, start});
  SweepRunOptions options;
  options.threads = threads;
  options.share = share;
  options.device = device;
  options.replay.stop_on_oom = stop_on_oom;
  Outcome out;
  out.rows.resize(jobs.size());
  out.ooms.resize(jobs.size());
  out.stats = run_sweep(jobs, options, [&](std::size_t i, const ReplayResult& r) {
    out.rows[i] = make_row(trace.name, device.text, settings[i], r);
    out.ooms[i] = r.ooms.size();
  });
  return out;
}

// Returns the number of runs that were answered without a replay.
std::size_t check_trace(const std::string& path) {
  const Trace trace = read_trace(path);
  const std::vector<Setting> settings = expand_grid(exactness_grid());
  std::size_t shared = 0;
  std::vector<StartState> starts{StartState::Cold};
  if (!trace.initial.empty()) starts.push_back(StartState::Recorded);
  for (StartState start : starts) {
    // Just above what PyTorch's defaults reserve: the fraction 0.9 then sits below that peak.
    ReplayOptions options;
    options.start_state = start;
    const Bytes peak = run_replay(trace, "pytorch", parse_device_spec("sim"), options).metrics.peak_reserved;
    const Bytes capacity = (peak + peak / 16) / (Bytes{1} << 20) * (Bytes{1} << 20) + (Bytes{2} << 20);
    const DeviceSpec device = parse_device_spec("sim:" + std::to_string(capacity) + "B");
    for (bool stop_on_oom : {false, true}) {
      const Outcome reference = sweep(trace, settings, device, start, 2, false, stop_on_oom);
      EXPECT_EQ(reference.stats.replayed, settings.size());
      for (unsigned threads : {1u, 2u}) {
        const Outcome got = sweep(trace, settings, device, start, threads, true, stop_on_oom);
        EXPECT_EQ(got.stats.replayed + got.stats.shared, settings.size());
        shared += got.stats.shared;
        for (std::size_t i = 0; i < settings.size(); ++i) {
          EXPECT_EQ(got.rows[i], reference.rows[i])
              << trace.name << " " << start_state_name(start) << (stop_on_oom ? " stop-on-oom " : " ") << threads
              << " threads: " << settings[i].spec << ": peak " << got.rows[i].metrics.peak_reserved << " vs "
              << reference.rows[i].metrics.peak_reserved;
          EXPECT_EQ(got.ooms[i], reference.ooms[i]) << trace.name << " " << settings[i].spec;
        }
      }
    }
  }
  return shared;
}

// One sweep whose jobs mix devices and start states: a replay answers only jobs of its own trace,
// device and start state (a tight device makes the same setting flush or fail where a large one
// does not).
TEST(ShareExact, JobsOfOtherDevicesAndStartsAreNotAnswered) {
  const Trace trace = read_trace(std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/cutoff.jsonl");
  ASSERT_FALSE(trace.initial.empty());
  const std::vector<Setting> settings = expand_grid(exactness_grid());
  std::vector<SweepJob> jobs;
  for (const char* device : {"sim", "sim:300MiB", "sim:260MiB"}) {
    for (StartState start : {StartState::Cold, StartState::Recorded}) {
      for (const Setting& s : settings) jobs.push_back({&trace, s.spec, start, parse_device_spec(device)});
    }
  }
  auto rows = [&](bool share) {
    SweepRunOptions options;
    options.threads = 2;
    options.share = share;
    std::vector<std::pair<SweepRow, std::size_t>> out(jobs.size());
    const SweepRunStats stats = run_sweep(jobs, options, [&](std::size_t i, const ReplayResult& r) {
      out[i] = {make_row(trace.name, jobs[i].device->text, settings[i % settings.size()], r), r.ooms.size()};
    });
    EXPECT_EQ(stats.replayed + stats.shared, jobs.size());
    if (share) {
      EXPECT_GT(stats.shared, 0u);
    }
    return out;
  };
  const auto reference = rows(false);
  const auto shared = rows(true);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(shared[i].first, reference[i].first)
        << jobs[i].device->text << " " << start_state_name(jobs[i].start_state) << " " << jobs[i].spec;
    EXPECT_EQ(shared[i].second, reference[i].second) << jobs[i].spec;
  }
}

TEST(ShareExact, EveryShippedSample) {
  std::size_t shared = 0;
  for (const auto& entry : fs::directory_iterator(std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples")) {
    if (entry.path().extension() != ".jsonl") continue;
    SCOPED_TRACE(entry.path().string());
    shared += check_trace(entry.path().string());
  }
  EXPECT_GT(shared, 0u) << "nothing was shared: the comparison proves nothing";
}

class ShareExactReal : public ::testing::TestWithParam<const char*> {};

TEST_P(ShareExactReal, SameRowsAsReplayingEverySetting) {
  const std::string path = std::string(FRAGLAB_SOURCE_DIR) + "/../shared/traces/real/" + GetParam();
  FRAGLAB_NEEDS_REAL_TRACE(path);
  EXPECT_GT(check_trace(path), 0u) << "nothing was shared: the comparison proves nothing";
}

INSTANTIATE_TEST_SUITE_P(Snapshots, ShareExactReal,
                         ::testing::Values("finetune-step-oldformat.pickle", "gpt2medium-ctx128-train-cutoff.pickle",
                                           "lm-forward-bf16-nosegments.pickle", "lm2.7b-ctx128-fullstep.pickle",
                                           "lm2.7b-ctx512-forward-bf16.pickle",
                                           "state-only-blocks-without-address.pickle", "tiny-segments.pickle"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.size() - std::string(".pickle").size());
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(ShareExact, AllRealSnapshotsAreListed) {
  const std::string dir = std::string(FRAGLAB_SOURCE_DIR) + "/../shared/traces/real";
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  std::size_t pickles = 0;
  for (const auto& entry : fs::directory_iterator(dir)) pickles += entry.path().extension() == ".pickle";
  EXPECT_EQ(pickles, 7u) << "a new snapshot: add it to ShareExactReal";
}

}  // namespace
}  // namespace fraglab
