// --cost-model on the command line (README "Device time"): a bad file is one line naming the file
// and the key (exit 2); a file's figures reach replay's JSON, compare's table and sweep's files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace fraglab::testing {
namespace {

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";

fs::path costs_file(const std::string& name, const std::string& text) {
  const fs::path path = scratch_dir("cost-cli") / name;
  write_text(path, text);
  return path;
}

TEST(CostCli, BadFileIsOneLineNamingFileAndKey) {
  const fs::path bad =
      costs_file("bad.json", R"({"fraglab_cost_model": 1, "calls": {"cudaMalloc": {"fixed_us": -3}}})");
  for (const std::string command : {"replay", "compare", "sweep"}) {
    const std::string args = command == "sweep" ? "sweep " + kSample + " -p pytorch --grid max_split_size_mb=none"
                                                : command + " " + kSample + " -p nocache";
    const CommandResult r = run_fraglab(args + " --cost-model " + bad.string());
    EXPECT_EQ(r.status, 2) << command << ": " << r.err;
    EXPECT_EQ(r.err, "fraglab " + command + ": error: " + bad.string() +
                         ": key 'calls.cudaMalloc.fixed_us': expected a non-negative finite number of microseconds\n")
        << command;
  }
  const CommandResult missing = run_fraglab("replay " + kSample + " -p nocache --cost-model /nonexistent/c.json");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, "fraglab replay: error: /nonexistent/c.json: cannot open the cost-model file\n");
}

TEST(CostCli, ReplayJsonTimesFollowTheFileFromTheCallCounts) {
  // nocache makes only cudaMalloc and cudaFree calls, and the trace's one empty_cache a
  // cudaDeviceSynchronize: with 1 us, 1000 us and 0.5 us, the time is allocs * 1 us + frees *
  // 1000 us + 0.5 us, and the stall all but the mallocs.
  const std::string text = read_text(kSample);
  std::size_t syncs = 0;
  for (std::size_t at = text.find("\"op\":\"empty_cache\""); at != std::string::npos;
       at = text.find("\"op\":\"empty_cache\"", at + 1))
    ++syncs;
  ASSERT_EQ(syncs, 1u);
  const fs::path costs = costs_file("round.json", R"({"fraglab_cost_model": 1, "gpu": "test",
      "calls": {"cudaMalloc": {"fixed_us": 1}, "cudaFree": {"fixed_us": 1000, "samples": 3},
                "cudaDeviceSynchronize": {"fixed_us": 0.5}}})");
  const CommandResult r = run_fraglab("replay " + kSample + " -p nocache --json - --cost-model " + costs.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json run = nlohmann::json::parse(r.out)["runs"][0];
  const double allocs = run["num_device_alloc"].get<double>();
  const double frees = run["num_device_free"].get<double>();
  ASSERT_GT(frees, 0);
  EXPECT_DOUBLE_EQ(run["device_time_s"].get<double>(), (allocs * 1 + frees * 1000 + 0.5) / 1e6);
  EXPECT_DOUBLE_EQ(run["stall_time_s"].get<double>(), (frees * 1000 + 0.5) / 1e6);
  // Without the file: the defaults (src/device/cost_model.cpp): cudaMalloc and cudaFree 7 us each
  // (Cytnx #850), a synchronisation with nothing queued 0.4656 us (CUDA.jl #279).
  const CommandResult d = run_fraglab("replay " + kSample + " -p nocache --json -");
  const nlohmann::json dr = nlohmann::json::parse(d.out)["runs"][0];
  EXPECT_NEAR(dr["device_time_s"].get<double>(), ((allocs + frees) * 7 + 0.4656) / 1e6, 1e-12);
  EXPECT_NEAR(dr["stall_time_s"].get<double>(), (frees * 7 + 0.4656) / 1e6, 1e-12);
}

TEST(CostCli, CompareTableAndSweepFilesCarryTheTimes) {
  const CommandResult c = run_fraglab("compare " + kSample + " -p nocache -p pytorch");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("device_s     stall_s"), std::string::npos) << c.out;
  const fs::path csv = scratch_dir("cost-cli") / "sweep.csv";
  fs::remove(csv);
  const CommandResult s =
      run_fraglab("sweep " + kSample + " -p pytorch --grid max_split_size_mb=none,40 -o " + csv.string());
  ASSERT_EQ(s.status, 0) << s.err;
  const std::string text = read_text(csv);
  EXPECT_NE(text.find(",num_device_free,device_time_s,stall_time_s\n"), std::string::npos) << text;
  EXPECT_NE(s.out.find("Pareto front (lower peak reserved vs less device time"), std::string::npos) << s.out;
}

}  // namespace
}  // namespace fraglab::testing
