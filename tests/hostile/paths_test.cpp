// Paths that are no trace file (a directory, an endless device, an empty device) given where a
// trace is expected: each is refused in one line naming the path, exit 2, at once (the read stops
// at the first bytes of an endless stream instead of filling memory).
#include <gtest/gtest.h>

#include "support/resource_use.hpp"

namespace fraglab::testing {
namespace {

TEST(HostilePaths, ADirectoryOrADeviceGivenAsATraceIsRefusedInOneLine) {
  const fs::path dir = scratch_dir("hostile-paths") / "a-directory";
  fs::create_directories(dir);
  for (const std::string& path : {dir.string(), std::string("/dev/zero"), std::string("/dev/null")}) {
    for (const char* command : {"inspect", "replay", "validate", "convert"}) {
      std::vector<std::string> args{command, path};
      if (std::string(command) == "convert") args.insert(args.end(), {"-o", (dir.parent_path() / "x.jsonl").string()});
      const MeasuredRun run = run_fraglab_measured(args);
      EXPECT_EQ(run.status, 2) << command << " " << path << ": " << run.err;
      EXPECT_TRUE(is_one_line(run.err)) << run.err;
      EXPECT_NE(run.err.find(path + ":"), std::string::npos) << run.err;
      // /dev/zero never ends: only a read that stops at its first bytes stays this small and fast.
      EXPECT_LT(run.max_rss_bytes, (std::uint64_t{64} << 20) + kSanitizerAllowance) << command << " " << path;
      EXPECT_LT(run.cpu_seconds, 2.0 * kSanitizerSlowdown) << command << " " << path;
    }
  }
}

}  // namespace
}  // namespace fraglab::testing
