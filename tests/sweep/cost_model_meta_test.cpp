// A sweep's results file records the cost model behind its device_time_s (SweepMeta::cost_model,
// README "Device time"): --resume and merge refuse, in one line with exit 2, rows of another cost
// model, a file that does not record one, and a file of the format before device_time_s existed.
#include <gtest/gtest.h>

#include <string>

#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::read_text;
using testing::run_fraglab;
using testing::write_text;

const std::string kTrace = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";
const std::string kGrid = " -p pytorch --grid expandable_segments=False,True --no-progress";

std::size_t lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

// A cost model whose cudaMalloc costs 100 us instead of the default: other figures.
fs::path slow_malloc(const fs::path& dir, const std::string& name) {
  const fs::path path = dir / name;
  write_text(path, R"({"fraglab_cost_model": 1, "calls": {"cudaMalloc": {"fixed_us": 100}}})");
  return path;
}

TEST(SweepCostModel, TheResultsFileNamesItsCostModel) {
  const fs::path dir = testing::scratch_dir("sweep-cost");
  const fs::path costs = slow_malloc(dir, "slow.json");
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " -o " + (dir / "d.csv").string() + " --overwrite").status, 0);
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " -o " + (dir / "s.jsonl").string() + " --overwrite --cost-model " +
                        costs.string())
                .status,
            0);
  const std::string d = read_text(dir / "d.csv"), s = read_text(dir / "s.jsonl");
  EXPECT_NE(d.find(R"x("cost_model":{"source":"fraglab defaults (src/device/cost_model.cpp)","digest":"fnv1a64:)x"),
            std::string::npos)
      << d;
  EXPECT_NE(s.find(R"("cost_model":{"source":")" + costs.string() + R"(","digest":"fnv1a64:)"), std::string::npos) << s;
  // Other figures, another digest.
  const auto digest = [](const std::string& text) {
    return text.substr(text.find("fnv1a64:", text.find("cost_model")), 24);
  };
  EXPECT_NE(digest(d), digest(s));
}

TEST(SweepCostModel, ResumeRefusesAnotherCostModelAndAcceptsTheSameFiguresUnderAnotherName) {
  const fs::path dir = testing::scratch_dir("sweep-cost");
  const fs::path costs = slow_malloc(dir, "slow.json");
  const fs::path out = dir / "resume.csv";
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " -o " + out.string() + " --overwrite").status, 0);
  const std::string before = read_text(out);
  const CommandResult r =
      run_fraglab("sweep " + kTrace + kGrid + " --resume -o " + out.string() + " --cost-model " + costs.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(out.string() + ": its device_time_s was computed under another cost model (fraglab defaults"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("than this sweep's (" + costs.string() + ", fnv1a64:"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(out), before);  // nothing appended

  // The same figures under another file name are the same cost model.
  const fs::path slow = dir / "slow-resume.csv";
  ASSERT_EQ(
      run_fraglab("sweep " + kTrace + kGrid + " -o " + slow.string() + " --overwrite --cost-model " + costs.string())
          .status,
      0);
  const fs::path copy = slow_malloc(dir, "copy-of-slow.json");
  const CommandResult same =
      run_fraglab("sweep " + kTrace + kGrid + " --resume -o " + slow.string() + " --cost-model " + copy.string());
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_NE(same.err.find("; 2 already in"), std::string::npos) << same.err;
}

TEST(SweepCostModel, MergeRefusesShardsOfDifferentCostModels) {
  const fs::path dir = testing::scratch_dir("sweep-cost");
  const fs::path costs = slow_malloc(dir, "slow.json");
  const fs::path a = dir / "shard0.csv", b = dir / "shard1.csv";
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " --shard 0/2 -o " + a.string() + " --overwrite").status, 0);
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " --shard 1/2 -o " + b.string() + " --overwrite --cost-model " +
                        costs.string())
                .status,
            0);
  const CommandResult r =
      run_fraglab("merge " + a.string() + " " + b.string() + " -o " + (dir / "cost-merged.csv").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(b.string() + ": its device_time_s was computed under another cost model (" + costs.string()),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("than " + a.string() + "'s (fraglab defaults"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "cost-merged.csv"));
  // Shards of one cost model merge.
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " --shard 1/2 -o " + b.string() + " --overwrite").status, 0);
  const CommandResult ok =
      run_fraglab("merge " + a.string() + " " + b.string() + " -o " + (dir / "cost-merged.csv").string());
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(SweepCostModel, AFileThatDoesNotRecordItsCostModelMustBeRerun) {
  const fs::path dir = testing::scratch_dir("sweep-cost");
  const fs::path out = dir / "unrecorded.jsonl";
  ASSERT_EQ(run_fraglab("sweep " + kTrace + kGrid + " -o " + out.string() + " --overwrite").status, 0);
  // Its metadata without the cost_model object, as fraglab wrote it before recording one.
  std::string text = read_text(out);
  const std::size_t at = text.find(",\"cost_model\":{");
  ASSERT_NE(at, std::string::npos) << text;
  text.erase(at, text.find('}', at) + 1 - at);
  write_text(out, text);
  const std::string expected =
      out.string() + ": written by an older fraglab that did not record the cost model of its device_time_s: re-run";
  const CommandResult resume = run_fraglab("sweep " + kTrace + kGrid + " --resume -o " + out.string());
  EXPECT_EQ(resume.status, 2);
  EXPECT_EQ(lines(resume.err), 1u) << resume.err;
  EXPECT_NE(resume.err.find(expected), std::string::npos) << resume.err;
  const CommandResult merge =
      run_fraglab("merge " + out.string() + " -o " + (dir / "unrecorded-merged.jsonl").string());
  EXPECT_EQ(merge.status, 2);
  EXPECT_EQ(lines(merge.err), 1u) << merge.err;
  EXPECT_NE(merge.err.find(expected), std::string::npos) << merge.err;
}

// Results files of the format before device_time_s (a max_split_size_mb grid; rows as fraglab
// wrote them then, with no device_time_s / stall_time_s).
const std::string kOlderCsv =
    "# {\"fraglab_sweep\":1,\"shard\":\"0/1\",\"policy\":\"pytorch\",\"grid\":[\"expandable_segments=False,True\"],"
    "\"device\":\"sim\",\"traces\":[{\"name\":\"two-phase\",\"events\":86,\"request_hash\":\"fnv1a64:0\"}],"
    "\"start_state\":\"auto\"}\n"
    "trace,device,spec,expandable_segments,peak_reserved_bytes,peak_allocated_bytes,peak_requested_bytes,"
    "fragmentation_at_peak,peak_utilization,num_alloc_retries,num_ooms,num_device_alloc,num_device_free\n"
    "two-phase,sim,pytorch:expandable_segments:False,False,350224384,247988224,244318208,0.3,0.7,0,0,12,0\n";
const std::string kOlderJsonl =
    "{\"trace\":\"two-phase\",\"device\":\"sim\",\"spec\":\"pytorch:expandable_segments:False\",\"knobs\":{"
    "\"expandable_segments\":\"False\"},\"peak_reserved_bytes\":350224384,\"peak_allocated_bytes\":247988224,"
    "\"peak_requested_bytes\":244318208,\"fragmentation_at_peak\":0.3,\"peak_utilization\":0.7,"
    "\"num_alloc_retries\":0,\"num_ooms\":0,\"num_device_alloc\":12,\"num_device_free\":0}\n";

TEST(SweepCostModel, AFileOfTheFormatBeforeDeviceTimeMustBeRerun) {
  const fs::path dir = testing::scratch_dir("sweep-cost");
  for (const auto& [name, text, line] : {std::tuple<std::string, std::string, int>{"older.csv", kOlderCsv, 2},
                                         std::tuple<std::string, std::string, int>{"older.jsonl", kOlderJsonl, 1}}) {
    const fs::path file = dir / name;
    write_text(file, text);
    const std::string expected = file.string() + ":" + std::to_string(line) +
                                 ": a results file of an older fraglab format (no device_time_s and stall_time_s): "
                                 "re-run the sweep into a new file (or with --overwrite)\n";
    const CommandResult resume = run_fraglab("sweep " + kTrace + kGrid + " --resume -o " + file.string());
    EXPECT_EQ(resume.status, 2);
    EXPECT_EQ(resume.err, "fraglab sweep: error: " + expected);
    const CommandResult merge = run_fraglab("merge " + file.string() + " -o " + (dir / ("merged-" + name)).string());
    EXPECT_EQ(merge.status, 2);
    EXPECT_EQ(merge.err, "fraglab merge: error: " + expected);
    EXPECT_EQ(read_text(file), text);  // left as it was
  }
}

}  // namespace
}  // namespace fraglab
