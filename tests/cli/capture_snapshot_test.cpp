// tools/capture_snapshot.py where this project's machines can run it: no GPU here, so its help
// and its refusal (exit 2, one line on stderr) are what can be checked.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/command.hpp"

namespace fraglab::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(FRAGLAB_SOURCE_DIR) + "/tools/capture_snapshot.py";

CommandResult run_script(const std::string& args) { return run_command(kPython + " " + kScript + " " + args); }

TEST(CaptureSnapshot, HelpNamesItsOptions) {
  if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
  const CommandResult r = run_script("--help");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* option : {"--output", "--steps", "--script", "--max-entries", "--stacks"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option << "\n" << r.out;
  }
}

TEST(CaptureSnapshot, WithoutAGpuExitsTwoSayingSo) {
  if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
  const fs::path out = scratch_dir("capture") / "never.pickle";
  const CommandResult r = run_script("-o " + out.string());
  if (r.status == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(r.status, 2);
  // Without PyTorch or without a GPU: either is one line saying which.
  const bool no_gpu = r.err.find("capture_snapshot.py: no CUDA GPU") != std::string::npos;
  const bool no_torch = r.err.find("capture_snapshot.py: PyTorch is not installed") != std::string::npos;
  EXPECT_TRUE(no_gpu || no_torch) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(CaptureSnapshot, BadArgumentsExitTwo) {
  if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
  const CommandResult steps = run_script("--steps 0");
  EXPECT_EQ(steps.status, 2);
  EXPECT_NE(steps.err.find("--steps 0: expected 1 or more"), std::string::npos) << steps.err;
  const CommandResult script = run_script("--script nocolon");
  EXPECT_EQ(script.status, 2);
  EXPECT_NE(script.err.find("--script 'nocolon': expected FILE.py:FUNCTION or MODULE:FUNCTION"), std::string::npos)
      << script.err;
}

}  // namespace
}  // namespace fraglab::testing
