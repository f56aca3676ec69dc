// The what-if rule on real snapshots (README "What-if answers on a snapshot"): what validate infers is an
// event of the trace for every command, the recorded settings replayed from the recorded start
// reproduce the recorded peak, and comparisons of other settings start cold and say so. Expected
// peaks are the ones ../shared/traces/real/README.md rebuilds from each file's segment events.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;
namespace fs = std::filesystem;

const std::string kReal = std::string(FRAGLAB_REAL_TRACES) + "/";

nlohmann::json json_of(const testing::CommandResult& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

struct RecordedPeak {
  const char* file;
  std::uint64_t peak;  // "peak reserved" column of the traces' README
};

// Every shipped snapshot ran with PyTorch's default settings (or records none): `-p pytorch`
// is each one's recorded settings.
const RecordedPeak kPeaks[] = {
    {"tiny-segments.pickle", 3781165056ull},
    {"finetune-step-oldformat.pickle", 6471811072ull},
    {"gpt2medium-ctx128-train-cutoff.pickle", 7235174400ull},
    {"lm-forward-bf16-nosegments.pickle", 861929472ull},
    {"lm2.7b-ctx128-fullstep.pickle", 61111009280ull},
    {"lm2.7b-ctx512-forward-bf16.pickle", 40514879488ull},
    {"state-only-blocks-without-address.pickle", 1851785216ull},
};

TEST(WhatIf, RecordedSettingsReplayToTheRecordedPeak) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  for (const RecordedPeak& p : kPeaks) {
    const nlohmann::json j = json_of(run_fraglab("replay " + kReal + p.file + " -p pytorch --json -"));
    EXPECT_EQ(j["start_state"], "recorded") << p.file;
    EXPECT_EQ(j["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>(), p.peak) << p.file;
  }
}

TEST(WhatIf, InferredEmptyCacheIsAnEventOfTheTrace) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  // The snapshot starts with 597 segment_free entries and no allocator entry before them: an
  // empty_cache() call made before recording (the traces' README). convert writes it.
  const fs::path out = testing::scratch_dir("what-if") / "ctx512.jsonl";
  fs::remove(out);
  const auto r = run_fraglab("convert " + kReal + "lm2.7b-ctx512-forward-bf16.pickle -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string text = testing::read_text(out);
  std::size_t count = 0, first_free = std::string::npos, inferred = std::string::npos;
  for (std::size_t at = 0, line = 0; at < text.size(); ++line) {
    const std::size_t end = text.find('\n', at);
    const std::string l = text.substr(at, end - at);
    if (l.find(R"("op":"empty_cache")") != std::string::npos) {
      ++count;
      EXPECT_NE(l.find(R"("tag":"inferred")"), std::string::npos) << l;
      inferred = line;
    }
    if (first_free == std::string::npos && l.find(R"("op":"segment_free")") != std::string::npos) first_free = line;
    at = end + 1;
  }
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(inferred + 1, first_free);  // just before the burst
  // The converted trace replays to the recorded peak, like the snapshot.
  const nlohmann::json j = json_of(run_fraglab("replay " + out.string() + " -p pytorch --json -"));
  EXPECT_EQ(j["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>(), 40514879488ull);
}

TEST(WhatIf, CompareAddsTheRecordedSettingsAndStartsCold) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  const auto r = run_fraglab("compare " + kReal + "gpt2medium-ctx128-train-cutoff.pickle -p nocache");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("pytorch (recorded settings)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("start state cold"), std::string::npos) << r.out;
  const nlohmann::json j =
      json_of(run_fraglab("compare " + kReal + "gpt2medium-ctx128-train-cutoff.pickle -p nocache --json -"));
  EXPECT_EQ(j["start_state"], "cold");
  ASSERT_EQ(j["runs"].size(), 2u);
  int recorded_rows = 0;
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["start_state"], "cold");
    if (run.value("recorded_settings", false)) {
      ++recorded_rows;
      EXPECT_EQ(run["policy"], "pytorch");
      // Cold, the recorded settings no longer hold the 7,235,174,400 bytes the run had reserved
      // before its history began: only what the live allocations need.
      EXPECT_LT(run["peak_reserved_bytes"].get<std::uint64_t>(), 7235174400ull);
    }
  }
  EXPECT_EQ(recorded_rows, 1);
}

TEST(WhatIf, RecordedStartWarnsWhenItSetsTheResult) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  // gpt2medium's trace never reserves more than it started with: the peak is the start state's.
  const auto r = run_fraglab("replay " + kReal +
                             "gpt2medium-ctx128-train-cutoff.pickle -p pytorch:max_split_size_mb:64 "
                             "--start-state recorded");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("start state recorded"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("warning: pytorch:max_split_size_mb:64"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the peak is reached at the start"), std::string::npos) << r.err;
  // Cold: no warning, the start is the policy's own.
  const auto cold =
      run_fraglab("replay " + kReal + "gpt2medium-ctx128-train-cutoff.pickle -p pytorch --start-state cold");
  ASSERT_EQ(cold.status, 0) << cold.err;
  EXPECT_EQ(cold.err.find("warning"), std::string::npos) << cold.err;
}

TEST(WhatIf, SweepOnACutOffTraceComparesColdAgainstTheRecordedSettings) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  const auto r = run_fraglab("sweep " + kReal +
                             "gpt2medium-ctx128-train-cutoff.pickle --grid max_split_size_mb=none,64,128,256 "
                             "--grid expandable_segments=False,True -j 2 --no-progress --top 0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("start state cold"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recorded settings: pytorch (a grid point, marked *)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs_rec"), std::string::npos) << r.out;
  // Cold, the settings no longer all sit at the 6.74 GiB the run held before its trace began:
  // the table's rows (rank, knobs, peak_resv, ...) show more than one peak.
  const std::regex row(R"(^ *\*?\d+ .*? ([0-9.]+ GiB) )");
  std::set<std::string> peaks;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) peaks.insert(m[1]);
  }
  EXPECT_GT(peaks.size(), 1u) << r.out;
}

TEST(WhatIf, StartStateOptionIsChecked) {
  const auto r =
      run_fraglab("replay " + std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl --start-state warm");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--start-state 'warm': expected recorded, cold or auto"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fraglab
