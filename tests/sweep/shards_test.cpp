// `fraglab merge` only recommends from a whole sweep: the sweep files record their shard, grid,
// device and traces, and merge exits 1 naming a missing shard, a duplicated one, shards of
// different grids or traces, or a shard that did not finish; files of older fraglab versions
// (no metadata) still merge, with a warning. Run end to end through the binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fraglab/sweep.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";
// 2 traces x 6 settings = 12 runs; 4 shards of 3.
const std::string kTraces = kSamples + "two-phase.jsonl " + kSamples + "streams.jsonl";
const std::string kGrid = "--grid max_split_size_mb=none,20,64 --grid expandable_segments=False,True";

fs::path shard_file(const fs::path& dir, int i, const std::string& ext = ".csv") {
  return dir / ("s" + std::to_string(i) + ext);
}

// The four shards of the sweep, once per test binary run.
fs::path four_shards() {
  const fs::path dir = testing::scratch_dir("shards");
  for (int i = 0; i < 4; ++i) {
    if (fs::exists(shard_file(dir, i))) continue;
    const auto run = run_fraglab("sweep " + kTraces + " " + kGrid + " --shard " + std::to_string(i) +
                                 "/4 -j1 --no-progress -o " + shard_file(dir, i).string());
    EXPECT_EQ(run.status, 0) << run.err;
  }
  return dir;
}

std::string files(const fs::path& dir, std::initializer_list<int> shards) {
  std::string out;
  for (int i : shards) out += shard_file(dir, i).string() + " ";
  return out;
}

// Found by tests/fuzz (results): a file saying it is shard 0 of 333333333 made the check list every
// missing shard (minutes and gigabytes). The first ten are named, then how many more.
TEST(Shards, AHugeShardCountIsNotListedInFull) {
  const fs::path path = testing::scratch_dir("shards-huge") / "shard.jsonl";
  testing::write_text(
      path, R"({"fraglab_sweep":1,"shard":"0/333333333","policy":"pytorch","grid":["max_split_size_mb=none,64"],)"
            R"("device":"sim","traces":[{"name":"streams","events":48,"request_hash":"fnv1a64:e67b87744b3afc10"}]})"
            "\n");
  const ResultsTable table = read_results(path.string());
  const ShardCheck check = check_shards({{path.string(), table.meta}}, table.rows);
  ASSERT_FALSE(check.problems.empty());
  EXPECT_EQ(check.problems[0].rfind("missing shards 1/333333333, 2/333333333, ", 0), 0u) << check.problems[0];
  EXPECT_NE(check.problems[0].find(", 10/333333333 and 333333322 more of the sweep"), std::string::npos)
      << check.problems[0];
}

TEST(Shards, EachFileRecordsItsShardGridAndTraces) {
  const fs::path dir = four_shards();
  const ResultsTable table = read_results(shard_file(dir, 2).string());
  ASSERT_TRUE(table.meta.has_value());
  EXPECT_EQ(shard_text(table.meta->shard), "2/4");
  EXPECT_EQ(table.meta->policy, "pytorch");
  EXPECT_EQ(table.meta->grid,
            (std::vector<std::string>{"max_split_size_mb=none,20,64", "expandable_segments=False,True"}));
  EXPECT_EQ(table.meta->device, "sim");
  // The traces in command-line order, with the identity replay --json reports.
  ASSERT_EQ(table.meta->traces.size(), 2u);
  const char* names[] = {"two-phase", "streams"};
  for (int t = 0; t < 2; ++t) {
    const auto replay = run_fraglab("replay " + kSamples + names[t] + ".jsonl -p nocache --json -");
    const auto trace = nlohmann::json::parse(replay.out)["trace"];
    EXPECT_EQ(table.meta->traces[t].name, trace["name"]);
    EXPECT_EQ(table.meta->traces[t].events, trace["events"]);
    EXPECT_EQ(table.meta->traces[t].request_hash, trace["request_hash"]);
  }
  EXPECT_EQ(table.rows.size(), 3u);  // runs 2, 6, 10 of 12
}

TEST(Shards, AllShardsMergeToTheUnshardedSweep) {
  const fs::path dir = four_shards();
  const fs::path single = dir / "single.csv", merged = dir / "merged.csv";
  fs::remove(single);
  fs::remove(merged);
  ASSERT_EQ(run_fraglab("sweep " + kTraces + " " + kGrid + " --no-progress -o " + single.string()).status, 0);
  const auto run = run_fraglab("merge " + files(dir, {3, 1, 0, 2}) + "-o " + merged.string());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(read_text(merged), read_text(single));
  EXPECT_EQ(read_text(merged).rfind("# {\"fraglab_sweep\":1,\"shard\":\"0/1\",", 0), 0u);
}

TEST(Shards, MissingShardIsExit1NamingIt) {
  const fs::path dir = four_shards();
  const fs::path out = dir / "partial.csv";
  fs::remove(out);
  const auto run = run_fraglab("merge " + files(dir, {0, 1, 3}) + "-o " + out.string());
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("merge: error: missing shard 2/4 of the sweep -p pytorch " + kGrid + " (3 of its 12 runs)"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(out)) << "nothing is written";
  EXPECT_EQ(run.out.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << "no best setting from part of the grid";
  const auto two = run_fraglab("merge " + files(dir, {1, 3}) + "-o -");
  EXPECT_EQ(two.status, 1);
  EXPECT_NE(two.err.find("missing shards 0/4, 2/4 "), std::string::npos) << two.err;
}

TEST(Shards, DuplicatedShardIsExit1) {
  const fs::path dir = four_shards();
  const fs::path copy = dir / "copy-of-s1.csv";
  fs::copy_file(shard_file(dir, 1), copy, fs::copy_options::overwrite_existing);
  const auto run = run_fraglab("merge " + files(dir, {0, 1, 2, 3}) + copy.string() + " -o -");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("duplicated shard 1/4: in " + shard_file(dir, 1).string() + " and in " + copy.string()),
            std::string::npos)
      << run.err;
}

TEST(Shards, ShardsOfDifferentGridsOrTracesAreExit1) {
  const fs::path dir = four_shards();
  // Shard 2 of a grid with one value less: the keys are the same, the runs are not.
  const fs::path other_grid = shard_file(dir, 2, "-grid.jsonl");
  fs::remove(other_grid);
  ASSERT_EQ(run_fraglab("sweep " + kTraces +
                        " --grid max_split_size_mb=none,20 --grid expandable_segments=False,True "
                        "--shard 2/4 --no-progress -o " +
                        other_grid.string())
                .status,
            0);
  const auto grids = run_fraglab("merge " + files(dir, {0, 1, 3}) + other_grid.string() + " -o -");
  EXPECT_EQ(grids.status, 1) << grids.err;
  EXPECT_NE(grids.err.find(shard_file(dir, 0).string() + " and " + other_grid.string() +
                           " are shards of different sweeps: different grids (-p pytorch " + kGrid +
                           " vs -p pytorch --grid max_split_size_mb=none,20 --grid expandable_segments=False,True)"),
            std::string::npos)
      << grids.err;

  // Shard 2 of the same grid over other traces.
  const fs::path other_traces = shard_file(dir, 2, "-traces.csv");
  fs::remove(other_traces);
  ASSERT_EQ(run_fraglab("sweep " + kSamples + "two-phase.jsonl " + kSamples + "cutoff.jsonl " + kGrid +
                        " --shard 2/4 --no-progress -o " + other_traces.string())
                .status,
            0);
  const auto traces = run_fraglab("merge " + files(dir, {0, 1, 3}) + other_traces.string() + " -o -");
  EXPECT_EQ(traces.status, 1) << traces.err;
  EXPECT_NE(traces.err.find("are shards of different sweeps: different traces (two-phase ("), std::string::npos)
      << traces.err;
  EXPECT_NE(traces.err.find("cutoff ("), std::string::npos) << traces.err;
}

TEST(Shards, UnfinishedShardIsExit1) {
  const fs::path dir = four_shards();
  // Shard 3 as a killed sweep leaves it: its last row missing.
  std::string text = read_text(shard_file(dir, 3));
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  const fs::path cut = dir / "s3-cut.csv";
  testing::write_text(cut, text);
  const auto run = run_fraglab("merge " + files(dir, {0, 1, 2}) + cut.string() + " -o -");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find(cut.string() + " lacks 1 run of its shard (e.g. trace "), std::string::npos) << run.err;
}

TEST(Shards, FilesWithoutMetadataMergeWithAWarning) {
  // Written by an older fraglab: no first line. Completeness cannot be told, so the merge goes on.
  const fs::path dir = four_shards();
  std::string args;
  for (int i : {0, 1, 3}) {
    std::string text = read_text(shard_file(dir, i));
    ASSERT_EQ(text.rfind("# {", 0), 0u);
    const fs::path old = dir / ("old" + std::to_string(i) + ".csv");
    testing::write_text(old, text.substr(text.find('\n') + 1));
    args += old.string() + " ";
  }
  const auto run = run_fraglab("merge " + args + "-o - --no-report");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("merge: warning: " + (dir / "old0.csv").string() + ": no sweep metadata"), std::string::npos)
      << run.err;
  EXPECT_EQ(run.out.rfind("trace,device,spec,", 0), 0u) << "no metadata line for a merge of unknown provenance";
}

TEST(Shards, MalformedFileIsExit2NamingFileAndLine) {
  const fs::path dir = four_shards();
  const fs::path bad = dir / "bad.jsonl";
  testing::write_text(bad, "{\"trace\":\"t\",\"device\":\"sim\",\"spec\":\"pytorch\",\"knobs\":{}}\n");
  const auto run = run_fraglab("merge " + bad.string() + " -o -");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find(bad.string() + ":1: the row has no 'peak_reserved_bytes'"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("json.exception"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(Shards, AShardsOwnSummarySaysItIsPartOfTheGrid) {
  const auto shard = run_fraglab("sweep " + kTraces + " " + kGrid + " --shard 2/4 --no-progress");
  EXPECT_EQ(shard.status, 0) << shard.err;
  EXPECT_NE(shard.out.find("note: shard 2/4: the best above is of this shard's runs only"), std::string::npos)
      << shard.out;
  const auto whole = run_fraglab("sweep " + kTraces + " " + kGrid + " --no-progress");
  EXPECT_EQ(whole.status, 0) << whole.err;
  EXPECT_EQ(whole.out.find("note: shard"), std::string::npos) << whole.out;
}

TEST(Shards, ResumeRefusesAFileOfAChangedTrace) {
  const fs::path dir = four_shards();
  // two-phase.jsonl with one request 1 byte larger: same name, other requests.
  std::string text = read_text(kSamples + "two-phase.jsonl");
  const size_t size = text.find("\"size\":", text.find("\"op\":\"alloc\"")) + 7;
  text.insert(size, "1");
  const fs::path changed = dir / "two-phase-changed.jsonl";
  testing::write_text(changed, text);
  const fs::path copy = dir / "resume.csv";
  fs::copy_file(shard_file(dir, 1), copy, fs::copy_options::overwrite_existing);
  const auto run = run_fraglab("sweep " + changed.string() + " " + kSamples + "streams.jsonl " + kGrid +
                               " --shard 1/4 --no-progress --resume -o " + copy.string());
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find(copy.string() + ": its rows are of another trace named two-phase ("), std::string::npos)
      << run.err;
  // The same sweep resumes (and has nothing left to run): the file is unchanged.
  const auto same =
      run_fraglab("sweep " + kTraces + " " + kGrid + " --shard 1/4 --no-progress --resume -o " + copy.string());
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(read_text(copy), read_text(shard_file(dir, 1)));
}

}  // namespace
}  // namespace fraglab
