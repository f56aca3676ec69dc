// `fraglab check --junit FILE` and `--json FILE`: what CI systems read. The XML is parsed
// minimally here (testcase elements and their attributes), counted against the runs and metrics
// of the baseline, and checked for the failure of a regression made on purpose.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "fraglab/check.hpp"
#include "fraglab/check_report.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_fraglab;

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";
const std::string kBaseline = std::string(FRAGLAB_SOURCE_DIR) + "/traces/baselines/two-phase.json";

struct TestCase {
  std::string classname, name;
  bool failed = false;
  std::string message;
};

// The <testcase> elements of a JUnit file, in order.
std::vector<TestCase> testcases(const std::string& xml) {
  std::vector<TestCase> out;
  const std::regex element(
      R"re(<testcase classname="([^"]*)" name="([^"]*)"(/>|>\s*<failure message="([^"]*)"[^>]*/>\s*</testcase>))re");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), element); it != std::sregex_iterator(); ++it) {
    out.push_back({(*it)[1], (*it)[2], (*it)[3] != "/>", (*it)[4]});
  }
  return out;
}

std::string attribute(const std::string& xml, const std::string& element, const std::string& name) {
  std::smatch m;
  const std::regex re("<" + element + R"([^>]* )" + name + R"re(="([^"]*)")re");
  return std::regex_search(xml, m, re) ? std::string(m[1]) : std::string("(none)");
}

// The committed baseline with the pytorch run's peak reserved 3% lower: a regression of the replay.
fs::path lowered_baseline(const fs::path& dir, std::uint64_t* was = nullptr, std::uint64_t* now = nullptr) {
  auto baseline = nlohmann::json::parse(read_text(kBaseline));
  for (auto& run : baseline["runs"]) {
    if (run["policy"] != "pytorch") continue;
    const auto reserved = run["peak_reserved_bytes"].get<std::uint64_t>();
    run["peak_reserved_bytes"] = reserved * 100 / 103;
    if (was != nullptr) *was = reserved * 100 / 103;
    if (now != nullptr) *now = reserved;
  }
  const fs::path path = dir / "lowered.json";
  testing::write_text(path, baseline.dump(2));
  return path;
}

TEST(CheckReports, JunitHasOneTestcasePerRunAndMetricAndFailsTheRegression) {
  const fs::path dir = testing::scratch_dir("check-reports");
  const fs::path baseline = lowered_baseline(dir);
  const fs::path junit = dir / "check.xml";
  const auto run = run_fraglab("check " + kSample + " --baseline " + baseline.string() + " --junit " + junit.string());
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  const std::string xml = read_text(junit);
  ASSERT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", 0), 0u) << xml;

  const auto runs = nlohmann::json::parse(read_text(kBaseline))["runs"];
  const std::size_t metrics = checked_metrics().size();
  const std::vector<TestCase> cases = testcases(xml);
  ASSERT_EQ(cases.size(), runs.size() * metrics) << xml;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (std::size_t m = 0; m < metrics; ++m) {
      EXPECT_EQ(cases[r * metrics + m].classname, runs[r]["policy"].get<std::string>());
      EXPECT_EQ(cases[r * metrics + m].name, checked_metrics()[m].key);
    }
  }
  std::size_t failed = 0;
  for (const TestCase& c : cases) {
    if (!c.failed) continue;
    ++failed;
    EXPECT_EQ(c.classname, "pytorch");
    EXPECT_EQ(c.name, "peak_reserved_bytes");
    EXPECT_NE(c.message.find("limit +0"), std::string::npos) << c.message;
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(attribute(xml, "testsuite", "name"), "fraglab check");
  EXPECT_EQ(attribute(xml, "testsuite", "tests"), std::to_string(runs.size() * metrics));
  EXPECT_EQ(attribute(xml, "testsuite", "failures"), "1");

  // Deterministic: the same check writes the same bytes.
  const fs::path again = dir / "again.xml";
  run_fraglab("check " + kSample + " --baseline " + baseline.string() + " --junit " + again.string());
  EXPECT_EQ(read_text(again), xml);
}

TEST(CheckReports, JsonCarriesBaselineValueLimitAndPass) {
  const fs::path dir = testing::scratch_dir("check-reports");
  std::uint64_t was = 0, now = 0;
  const fs::path baseline = lowered_baseline(dir, &was, &now);
  const auto run = run_fraglab("check " + kSample + " --baseline " + baseline.string() + " --json -");
  EXPECT_EQ(run.status, 1) << run.err;
  // With the report on stdout, the table moves to stderr.
  EXPECT_NE(run.err.find("REGRESSED"), std::string::npos) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["regressions"], 1);
  EXPECT_EQ(j["trace_changed"], false);
  EXPECT_EQ(j["trace"]["name"], "two-phase");
  const auto runs = nlohmann::json::parse(read_text(kBaseline))["runs"];
  ASSERT_EQ(j["checks"].size(), runs.size() * checked_metrics().size());
  std::size_t failing = 0;
  for (const auto& c : j["checks"]) {
    for (const char* key : {"policy", "metric", "baseline", "value", "limit", "gated", "pass", "violated"}) {
      EXPECT_TRUE(c.contains(key)) << key << " in " << c.dump();
    }
    if (c["pass"] == true) continue;
    ++failing;
    EXPECT_EQ(c["policy"], "pytorch");
    EXPECT_EQ(c["metric"], "peak_reserved_bytes");
    EXPECT_EQ(c["baseline"], was);
    EXPECT_EQ(c["value"], now);
    EXPECT_EQ(c["limit"], "+0");
    EXPECT_EQ(c["violated"], "+0");
  }
  EXPECT_EQ(failing, 1);
  // Not gated by default: no limit, and it passes.
  for (const auto& c : j["checks"]) {
    if (c["metric"] == "peak_utilization") {
      EXPECT_EQ(c["gated"], false);
      EXPECT_TRUE(c["limit"].is_null());
      EXPECT_EQ(c["pass"], true);
    }
  }
}

TEST(CheckReports, ProblemsAreFailingTestcasesToo) {
  // A changed trace is a failure of its own: a report listing only metrics would be green.
  const fs::path dir = testing::scratch_dir("check-reports");
  const fs::path junit = dir / "trace.xml";
  const auto run =
      run_fraglab("check " + std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/concat-after.jsonl " + "--baseline " +
                  std::string(FRAGLAB_SOURCE_DIR) + "/traces/baselines/concat-before.json --junit " + junit.string());
  EXPECT_EQ(run.status, 1);
  const std::vector<TestCase> cases = testcases(read_text(junit));
  ASSERT_FALSE(cases.empty());
  EXPECT_EQ(cases[0].classname, "fraglab check");
  EXPECT_EQ(cases[0].name, "trace");
  EXPECT_TRUE(cases[0].failed);
  EXPECT_EQ(cases[0].message.rfind("the trace changed: baseline concat-before", 0), 0u) << cases[0].message;
}

TEST(CheckReports, XmlSpecialCharactersAreEscaped) {
  // Policy specs may carry '>' (roundup_power2_divisions:[1:2,>:4]); names of any kind are escaped.
  nlohmann::json doc = {{"trace", {{"name", "t"}, {"events", 1}}},
                        {"runs",
                         {{{"policy", "a&b<\"c'>"},
                           {"peak_reserved_bytes", 2},
                           {"peak_allocated_bytes", 1},
                           {"peak_requested_bytes", 1},
                           {"fragmentation_at_peak", 0.5},
                           {"peak_utilization", 0.5},
                           {"num_alloc_retries", 0},
                           {"num_ooms", 0},
                           {"num_device_alloc", 1},
                           {"num_device_free", 0}}}}};
  nlohmann::json worse = doc;
  worse["runs"][0]["peak_reserved_bytes"] = 3;
  const std::string xml = check_junit(check_results(doc, worse, Thresholds{}));
  EXPECT_NE(xml.find("classname=\"a&amp;b&lt;&quot;c&apos;&gt;\" name=\"peak_reserved_bytes\""), std::string::npos)
      << xml;
  EXPECT_EQ(xml.find("a&b"), std::string::npos) << xml;

  const fs::path dir = testing::scratch_dir("check-reports");
  const fs::path baseline = dir / "brackets.json";
  fs::remove(baseline);
  const std::string spec = "pytorch:roundup_power2_divisions:[1:2,>:4]";
  ASSERT_EQ(
      run_fraglab("check " + kSample + " -b " + baseline.string() + " -p '" + spec + "' --update-baseline").status, 0);
  const auto run = run_fraglab("check " + kSample + " -b " + baseline.string() + " --junit -");
  EXPECT_EQ(run.status, 0) << run.err;
  const std::vector<TestCase> cases = testcases(run.out);
  ASSERT_EQ(cases.size(), checked_metrics().size()) << run.out;
  EXPECT_EQ(cases[0].classname, "pytorch:roundup_power2_divisions:[1:2,&gt;:4]");
}

}  // namespace
}  // namespace fraglab
