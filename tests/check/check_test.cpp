// fraglab check: thresholds both ways (a regression just over a limit fails, one at the limit
// passes), the defaults, runs missing on either side, and the command's exit codes.
#include <gtest/gtest.h>

#include "fraglab/check.hpp"
#include "fraglab/check_report.hpp"
#include "fraglab/types.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::run_fraglab;

nlohmann::json results(Bytes reserved, std::uint64_t retries = 0, double utilization = 0.9,
                       std::string policy = "pytorch") {
  return {{"trace", {{"name", "t"}, {"events", 10}}},
          {"device", {{"kind", "sim"}, {"capacity_bytes", 80 * GiB}, {"external_bytes", 0}}},
          {"runs",
           {{{"policy", policy},
             {"peak_reserved_bytes", reserved},
             {"peak_allocated_bytes", reserved / 2},
             {"peak_requested_bytes", reserved / 2},
             {"fragmentation_at_peak", 0.25},
             {"peak_utilization", utilization},
             {"num_alloc_retries", retries},
             {"num_ooms", 0},
             {"num_device_alloc", 10},
             {"num_device_free", 0}}}}};
}

const MetricCheck& verdict(const CheckOutcome& o, const std::string& metric) {
  for (const MetricCheck& c : o.checks) {
    if (c.metric == metric) return c;
  }
  throw std::runtime_error("no check of " + metric);
}

TEST(Check, DefaultsFailAnyRiseOfReservedRetriesOoms) {
  const Thresholds defaults;
  EXPECT_TRUE(check_results(results(100 * MiB), results(100 * MiB), defaults).passed());
  EXPECT_TRUE(check_results(results(100 * MiB), results(90 * MiB), defaults).passed()) << "improvements pass";
  const CheckOutcome up = check_results(results(100 * MiB), results(100 * MiB + 1), defaults);
  EXPECT_FALSE(up.passed());
  EXPECT_EQ(up.regressions(), 1u);
  EXPECT_TRUE(verdict(up, "peak_reserved_bytes").regressed);
  const CheckOutcome retry = check_results(results(100 * MiB, 0), results(100 * MiB, 1), defaults);
  EXPECT_TRUE(verdict(retry, "num_alloc_retries").regressed);
  // Not gated by default: reported, never failing.
  const CheckOutcome util = check_results(results(100 * MiB, 0, 0.9), results(100 * MiB, 0, 0.5), defaults);
  EXPECT_TRUE(util.passed());
  EXPECT_FALSE(verdict(util, "peak_utilization").gated);
}

TEST(Check, RelativeLimitBothWays) {
  // 100 MiB -> 102 MiB is exactly +2%.
  Thresholds two;
  two.add_max_regress("peak_reserved=2%");  // the _bytes suffix may be left out
  EXPECT_TRUE(check_results(results(100 * MiB), results(102 * MiB), two).passed());
  EXPECT_FALSE(check_results(results(100 * MiB), results(102 * MiB + 1), two).passed());
  Thresholds one;
  one.add_max_regress("peak_reserved_bytes=1.5%");
  const CheckOutcome o = check_results(results(100 * MiB), results(102 * MiB), one);
  EXPECT_FALSE(o.passed());
  EXPECT_EQ(verdict(o, "peak_reserved_bytes").violated, "+1.5%");
}

TEST(Check, AbsoluteLimitBothWays) {
  Thresholds t;
  t.add_max_regress("peak_reserved=1MiB");
  EXPECT_TRUE(check_results(results(100 * MiB), results(101 * MiB), t).passed());
  EXPECT_FALSE(check_results(results(100 * MiB), results(101 * MiB + 512), t).passed());
  // A higher-is-better metric regresses when it falls.
  Thresholds u;
  u.add_max_regress("peak_utilization=0.05");
  EXPECT_TRUE(check_results(results(1, 0, 0.90), results(1, 0, 0.86), u).passed());
  const CheckOutcome fell = check_results(results(1, 0, 0.90), results(1, 0, 0.80), u);
  EXPECT_FALSE(fell.passed());
  EXPECT_TRUE(verdict(fell, "peak_utilization").regressed);
  EXPECT_TRUE(check_results(results(1, 0, 0.90), results(1, 0, 0.99), u).passed()) << "a rise is an improvement";
}

TEST(Check, CeilingIgnoresTheBaseline) {
  Thresholds t;
  t.add_max("num_alloc_retries=0");
  EXPECT_FALSE(check_results(results(1, 3), results(1, 3), t).passed()) << "unchanged but above the ceiling";
  Thresholds g;
  g.add_max("peak_reserved=1GiB");
  EXPECT_TRUE(check_results(results(2 * GiB), results(GiB), g).passed());
  EXPECT_FALSE(check_results(results(GiB / 2), results(GiB + 1), g).passed());
  // A limit given for a metric replaces its default: here reserved may rise up to the ceiling.
  EXPECT_TRUE(check_results(results(GiB / 2), results(GiB), g).passed());
}

TEST(Check, IgnoreDropsTheDefault) {
  Thresholds t;
  t.ignore("num_alloc_retries");
  EXPECT_TRUE(check_results(results(1, 0), results(1, 5), t).passed());
}

TEST(Check, MissingRunsFail) {
  const Thresholds t;
  const CheckOutcome extra = check_results(results(1), results(1, 0, 0.9, "nocache"), t);
  EXPECT_FALSE(extra.passed());
  ASSERT_EQ(extra.problems.size(), 2u);
  EXPECT_EQ(extra.problems[0], "run 'nocache' has no baseline (record one with --update-baseline)");
  EXPECT_EQ(extra.problems[1], "run 'pytorch' is in the baseline but was not replayed");
}

// Found by tests/fuzz (baseline): a run that is not an object, or a policy that is not a string,
// made json::value() throw a type_error (exit 3, "internal error") instead of an InputError.
TEST(Check, RunsOfTheWrongShapeAreInputErrors) {
  const Thresholds t;
  auto error = [&](const char* text) {
    try {
      (void)check_results(nlohmann::json::parse(text), results(1), t);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error(R"({"runs": [1]})"), "the baseline's runs[0] is a number, expected an object");
  EXPECT_EQ(error(R"({"runs": [{"policy": 7}]})"), "the baseline's runs[0].policy is a number, expected a string");
  // The device and trace sections are read the same way (cmd_check's baseline_device too).
  EXPECT_EQ(error(R"({"runs": [], "device": 5})"), "the baseline's \"device\" is a number, expected an object");
  EXPECT_EQ(error(R"({"runs": [], "trace": []})"), "the baseline's \"trace\" is an array, expected an object");
  EXPECT_EQ(error(R"({"runs": [], "device": {"kind": 7}})"),
            "the baseline's device.kind is a number, expected a string");
}

TEST(Check, BadThresholdsNameTheArgument) {
  Thresholds t;
  auto error = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error([&] { t.add_max_regress("peak_reserved"); }).find("expected METRIC=VALUE"), std::string::npos);
  EXPECT_NE(error([&] { t.add_max_regress("peak_reservd=2%"); }).find("unknown metric 'peak_reservd' (known: "),
            std::string::npos);
  EXPECT_NE(error([&] { t.add_max_regress("num_ooms=-1"); }).find("expected a non-negative number"), std::string::npos);
  EXPECT_NE(error([&] { t.add_max_regress("peak_reserved=x%"); }).find("percentage"), std::string::npos);
  EXPECT_NE(error([&] { t.add_max("peak_reserved=lots"); }).find("lots"), std::string::npos);
}

TEST(Check, TableSaysWhatRegressedAndByHowMuch) {
  Thresholds t;
  t.add_max_regress("peak_reserved=2%");
  const std::string text = check_table(check_results(results(100 * MiB), results(110 * MiB), t));
  EXPECT_NE(text.find("REGRESSED"), std::string::npos) << text;
  EXPECT_NE(text.find("+10.00 MiB (+10.00%)"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL: 1 regression\n  pytorch peak_reserved_bytes: 100.00 MiB -> 110.00 MiB"), std::string::npos)
      << text;
}

// ---- the command ---------------------------------------------------------------------------

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";

TEST(CheckCli, UpdateThenCheckThenRegress) {
  const fs::path dir = testing::scratch_dir("check");
  const fs::path baseline = dir / "baseline.json";
  fs::remove(baseline);
  const auto update =
      run_fraglab("check " + kSample + " --baseline " + baseline.string() + " -p pytorch -p nocache --update-baseline");
  ASSERT_EQ(update.status, 0) << update.err;
  EXPECT_EQ(update.out, "wrote baseline " + baseline.string() + " (2 runs)\n");
  // The baseline is the results JSON of `fraglab replay --json`, byte for byte.
  const auto replay = run_fraglab("replay " + kSample + " -p pytorch -p nocache --json -");
  EXPECT_EQ(testing::read_text(baseline), replay.out);

  // Same code, same trace: passes, replaying the baseline's runs on the baseline's device.
  const auto same = run_fraglab("check " + kSample + " --baseline " + baseline.string());
  EXPECT_EQ(same.status, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("ok: 6 gated metrics within limits"), std::string::npos) << same.out;

  // Pretend the baseline was 3% lower: the replay is now a 3% regression.
  nlohmann::json lower = nlohmann::json::parse(testing::read_text(baseline));
  const auto reserved = lower["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>();  // pytorch
  lower["runs"][0]["peak_reserved_bytes"] = reserved * 100 / 103;
  const fs::path tampered = dir / "lower.json";
  testing::write_text(tampered, lower.dump(2));
  const auto fail = run_fraglab("check " + kSample + " --baseline " + tampered.string());
  EXPECT_EQ(fail.status, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("REGRESSED"), std::string::npos) << fail.out;
  EXPECT_NE(fail.out.find("FAIL: 1 regression\n  pytorch peak_reserved_bytes:"), std::string::npos) << fail.out;
  const auto tolerant =
      run_fraglab("check " + kSample + " --baseline " + tampered.string() + " --max-regress peak_reserved=5%");
  EXPECT_EQ(tolerant.status, 0) << tolerant.out;
  const auto strict =
      run_fraglab("check " + kSample + " --baseline " + tampered.string() + " --max-regress peak_reserved=2%");
  EXPECT_EQ(strict.status, 1) << strict.out;

  // A results JSON instead of a replay.
  const fs::path results = dir / "results.json";
  testing::write_text(results, replay.out);
  EXPECT_EQ(run_fraglab("check --results " + results.string() + " --baseline " + baseline.string()).status, 0);
  EXPECT_EQ(run_fraglab("check --results " + results.string() + " --baseline " + tampered.string()).status, 1);
  // A policy the baseline does not have.
  const auto extra =
      run_fraglab("check " + kSample + " --baseline " + baseline.string() + " -p pytorch:expandable_segments:True");
  EXPECT_EQ(extra.status, 1);
  EXPECT_NE(extra.out.find("has no baseline"), std::string::npos) << extra.out;
}

TEST(CheckCli, BadInputIsExit2) {
  const fs::path dir = testing::scratch_dir("check");
  const auto missing = run_fraglab("check " + kSample + " --baseline " + (dir / "nope.json").string());
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nope.json: cannot read the baseline (record one with --update-baseline)"),
            std::string::npos)
      << missing.err;
  testing::write_text(dir / "notresults.json", "{\"a\": 1}");
  const auto wrong = run_fraglab("check " + kSample + " --baseline " + (dir / "notresults.json").string());
  EXPECT_EQ(wrong.status, 2);
  EXPECT_NE(wrong.err.find("has no \"runs\" list"), std::string::npos) << wrong.err;
  testing::write_text(dir / "badrun.json", "{\"runs\": [1]}");
  const auto badrun = run_fraglab("check " + kSample + " --baseline " + (dir / "badrun.json").string());
  EXPECT_EQ(badrun.status, 2);
  EXPECT_NE(badrun.err.find("badrun.json: the baseline's runs[0] is a number, expected an object"), std::string::npos)
      << badrun.err;
  const auto metric = run_fraglab("check " + kSample + " --baseline x.json --max-regress frag=1%");
  EXPECT_EQ(metric.status, 2);
  EXPECT_NE(metric.err.find("unknown metric 'frag'"), std::string::npos) << metric.err;
  const auto neither = run_fraglab("check --baseline x.json");
  EXPECT_EQ(neither.status, 2);
}

// --check-invariants watches check's replays as it does replay's: a clean sample passes as it
// does without it; with --results there is nothing to watch, which is bad input.
TEST(CheckCli, CheckInvariantsWatchesTheReplays) {
  const std::string baseline = std::string(FRAGLAB_SOURCE_DIR) + "/traces/baselines/two-phase.json";
  const auto plain = run_fraglab("check " + kSample + " --baseline " + baseline);
  const auto checked = run_fraglab("check " + kSample + " --baseline " + baseline + " --check-invariants");
  ASSERT_EQ(plain.status, 0) << plain.out << plain.err;
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out, plain.out);
  const auto no_replay = run_fraglab("check --results " + baseline + " --baseline " + baseline + " --check-invariants");
  EXPECT_EQ(no_replay.status, 2);
  EXPECT_NE(no_replay.err.find("--check-invariants checks replays"), std::string::npos) << no_replay.err;
}

}  // namespace
}  // namespace fraglab
