// `fraglab maxbatch` end to end: its answers against a brute force made of other commands (gen
// every micro-batch, replay each under every spec, take the largest without OOM / retries), and
// its one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "support/command.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;

constexpr const char* kWorkload = "--model gpt2-xl --world-size 2 --steps 2";
constexpr const char* kDevice = "sim:24GiB";
constexpr std::uint32_t kMaxBatch = 48;

std::string fmt_args(std::uint32_t batch, const std::string& trace) {
  return std::string("gen ") + kWorkload + " --micro-batch " + std::to_string(batch) + " -o " + trace + " --overwrite";
}

struct Expected {
  std::optional<std::uint32_t> no_oom, no_retries;
  std::uint64_t peak_no_oom = 0, retries_no_oom = 0, peak_no_retries = 0;
};

TEST(MaxbatchCli, MatchesBruteForceOverEveryBatchWithFewerTraces) {
  const testing::fs::path dir = testing::scratch_dir("maxbatch");
  const std::vector<std::string> specs{"pytorch", "pytorch:expandable_segments:True"};
  std::vector<Expected> expected(specs.size());
  for (std::uint32_t b = 1; b <= kMaxBatch; ++b) {
    const std::string trace = (dir / ("b" + std::to_string(b) + ".jsonl")).string();
    const auto gen = run_fraglab(fmt_args(b, trace));
    ASSERT_EQ(gen.status, 0) << gen.err;
    const auto replay =
        run_fraglab("replay " + trace + " -p " + specs[0] + " -p " + specs[1] + " --device " + kDevice + " --json -");
    ASSERT_EQ(replay.status, 0) << replay.err;
    const nlohmann::json runs = nlohmann::json::parse(replay.out)["runs"];
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const nlohmann::json& run = runs.at(i);
      ASSERT_EQ(run["policy"], specs[i]);
      if (run["num_ooms"] != 0) continue;
      expected[i].no_oom = b;
      expected[i].peak_no_oom = run["peak_reserved_bytes"];
      expected[i].retries_no_oom = run["num_alloc_retries"];
      if (run["num_alloc_retries"] == 0) {
        expected[i].no_retries = b;
        expected[i].peak_no_retries = run["peak_reserved_bytes"];
      }
    }
  }
  const auto r = run_fraglab(std::string("maxbatch ") + kWorkload + " --device " + kDevice + " --max-batch " +
                             std::to_string(kMaxBatch) + " -j 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["specs"].size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const nlohmann::json& s = j["specs"][i];
    EXPECT_EQ(s["spec"], specs[i]);
    // The case must bite: the boundary lies inside the range, not at its ends.
    ASSERT_TRUE(expected[i].no_oom.has_value());
    ASSERT_LT(*expected[i].no_oom, kMaxBatch);
    EXPECT_EQ(s["no_oom"]["micro_batch"], *expected[i].no_oom) << specs[i];
    EXPECT_EQ(s["no_oom"]["peak_reserved"], expected[i].peak_no_oom) << specs[i];
    EXPECT_EQ(s["no_oom"]["num_alloc_retries"], expected[i].retries_no_oom) << specs[i];
    EXPECT_EQ(s["no_oom"]["non_monotone"], false) << specs[i];
    ASSERT_TRUE(expected[i].no_retries.has_value());
    EXPECT_EQ(s["no_retries"]["micro_batch"], *expected[i].no_retries) << specs[i];
    EXPECT_EQ(s["no_retries"]["peak_reserved"], expected[i].peak_no_retries) << specs[i];
    EXPECT_EQ(s["no_retries"]["num_alloc_retries"], 0) << specs[i];
  }
  EXPECT_LT(j["generated"].size(), kMaxBatch / 2) << r.out;
  // Same input, same bytes, whatever the thread count.
  const auto again = run_fraglab(std::string("maxbatch ") + kWorkload + " --device " + kDevice + " --max-batch " +
                                 std::to_string(kMaxBatch) + " -j 2 --json");
  EXPECT_EQ(again.out, r.out);
}

TEST(MaxbatchCli, TableNamesBestSpecsAllocConfAndWritesResultsFile) {
  const testing::fs::path results = testing::scratch_dir("maxbatch") / "runs.csv";
  const auto r = run_fraglab(std::string("maxbatch ") + kWorkload + " --device " + kDevice + " --max-batch 24 -o " +
                             results.string() + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\nbest: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PYTORCH_CUDA_ALLOC_CONF="), std::string::npos) << r.out;
  const std::string csv = testing::read_text(results);
  // The metadata line (maxbatch_shard_test.cpp checks it), then the header.
  ASSERT_EQ(csv.rfind("# {\"fraglab_maxbatch\":1,", 0), 0u) << csv.substr(0, 200);
  EXPECT_EQ(csv.compare(csv.find('\n') + 1, 30, "trace,device,spec,micro_batch,"), 0) << csv.substr(0, 800);
}

// A boundary that is not monotone, found on a generated run: every claim the command makes about
// it (the answer passes, each batch listed below it fails) is checked by gen + replay of that batch.
TEST(MaxbatchCli, NonMonotoneClaimsHoldWhenReplayedOneByOne) {
  const std::string workload = "--model t5-3b --world-size 2 --steps 2";
  const std::string device = "sim:80GiB";
  const auto r = run_fraglab("maxbatch " + workload + " --device " + device +
                             " --min-batch 240 --max-batch 300 -p pytorch -j 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json goal = nlohmann::json::parse(r.out)["specs"][0]["no_retries"];
  ASSERT_EQ(goal["non_monotone"], true) << r.out;  // the case this test is for
  const testing::fs::path dir = testing::scratch_dir("maxbatch-nm");
  // pass: no OOM and no retries.
  const auto passes = [&](std::uint32_t b) {
    const std::string trace = (dir / ("b" + std::to_string(b) + ".jsonl")).string();
    const auto gen =
        run_fraglab("gen " + workload + " --micro-batch " + std::to_string(b) + " -o " + trace + " --overwrite");
    EXPECT_EQ(gen.status, 0) << gen.err;
    const auto replay = run_fraglab("replay " + trace + " -p pytorch --device " + device + " --json -");
    EXPECT_EQ(replay.status, 0) << replay.err;
    const nlohmann::json run = nlohmann::json::parse(replay.out)["runs"][0];
    return run["num_ooms"] == 0 && run["num_alloc_retries"] == 0;
  };
  const std::uint32_t answer = goal["micro_batch"];
  EXPECT_TRUE(passes(answer));
  EXPECT_FALSE(passes(answer + 1));
  ASSERT_FALSE(goal["fails_below"].empty());
  for (const std::uint32_t b : goal["fails_below"]) {
    EXPECT_LT(b, answer);
    EXPECT_FALSE(passes(b)) << "micro-batch " << b;
  }
}

std::string error_line(const std::string& args) {
  const auto r = run_fraglab("maxbatch --model gpt2-xl " + args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  return r.err;
}

TEST(MaxbatchCli, BadOptionsAreOneLineErrors) {
  EXPECT_NE(error_line("--min-batch 0").find("--min-batch 0"), std::string::npos);
  EXPECT_NE(error_line("--min-batch 9 --max-batch 8").find("--min-batch 9 is above --max-batch 8"), std::string::npos);
  EXPECT_NE(error_line("-p nosuchpolicy").find("nosuchpolicy"), std::string::npos);
  EXPECT_NE(error_line("--device gpu:1").find("gpu:1"), std::string::npos);
  EXPECT_NE(error_line("-o out.txt").find("out.txt"), std::string::npos);
  EXPECT_NE(error_line("--framework fsdp9").find("fsdp9"), std::string::npos);
  EXPECT_NE(error_line("-j 0").find("-j 0"), std::string::npos);
  const testing::fs::path existing = testing::scratch_dir("maxbatch-exists") / "runs.csv";
  testing::write_text(existing, "x\n");
  EXPECT_NE(error_line("-o " + existing.string()).find("already exists"), std::string::npos);
  EXPECT_EQ(testing::read_text(existing), "x\n");  // left as it was
  // The generator's own limit (micro-batch <= 65536, src/workload/options.cpp), refused up front.
  EXPECT_NE(error_line("--max-batch 100000").find("--max-batch 100000: the generator refuses it"), std::string::npos);
}

}  // namespace
}  // namespace fraglab
