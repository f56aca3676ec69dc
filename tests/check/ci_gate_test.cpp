// This project's own CI gate: every shipped sample trace (traces/samples/*.jsonl) is replayed with
// `fraglab check` against its committed baseline (traces/baselines/NAME.json) and must pass, so a
// change to a policy, the replayer or a reader that moves peak reserved, retries or OOMs on a
// sample fails CI until the baseline is re-recorded on purpose:
//   fraglab check traces/samples/NAME.jsonl --baseline traces/baselines/NAME.json --update-baseline
// (add -p SPEC... to record a new sample's first baseline). One CTest test per sample.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = FRAGLAB_SOURCE_DIR;

std::vector<std::string> samples() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kRoot / "traces" / "samples", ec)) {
    if (entry.path().extension() == ".jsonl") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class CiGate : public ::testing::TestWithParam<std::string> {};

TEST_P(CiGate, SampleMatchesItsBaseline) {
  const fs::path trace = kRoot / "traces" / "samples" / (GetParam() + ".jsonl");
  const fs::path baseline = kRoot / "traces" / "baselines" / (GetParam() + ".json");
  ASSERT_TRUE(fs::exists(baseline)) << "no baseline for " << trace << "; record one with\n  fraglab check "
                                    << trace.string() << " --baseline " << baseline.string()
                                    << " -p pytorch -p pytorch:expandable_segments:True -p nocache --update-baseline";
  const auto run = testing::run_fraglab("check " + trace.string() + " --baseline " + baseline.string());
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  // The baseline records the sample's identity, so a changed sample cannot pass unnoticed.
  EXPECT_EQ(run.err.find("no trace identity"), std::string::npos) << run.err;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Samples, CiGate, ::testing::ValuesIn(samples()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CiGate);

TEST(CiGateSetup, EverySampleIsGated) {
  EXPECT_FALSE(samples().empty()) << "no traces/samples/*.jsonl";
  // A baseline whose sample is gone is a leftover: it gates nothing.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kRoot / "traces" / "baselines", ec)) {
    if (entry.path().extension() != ".json") continue;
    EXPECT_TRUE(fs::exists(kRoot / "traces" / "samples" / (entry.path().stem().string() + ".jsonl")))
        << entry.path() << " has no sample trace";
  }
}

}  // namespace
}  // namespace fraglab
