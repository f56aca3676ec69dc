// The command line for a newcomer (issue 14): `fraglab help CMD`, outputs that are not replaced
// without --overwrite, -j that must be a positive count, and policy specs written the way
// PYTORCH_CUDA_ALLOC_CONF is (without the policy name) or mistyped get a suggestion.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

TEST(Help, HelpCommandIsCommandDashDashHelp) {
  for (const char* cmd : {"replay", "gen", "convert", "merge", "sweep", "compare"}) {
    const auto help = run_fraglab(std::string("help ") + cmd);
    const auto dash = run_fraglab(std::string(cmd) + " --help");
    EXPECT_EQ(help.status, 0) << cmd << help.err;
    EXPECT_EQ(help.out, dash.out) << cmd;
    EXPECT_NE(help.out.find(std::string("usage: fraglab ") + cmd), std::string::npos) << cmd;
  }
}

TEST(Help, HelpAloneIsTheUsageAndAnUnknownCommandIsNamed) {
  const auto help = run_fraglab("help");
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.out, run_fraglab("--help").out);
  const auto nosuch = run_fraglab("help nosuch");
  EXPECT_EQ(nosuch.status, 2);
  EXPECT_EQ(nosuch.err,
            "fraglab help: unknown command 'nosuch' (expected one of replay, inspect, convert, validate, gen, "
            "maxbatch, compare, policies, sweep, merge, check, diff, report, calibrate)\n");
}

TEST(Overwrite, ConvertRefusesAnExistingFileUnlessOverwrite) {
  const fs::path out = testing::scratch_dir("convert-exists") / "out.jsonl";
  testing::write_text(out, "earlier work\n");
  const std::string args = "convert " + kSamples + "two-phase.jsonl -o " + out.string();
  const auto refused = run_fraglab(args);
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err, "fraglab convert: error: " + out.string() + ": already exists (--overwrite replaces it)\n");
  EXPECT_EQ(testing::read_text(out), "earlier work\n");
  const auto replaced = run_fraglab(args + " --overwrite");
  EXPECT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_NE(testing::read_text(out), "earlier work\n");
  // stdout and an empty file are not "existing work".
  EXPECT_EQ(run_fraglab("convert " + kSamples + "two-phase.jsonl -o -").status, 0);
  const fs::path empty = out.parent_path() / "empty.jsonl";
  testing::write_text(empty, "");
  EXPECT_EQ(run_fraglab("convert " + kSamples + "two-phase.jsonl -o " + empty.string()).status, 0);
}

TEST(Overwrite, MergeRefusesAnExistingFileUnlessOverwrite) {
  const fs::path dir = testing::scratch_dir("merge-exists");
  const fs::path shard = dir / "s.csv", out = dir / "m.csv";
  fs::remove(shard);
  ASSERT_EQ(run_fraglab("sweep " + kSamples +
                        "two-phase.jsonl --grid expandable_segments=False,True --no-progress -o " + shard.string())
                .status,
            0);
  testing::write_text(out, "earlier work\n");
  const std::string args = "merge " + shard.string() + " -o " + out.string();
  const auto refused = run_fraglab(args);
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err, "fraglab merge: error: " + out.string() + ": already exists (--overwrite replaces it)\n");
  EXPECT_EQ(testing::read_text(out), "earlier work\n");
  const auto replaced = run_fraglab(args + " --overwrite");
  EXPECT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_EQ(testing::read_text(out), testing::read_text(shard)) << "one shard merged is itself";
}

TEST(Jobs, NonPositiveJobCountsAreErrors) {
  for (const char* jobs : {"-1", "0"}) {
    const auto run = run_fraglab("sweep " + kSamples + "two-phase.jsonl --grid expandable_segments=False,True -j " +
                                 jobs + " --no-progress");
    EXPECT_EQ(run.status, 2) << jobs << run.err;
    EXPECT_EQ(run.err, std::string("fraglab sweep: error: -j ") + jobs + ": expected 1..4096 worker threads\n");
  }
  EXPECT_EQ(
      run_fraglab("sweep " + kSamples + "two-phase.jsonl --grid expandable_segments=False,True -j 1 --no-progress")
          .status,
      0);
}

TEST(PolicySpec, AnAllocConfOptionWithoutThePolicySuggestsIt) {
  const auto run = run_fraglab("replay " + kSamples + "two-phase.jsonl -p expandable_segments:True");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("unknown policy 'expandable_segments': did you mean 'pytorch:expandable_segments:True'?"),
            std::string::npos)
      << run.err;
  // The whole value is kept, list included.
  const auto list = run_fraglab("replay " + kSamples + "two-phase.jsonl -p 'roundup_power2_divisions:[256:1,>:4]'");
  EXPECT_NE(list.err.find("did you mean 'pytorch:roundup_power2_divisions:[256:1,>:4]'?"), std::string::npos)
      << list.err;
}

TEST(PolicySpec, AMistypedPolicyNameSuggestsTheNearestOne) {
  const auto run = run_fraglab("replay " + kSamples + "two-phase.jsonl -p pytroch:expandable_segments:True");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("unknown policy 'pytroch': did you mean 'pytorch:expandable_segments:True'?"),
            std::string::npos)
      << run.err;
  // Nothing close: no suggestion, only the list.
  const auto far = run_fraglab("replay " + kSamples + "two-phase.jsonl -p zzzzzzzz");
  EXPECT_NE(far.err.find("unknown policy 'zzzzzzzz' (known: "), std::string::npos) << far.err;
}

TEST(PolicySpec, UnclosedRoundupListIsNamedThroughTheCommand) {
  const auto run =
      run_fraglab("replay " + kSamples + "two-phase.jsonl -p 'pytorch:roundup_power2_divisions:[256:1,512:2'");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("roundup_power2_divisions: the list '[256:1,512:2' has no closing ']'"), std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("internal error"), std::string::npos);
}

}  // namespace
}  // namespace fraglab
