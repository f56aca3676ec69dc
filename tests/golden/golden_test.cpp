// Behaviour lock: every shipped trace (the samples, the test pickle, two small generated traces
// and, when present, the real snapshots next to the project) replayed through every policy, at
// its defaults and with options that exercise each option reader, must print the same results
// JSON and the same detailed statistics as the recorded files in tests/golden/expected/.
//
// The expected files were written by the binary before a refactoring and are not derived from the
// code under test at the time it runs: a refactoring that changes any policy decision, counter or
// statistic fails here. A deliberate change of behaviour re-records them with
//   FRAGLAB_RECORD_GOLDEN=1 build/test_golden
// and the diff of tests/golden/expected/ then shows what changed, run by run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

// Specs that run on every trace: each policy at its defaults and with its options set.
const std::vector<std::string> kSpecs = {
    "pytorch",
    "pytorch:expandable_segments:True",
    "pytorch:max_split_size_mb:64,roundup_power2_divisions:4",
    "pytorch:garbage_collection_threshold:0.6,per_process_memory_fraction:0.9,version:2.4",
    "pytorch:version:1.13,roundup_bypass_threshold_mb:128",
    "tlsf",
    "tlsf:sl_bits:3,pool_mb:0",
    "buddy",
    "buddy:min_block:4KiB,max_order:18",
    "bestfit",
    "bestfit:release_threshold_mb:0",
    "bestfit:release_threshold_mb:never",
    "cuda_async",
    "cuda_async:release_threshold:0,opportunistic:False,internal_dependencies:False,sync_on_mark:all",
    "gmlake",
    "gmlake:vmm_defragment:false",
    "gmlake:defrag_level:2,re_alloc:true,frag_limit:64,reuse_limit:2",
    "nocache",
    "offline",
    "offline:alignment:4096",
};

// gemini needs param/grad/opt tags: only generated traces have them.
const std::vector<std::string> kTaggedSpecs = {
    "gemini",
    "gemini:chunk_size_mb:32,inner:[pytorch:expandable_segments:True]",
};

struct GoldenCase {
  std::string name;  // names the expected files and the test
  fs::path trace;
  std::string extra;  // further replay options
  bool tagged = false;
  bool real = false;  // lives in ../shared/traces/real (skipped or failed when absent)
};

std::vector<GoldenCase> golden_cases() {
  const fs::path source = FRAGLAB_SOURCE_DIR;
  std::vector<GoldenCase> cases;
  for (const char* sample : {"concat-after", "concat-before", "cutoff", "streams", "two-phase"})
    cases.push_back({sample, source / "traces/samples" / (std::string(sample) + ".jsonl"), "", false, false});
  cases.push_back({"two_gpus_device1", source / "tests/data/two-gpus.pickle", "--device-index 1", false, false});
  cases.push_back({"gen_gpt2_xl_zero3", source / "tests/golden/traces/gpt2.jsonl.gz", "", true, false});
  cases.push_back({"gen_t5_3b_fsdp1", source / "tests/golden/traces/t5.jsonl.gz", "", true, false});
  for (const char* snapshot :
       {"finetune-step-oldformat", "gpt2medium-ctx128-train-cutoff", "lm-forward-bf16-nosegments",
        "lm2.7b-ctx128-fullstep", "lm2.7b-ctx512-forward-bf16", "state-only-blocks-without-address", "tiny-segments"})
    cases.push_back({snapshot, fs::path(FRAGLAB_REAL_TRACES) / (std::string(snapshot) + ".pickle"), "", false, true});
  return cases;
}

// What gtest prints for a case (--gtest_list_tests, failures): its name, not a byte dump.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::string quoted(const std::string& word) { return "'" + word + "'"; }

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, ReplayJsonAndStatsMatchTheRecordedRun) {
  const GoldenCase& c = GetParam();
  if (c.real) FRAGLAB_NEEDS_REAL_TRACE(c.trace);
  std::string args = "replay " + quoted(c.trace.string()) + " " + c.extra + " --stats";
  for (const auto& spec : kSpecs) args += " -p " + quoted(spec);
  if (c.tagged)
    for (const auto& spec : kTaggedSpecs) args += " -p " + quoted(spec);
  const fs::path json = scratch_dir("golden") / (c.name + ".json");
  const CommandResult run = run_fraglab(args + " --json " + quoted(json.string()));
  ASSERT_EQ(run.status, 0) << run.err;

  const fs::path expected_dir = fs::path(FRAGLAB_SOURCE_DIR) / "tests/golden/expected" / (c.real ? "real" : "shipped");
  const fs::path expected_json = expected_dir / (c.name + ".json");
  const fs::path expected_stats = expected_dir / (c.name + ".txt");
  if (std::getenv("FRAGLAB_RECORD_GOLDEN") != nullptr) {
    fs::create_directories(expected_dir);
    write_text(expected_json, read_text(json));
    write_text(expected_stats, run.out);
    GTEST_SKIP() << "recorded " << expected_json << " and " << expected_stats;
  }
  ASSERT_TRUE(fs::exists(expected_json)) << expected_json << " missing: record with FRAGLAB_RECORD_GOLDEN=1";
  EXPECT_EQ(read_text(json), read_text(expected_json)) << "results JSON differs from " << expected_json;
  EXPECT_EQ(run.out, read_text(expected_stats)) << "table or statistics differ from " << expected_stats;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, Golden, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace fraglab::testing
