// `fraglab maxbatch --grid`, `--shard I/N` and `--merge`: a grid's points searched as specs, the
// specs split between shards by index mod N, each shard's results file opened by a metadata line,
// and the merge of every shard printing byte for byte what the unsharded run prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;

// The small family of maxbatch_cli_test.cpp: GPT2-XL, 2 ranks, 2 steps, on a 24 GiB device,
// whose boundaries lie under micro-batch 24.
const std::string kRun =
    "maxbatch --model gpt2-xl --world-size 2 --steps 2 --device sim:24GiB --max-batch 24 -j 1 -p pytorch "
    "--grid expandable_segments=True,False";
// The specs, by hand from the spec syntax (NAME:key:value) and the grid's order: -p first, then
// the grid's points.
const std::vector<std::string> kSpecs{"pytorch", "pytorch:expandable_segments:True",
                                      "pytorch:expandable_segments:False"};

struct Shards {
  testing::fs::path dir, s0, s1;
  std::string out0, out1;
};

// Shard 0/2 into CSV and 1/2 into JSONL (a merge reads both), once for every test here.
const Shards& shards() {
  static const Shards s = [] {
    Shards r;
    r.dir = testing::scratch_dir("maxbatch-shard");
    r.s0 = r.dir / "s0.csv";
    r.s1 = r.dir / "s1.jsonl";
    const auto a = run_fraglab(kRun + " --shard 0/2 --json -o " + r.s0.string() + " --overwrite");
    EXPECT_EQ(a.status, 0) << a.err;
    const auto b = run_fraglab(kRun + " --shard 1/2 --json -o " + r.s1.string() + " --overwrite");
    EXPECT_EQ(b.status, 0) << b.err;
    r.out0 = a.out;
    r.out1 = b.out;
    return r;
  }();
  return s;
}

std::vector<std::string> specs_of(const std::string& json_text) {
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(json_text);
  for (const auto& s : j["specs"]) out.push_back(s["spec"]);
  return out;
}

TEST(MaxbatchShard, TwoShardsMergedPrintExactlyTheUnshardedRun) {
  const Shards& s = shards();
  const auto whole_json = run_fraglab(kRun + " --json");
  ASSERT_EQ(whole_json.status, 0) << whole_json.err;
  EXPECT_EQ(specs_of(whole_json.out), kSpecs);
  const auto whole_table = run_fraglab(kRun);
  ASSERT_EQ(whole_table.status, 0) << whole_table.err;

  const std::string files = " " + s.s0.string() + " " + s.s1.string();
  const auto merged_json = run_fraglab("maxbatch --json --merge" + files);
  ASSERT_EQ(merged_json.status, 0) << merged_json.err;
  EXPECT_EQ(merged_json.out, whole_json.out);
  const auto merged_table = run_fraglab("maxbatch --merge" + files);
  ASSERT_EQ(merged_table.status, 0) << merged_table.err;
  EXPECT_EQ(merged_table.out, whole_table.out);
  // The order of the files does not matter.
  const auto reversed = run_fraglab("maxbatch --merge " + s.s1.string() + " " + s.s0.string() + " --json");
  EXPECT_EQ(reversed.out, whole_json.out);
}

TEST(MaxbatchShard, EachShardSearchesSpecsIndexModN) {
  const Shards& s = shards();
  EXPECT_EQ(specs_of(s.out0), (std::vector<std::string>{kSpecs[0], kSpecs[2]}));
  EXPECT_EQ(specs_of(s.out1), (std::vector<std::string>{kSpecs[1]}));
  // Rows of a shard's own specs only.
  const std::string csv = testing::read_text(s.s0);
  EXPECT_EQ(csv.find(",pytorch:expandable_segments:True,"), std::string::npos);
  EXPECT_NE(csv.find(",pytorch:expandable_segments:False,"), std::string::npos);
}

TEST(MaxbatchShard, ResultsFileFirstLineRecordsTheRun) {
  const Shards& s = shards();
  const std::string csv = testing::read_text(s.s0);
  ASSERT_EQ(csv.rfind("# ", 0), 0u) << csv.substr(0, 200);
  const nlohmann::json meta = nlohmann::json::parse(csv.substr(2, csv.find('\n') - 2));
  EXPECT_EQ(meta["fraglab_maxbatch"], 1);
  EXPECT_EQ(meta["shard"], "0/2");
  EXPECT_EQ(meta["specs"], kSpecs);
  EXPECT_EQ(meta["grid_policy"], "pytorch");
  EXPECT_EQ(meta["grid"], std::vector<std::string>{"expandable_segments=True,False"});
  EXPECT_EQ(meta["device"], "sim:24GiB");
  EXPECT_EQ(meta["min_batch"], 1);
  EXPECT_EQ(meta["max_batch"], 24);
  EXPECT_NE(meta["generator"].get<std::string>().find("gpt2-xl"), std::string::npos);
  EXPECT_NE(meta["generator"].get<std::string>().find("steps=2"), std::string::npos);
  // The trace of --min-batch, as `fraglab gen` makes it and `replay --json` identifies it.
  const testing::fs::path trace = s.dir / "b1.jsonl";
  const auto gen =
      run_fraglab("gen --model gpt2-xl --world-size 2 --steps 2 --micro-batch 1 -o " + trace.string() + " --overwrite");
  ASSERT_EQ(gen.status, 0) << gen.err;
  const auto replay = run_fraglab("replay " + trace.string() + " -p pytorch --json -");
  ASSERT_EQ(replay.status, 0) << replay.err;
  const nlohmann::json identity = nlohmann::json::parse(replay.out)["trace"];
  EXPECT_EQ(meta["first_trace"]["name"], identity["name"]);
  EXPECT_EQ(meta["first_trace"]["events"], identity["events"]);
  EXPECT_EQ(meta["first_trace"]["request_hash"], identity["request_hash"]);
  EXPECT_EQ(meta["generator"], identity["source"]);
  // The second line is the CSV header with the micro_batch column, then rows.
  const std::size_t second = csv.find('\n') + 1;
  EXPECT_EQ(csv.compare(second, 30, "trace,device,spec,micro_batch,"), 0) << csv.substr(second, 80);
  const std::string jsonl = testing::read_text(s.s1);
  EXPECT_EQ(nlohmann::json::parse(jsonl.substr(0, jsonl.find('\n')))["shard"], "1/2");
}

// A shard's file holds one row per batch each of its specs' searches tried (its JSON's `tried`),
// after its metadata line and header; `fraglab merge` refuses it (it is maxbatch --merge's).
TEST(MaxbatchShard, ShardFileRowsAreTheTriedRunsAndMergeRefusesIt) {
  const Shards& s = shards();
  std::size_t tried = 0;
  const nlohmann::json shard0 = nlohmann::json::parse(s.out0);
  for (const auto& spec : shard0["specs"]) tried += spec["tried"].size();
  const std::string csv = testing::read_text(s.s0);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), tried + 2) << csv.substr(0, 300);
  const testing::fs::path out = s.dir / "rows.csv";
  const auto r = run_fraglab("merge " + s.s0.string() + " -o " + out.string() + " --overwrite --no-report");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "fraglab merge: error: " + s.s0.string() +
                       ": a maxbatch results file (fraglab maxbatch -o), not a sweep's: merge maxbatch shards with "
                       "fraglab maxbatch --merge\n");
}

std::string merge_error(const std::string& files) {
  const auto r = run_fraglab("maxbatch --merge " + files);
  EXPECT_EQ(r.status, 2) << files << "\n" << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  return r.err;
}

TEST(MaxbatchShard, MergeRefusesMissingDuplicatedAndForeignFiles) {
  const Shards& s = shards();
  EXPECT_NE(merge_error(s.s0.string()).find("shard 1/2 is missing"), std::string::npos);
  EXPECT_NE(merge_error(s.s0.string() + " " + s.s0.string()).find("both shard 0/2"), std::string::npos);
  // Shard 1/2 of another run (other steps: another workload).
  const testing::fs::path other = s.dir / "other1.csv";
  const auto r = run_fraglab(
      "maxbatch --model gpt2-xl --world-size 2 --steps 1 --device sim:24GiB --max-batch 4 -j 1 -p pytorch --grid "
      "expandable_segments=True,False --shard 1/2 -o " +
      other.string() + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(merge_error(s.s0.string() + " " + other.string()).find("different maxbatch runs: different workloads"),
            std::string::npos);
  // A sweep's results file, or any other CSV.
  const testing::fs::path foreign = s.dir / "foreign.csv";
  testing::write_text(foreign, "trace,device,spec\n");
  EXPECT_NE(merge_error(foreign.string()).find("not a maxbatch results file"), std::string::npos);
  // A shard cut short: its last rows gone, so a search asks for a run no file holds.
  const std::string csv = testing::read_text(s.s0);
  const testing::fs::path cut = s.dir / "cut0.csv";
  testing::write_text(cut, csv.substr(0, csv.find('\n', csv.find('\n') + 1) + 1));  // metadata and header only
  EXPECT_NE(merge_error(cut.string() + " " + s.s1.string()).find("no run of pytorch at micro-batch 1"),
            std::string::npos);
}

// With --grid and no -p the grid's points are the specs, on --grid-policy's base (by hand: the
// spec syntax NAME:fixed options, then each grid key:value in axis order).
TEST(MaxbatchShard, GridWithoutPolicyIsTheGridsPointsOnTheGridPolicy) {
  const auto r = run_fraglab(
      "maxbatch --model gpt2-xl --world-size 2 --steps 1 --device sim:24GiB --max-batch 2 -j 1 --grid-policy "
      "pytorch:expandable_segments:True --grid max_split_size_mb=none,256 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(specs_of(r.out), (std::vector<std::string>{"pytorch:expandable_segments:True",
                                                       "pytorch:expandable_segments:True,max_split_size_mb:256"}));
}

TEST(MaxbatchShard, BadGridAndShardAreOneLineErrors) {
  const auto err = [](const std::string& args) {
    const auto r = run_fraglab("maxbatch --model gpt2-xl " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r.err;
  };
  EXPECT_NE(err("--grid nosuchkey=1,2").find("nosuchkey"), std::string::npos);
  EXPECT_NE(err("--shard 2/2").find("2/2"), std::string::npos);
  EXPECT_NE(err("-p pytorch --shard 1/2").find("--shard 1/2: no spec falls to it"), std::string::npos);
  const auto missing = run_fraglab("maxbatch --merge nosuchfile.csv");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nosuchfile.csv"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace fraglab
