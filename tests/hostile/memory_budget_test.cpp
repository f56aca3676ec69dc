// --max-memory: the most heap memory a command may use (README "Reliability"). An input that needs
// more is refused in one line, exit 2, and the process never grows far past the budget: every heap
// allocation is counted against it (src/cli/memory_accounting.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "fraglab/types.hpp"
#include "support/resource_use.hpp"

namespace fraglab::testing {
namespace {

// A valid trace of `pairs` alloc/free pairs, every allocation alive to the end (so replaying it
// holds all of them): about 70 bytes of text and two events per pair.
fs::path many_live_allocations(std::size_t pairs) {
  const fs::path path = scratch_dir("hostile-budget") / ("live-" + std::to_string(pairs) + ".jsonl");
  std::ofstream out(path, std::ios::binary);
  out << "{\"fraglab_trace\":1,\"name\":\"many-live\"}\n";
  for (std::size_t i = 1; i <= pairs; ++i) out << "{\"op\":\"alloc\",\"id\":" << i << ",\"size\":512}\n";
  for (std::size_t i = 1; i <= pairs; ++i) out << "{\"op\":\"free\",\"id\":" << i << "}\n";
  return path;
}

TEST(MaxMemory, ATraceLargerThanTheBudgetIsRefusedInOneLineAndTheProcessStaysNearTheBudget) {
  // 600,000 allocations: the text alone is ~24 MB, the events (40+ bytes each) and the replay's
  // live set several times that: far more than 32 MiB, far less than the default budget.
  const fs::path trace = many_live_allocations(600'000);
  const MeasuredRun refused =
      run_fraglab_measured({"replay", trace.string(), "-p", "nocache", "--max-memory", "32MiB"});
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_TRUE(is_one_line(refused.err)) << refused.err;
  EXPECT_NE(refused.err.find("32.00 MiB"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--max-memory"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(trace.string() + ": "), std::string::npos) << refused.err;
  // Heap stays under the budget; code, stacks and the allocator's own slack come on top.
  EXPECT_LT(refused.max_rss_bytes, (std::uint64_t{32} << 20) + (std::uint64_t{48} << 20) + kSanitizerAllowance);

  const MeasuredRun fits = run_fraglab_measured({"replay", trace.string(), "-p", "nocache", "--max-memory", "2GiB"});
  EXPECT_EQ(fits.status, 0) << fits.err;
  // nocache reserves exactly what is live: 600,000 x 512 bytes at the peak.
  EXPECT_NE(fits.out.find("292.97 MiB"), std::string::npos) << fits.out;
}

TEST(MaxMemory, ARunOutOfBudgetAfterReadingStillNamesTheTrace) {
  // 300,000 live allocations: ~19 MB of text, streamed into the replay (README "Traces"), whose
  // pytorch policy and live set take the process past 48 MiB (Release: 72 MB resident unbounded).
  // Whichever stage runs out, the message names the trace and the budget.
  const fs::path trace = many_live_allocations(300'000);
  const MeasuredRun run = run_fraglab_measured({"replay", trace.string(), "-p", "pytorch", "--max-memory", "48MiB"});
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_TRUE(is_one_line(run.err)) << run.err;
  EXPECT_NE(run.err.find(trace.string() + ": "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("memory budget of 48.00 MiB"), std::string::npos) << run.err;
  EXPECT_LT(run.max_rss_bytes, (std::uint64_t{48} << 20) + (std::uint64_t{48} << 20) + kSanitizerAllowance);
}

TEST(MaxMemory, ASizeWithoutAUnitOrTooSmallIsAnError) {
  const std::string sample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/streams.jsonl";
  for (const char* bad : {"4", "lots", "-1GiB", "1KiB"}) {
    const MeasuredRun run = run_fraglab_measured({"inspect", sample, "--max-memory", bad});
    EXPECT_EQ(run.status, 2) << bad << ": " << run.err;
    EXPECT_TRUE(is_one_line(run.err)) << run.err;
    EXPECT_NE(run.err.find("--max-memory"), std::string::npos) << run.err;
  }
  EXPECT_EQ(run_fraglab_measured({"inspect", sample, "--max-memory", "64MiB"}).status, 0);
}

TEST(MaxMemory, TheDefaultIsThreeQuartersOfTheMachinesMemory) {
  const auto bytes =
      static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) / 4 * 3 * static_cast<Bytes>(::sysconf(_SC_PAGESIZE));
  const MeasuredRun help = run_fraglab_measured({"replay", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find(format_bytes(bytes) + ")"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace fraglab::testing
