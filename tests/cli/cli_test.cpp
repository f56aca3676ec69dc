// End-to-end tests of the fraglab command: exit codes, error messages, outputs on the shipped
// sample traces and (where ../shared/traces/real exists) on real PyTorch snapshots.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

fs::path temp_dir() { return fraglab::testing::scratch_dir("cli"); }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CommandRun fraglab(const std::string& args) {
  const fs::path err = temp_dir() / "stderr.txt";
  const std::string command = std::string(FRAGLAB_BINARY) + " " + args + " 2>" + err.string();
  CommandRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.err = slurp(err);
  return run;
}

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";
const std::string kReal = std::string(FRAGLAB_REAL_TRACES) + "/";

fs::path write_temp(const std::string& name, const std::string& content) {
  const fs::path path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(Cli, HelpAndUsage) {
  EXPECT_EQ(fraglab("--help").status, 0);
  EXPECT_EQ(fraglab("").status, 2);
  const CommandRun unknown = fraglab("frobnicate");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos);
  for (const char* cmd : {"replay", "inspect", "convert", "policies", "validate"}) {
    const CommandRun help = fraglab(std::string(cmd) + " --help");
    EXPECT_EQ(help.status, 0) << cmd;
    EXPECT_NE(help.out.find("usage: fraglab"), std::string::npos) << cmd;
  }
}

TEST(Cli, PoliciesListsNocache) {
  const CommandRun run = fraglab("policies --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  bool found = false;
  for (const auto& p : j) found |= p["name"] == "nocache";
  EXPECT_TRUE(found);
}

// nocache reserves exactly each live request rounded up to 512 bytes; compute that peak from the
// sample file with a plain scan of its lines, independently of fraglab's reader and replayer.
TEST(Cli, ReplayNoCacheMatchesAnIndependentScanOfTheSample) {
  std::ifstream in(kSamples + "two-phase.jsonl");
  ASSERT_TRUE(in) << "missing sample trace";
  std::map<std::uint64_t, std::uint64_t> live;  // id -> footprint
  std::uint64_t reserved = 0, peak = 0;
  std::string line;
  auto field = [](const std::string& l, const std::string& key) -> std::uint64_t {
    const auto at = l.find("\"" + key + "\":");
    return at == std::string::npos ? 0 : std::stoull(l.substr(at + key.size() + 3));
  };
  while (std::getline(in, line)) {
    if (line.find("\"op\":\"alloc\"") != std::string::npos) {
      const std::uint64_t footprint = (field(line, "size") + 511) / 512 * 512;
      live[field(line, "id")] = footprint;
      reserved += footprint;
      peak = std::max(peak, reserved);
    } else if (line.find("\"op\":\"free\"") != std::string::npos ||
               line.find("\"op\":\"free_completed\"") != std::string::npos) {
      reserved -= live[field(line, "id")];
      live.erase(field(line, "id"));
    }
  }
  ASSERT_GT(peak, 0u);
  const CommandRun run = fraglab("replay " + kSamples + "two-phase.jsonl -p nocache --json -");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["policy"], "nocache");
  EXPECT_EQ(j["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>(), peak);
  EXPECT_EQ(j["runs"][0]["num_alloc_retries"], 0);
  for (const char* key : {"peak_allocated_bytes", "peak_requested_bytes", "fragmentation_at_peak", "peak_utilization",
                          "num_ooms", "num_device_alloc", "num_device_free"}) {
    EXPECT_TRUE(j["runs"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["device"]["kind"], "sim");
  EXPECT_EQ(j["device"]["capacity_bytes"].get<std::uint64_t>(), 80ull << 30);
  EXPECT_TRUE(j["trace"].contains("peak_requested_bytes"));
}

TEST(Cli, ReplayIsDeterministic) {
  const std::string args = "replay " + kSamples + "two-phase.jsonl --json -";
  const CommandRun a = fraglab(args);
  const CommandRun b = fraglab(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, TimelineHasOneRowPerEvent) {
  const fs::path csv = temp_dir() / "timeline.csv";
  const CommandRun run = fraglab("replay " + kSamples + "two-phase.jsonl -p nocache --timeline " + csv.string());
  ASSERT_EQ(run.status, 0) << run.err;
  const CommandRun inspect = fraglab("inspect " + kSamples + "two-phase.jsonl --json -");
  const auto j = nlohmann::json::parse(inspect.out);
  const std::string text = slurp(csv);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), j["events"].get<long>() + 1);  // + header
  EXPECT_EQ(
      text.rfind("policy,event,op,requested_bytes,allocated_bytes,reserved_bytes,step,device_time_s,stall_time_s\n", 0),
      0u);
}

TEST(Cli, BadInputIsAOneLineErrorWithExitCode2) {
  struct Case {
    std::string args;
    std::string expected;  // must appear in stderr
  };
  const fs::path bad_op = write_temp("bad-op.jsonl",
                                     "{\"fraglab_trace\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":8}\n"
                                     "{\"op\":\"explode\"}\n");
  const fs::path double_free = write_temp("double-free.jsonl",
                                          "{\"fraglab_trace\":1}\n"
                                          "{\"op\":\"alloc\",\"id\":1,\"size\":8}\n"
                                          "{\"op\":\"free\",\"id\":1}\n{\"op\":\"free\",\"id\":1}\n");
  const fs::path hostile = write_temp("hostile.pickle", std::string("\x80\x02"
                                                                    "cos\nsystem\n(S'echo hi'\ntR.",
                                                                    27));
  const std::vector<Case> cases = {
      {"replay /nonexistent/trace.jsonl", "/nonexistent/trace.jsonl"},
      {"replay " + bad_op.string(), bad_op.string() + ":3"},
      {"replay " + double_free.string(), double_free.string() + ":4"},
      {"replay " + hostile.string(), "hostile.pickle"},
      {"replay " + kSamples + "two-phase.jsonl -p no-such-policy", "unknown policy 'no-such-policy'"},
      {"replay " + kSamples + "two-phase.jsonl --device sim:lots", "sim:lots"},
      {"replay " + kSamples + "two-phase.jsonl --frobnicate", "frobnicate"},
      {"convert " + kSamples + "two-phase.jsonl", "output"},
  };
  for (const Case& c : cases) {
    const CommandRun run = fraglab(c.args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.err;
    EXPECT_NE(run.err.find(c.expected), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << c.args << "\n" << run.err;
  }
}

TEST(Cli, ConvertedSnapshotReplaysLikeTheSnapshot) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  const fs::path jsonl = temp_dir() / "tiny.jsonl";
  const CommandRun convert = fraglab("convert " + kReal + "tiny-segments.pickle -o " + jsonl.string());
  ASSERT_EQ(convert.status, 0) << convert.err;
  const CommandRun from_pickle = fraglab("replay " + kReal + "tiny-segments.pickle -p nocache --json -");
  const CommandRun from_jsonl = fraglab("replay " + jsonl.string() + " -p nocache --json -");
  ASSERT_EQ(from_pickle.status, 0) << from_pickle.err;
  ASSERT_EQ(from_jsonl.status, 0) << from_jsonl.err;
  auto a = nlohmann::json::parse(from_pickle.out);
  auto b = nlohmann::json::parse(from_jsonl.out);
  EXPECT_EQ(a["runs"], b["runs"]);
  EXPECT_EQ(a["trace"]["events"], b["trace"]["events"]);
}

// The README of ../shared/traces/real gives each snapshot's reserved bytes at trace start.
TEST(Cli, InspectReportsTheRecordedStartState) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  const std::map<std::string, std::uint64_t> reserved_at_start = {
      {"finetune-step-oldformat.pickle", 1400897536ull},     {"gpt2medium-ctx128-train-cutoff.pickle", 7235174400ull},
      {"lm-forward-bf16-nosegments.pickle", 861929472ull},   {"lm2.7b-ctx128-fullstep.pickle", 13763608576ull},
      {"lm2.7b-ctx512-forward-bf16.pickle", 28848422912ull}, {"tiny-segments.pickle", 0ull}};
  for (const auto& [file, bytes] : reserved_at_start) {
    const CommandRun run = fraglab("inspect " + kReal + file + " --json -");
    ASSERT_EQ(run.status, 0) << file << run.err;
    const auto j = nlohmann::json::parse(run.out);
    EXPECT_EQ(j["initial_state"]["reserved_bytes"].get<std::uint64_t>(), bytes) << file;
  }
}

}  // namespace

namespace {

// tests/data/two-gpus.pickle: device 0 records segment_alloc(2 MiB) + alloc(512) + free; device 1
// segment_alloc(20 MiB) + alloc(5 MiB) (written once by a Python script, plain data only).
const std::string kTwoGpus = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/two-gpus.pickle";

TEST(Cli, ValidateChecksEveryGpuOfAMultiGpuSnapshot) {
  const CommandRun run = fraglab("validate " + kTwoGpus + " --json -");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["exact"], true);
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][0]["device"], 0);
  EXPECT_EQ(j["devices"][1]["device"], 1);
  EXPECT_EQ(j["segment_events_recorded"], 2);
  EXPECT_EQ(j["allocs_recorded"], 2);
  EXPECT_EQ(j["peak_reserved_recorded"].get<std::uint64_t>(), 20u << 20);  // the larger device's

  const CommandRun one = fraglab("validate " + kTwoGpus + " --device-index 1 --json -");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["peak_reserved_recorded"].get<std::uint64_t>(), 20u << 20);
}

TEST(Cli, ReplayOfAMultiGpuSnapshotNeedsADeviceIndex) {
  const CommandRun run = fraglab("replay " + kTwoGpus);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("several devices (0, 1)"), std::string::npos) << run.err;
  const CommandRun picked = fraglab("replay " + kTwoGpus + " --device-index 1 -p nocache --json -");
  ASSERT_EQ(picked.status, 0) << picked.err;
  EXPECT_EQ(nlohmann::json::parse(picked.out)["runs"][0]["peak_requested_bytes"].get<std::uint64_t>(), 5u << 20);
}

// The negative-evidence variant of issue 14's worked example, as a JSONL trace with a start state
// (see tests/validate/start_state_test.cpp for the derivation): L = 3.5 MiB at S1 (24 MiB
// segment), block not recorded; a 20.25 MiB request took a new 22 MiB segment, so the free tail
// 24 MiB - block was < 20.25 MiB: block 3.75 MiB + 512 .. 4.5 MiB (split rule, allocator-model §4.1).
TEST(Cli, UndeterminedStartBlocksAreShownByInspectAndValidate) {
  const std::string s1 = std::to_string(0x7f1000000000ull), s3 = std::to_string(0x7f3000000000ull);
  const fs::path trace = write_temp(
      "cutoff.jsonl",
      "{\"fraglab_trace\": 1, \"name\": \"cutoff\", \"allocator_conf\": \"\", \"initial_segments\": [{\"addr\": " + s1 +
          ", \"size\": 25165824}], \"initial_allocations\": [{\"id\": 1, \"addr\": " + s1 +
          ", \"size\": 3670016}]}\n{\"op\": \"segment_alloc\", \"addr\": " + s3 +
          ", \"size\": 23068672}\n{\"op\": \"alloc\", \"id\": 2, \"size\": 21233664, \"addr\": " + s3 +
          "}\n{\"op\": \"free\", \"id\": 1}\n{\"op\": \"free\", \"id\": 2}\n");
  const CommandRun validate = fraglab("validate " + trace.string() + " --json -");
  ASSERT_EQ(validate.status, 0) << validate.err << validate.out;
  const auto v = nlohmann::json::parse(validate.out);
  ASSERT_EQ(v["undetermined_blocks"].size(), 1u);
  EXPECT_EQ(v["undetermined_blocks"][0]["id"], 1);
  EXPECT_EQ(v["undetermined_blocks"][0]["min_size"], 3932672);
  EXPECT_EQ(v["undetermined_blocks"][0]["max_size"], 4718592);

  const CommandRun text = fraglab("inspect " + trace.string() + " --initial-state");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("block 3932672..4718592 (not recorded, undetermined"), std::string::npos) << text.out;
  const CommandRun json = fraglab("inspect " + trace.string() + " --initial-state --json -");
  ASSERT_EQ(json.status, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const auto& interval = j["initial_state"]["allocation_list"][0]["block_interval"];
  EXPECT_EQ(interval["min_size"], 3932672);
  EXPECT_EQ(interval["max_size"], 4718592);
  EXPECT_EQ(interval["determined"], false);
}

}  // namespace
