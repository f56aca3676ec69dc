// `fraglab maxbatch -o FILE --resume`: a search interrupted after some of its runs continues from
// its results file, replays only the runs the file does not hold, and ends with the very file and
// output of the uninterrupted search; a file of another search is refused (exit 2, one line).
#include <gtest/gtest.h>

#include <string>

#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_fraglab;

// The small family of maxbatch_cli_test.cpp (boundaries under micro-batch 24), three specs.
const std::string kRun =
    "maxbatch --model gpt2-xl --world-size 2 --steps 2 --device sim:24GiB --max-batch 24 -j 1 -p pytorch "
    "--grid expandable_segments=True,False --json";

// The file as a killed search leaves it: its first `keep` lines, then part of the next line.
std::string cut(const std::string& text, std::size_t keep) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < keep; ++i) end = text.find('\n', end) + 1;
  return text.substr(0, end) + text.substr(end, 15);
}

void expect_resume_completes(const std::string& ext, std::size_t head_lines) {
  const fs::path dir = testing::scratch_dir("maxbatch-resume");
  const fs::path whole = dir / ("whole" + ext), resumed = dir / ("resumed" + ext);
  const auto full = run_fraglab(kRun + " -o " + whole.string());
  ASSERT_EQ(full.status, 0) << full.err;
  const std::string expected = read_text(whole);
  const std::size_t runs = testing::count_lines(expected) - head_lines;
  ASSERT_GT(runs, 10u);
  for (const std::size_t kept : {std::size_t{0}, runs / 2, runs}) {
    testing::write_text(resumed, cut(expected, head_lines + kept));
    const auto r = run_fraglab(kRun + " -o " + resumed.string() + " --resume -v");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, full.out) << kept << " runs kept";
    EXPECT_EQ(read_text(resumed), expected) << kept << " runs kept";
    EXPECT_NE(r.err.find("maxbatch: " + std::to_string(kept) + " runs already in " + resumed.string()),
              std::string::npos)
        << r.err;
    // Every run in the file: no micro-batch is generated and replayed again (-v logs each one).
    const bool replayed = r.err.find("maxbatch: micro-batch ") != std::string::npos;
    EXPECT_EQ(replayed, kept < runs) << r.err;
  }
}

TEST(MaxbatchResume, CsvEndsAsTheUninterruptedSearch) { expect_resume_completes(".csv", 2); }  // metadata, header
TEST(MaxbatchResume, JsonlEndsAsTheUninterruptedSearch) { expect_resume_completes(".jsonl", 1); }

TEST(MaxbatchResume, AFileOfAnotherSearchIsRefused) {
  const fs::path dir = testing::scratch_dir("maxbatch-resume-other");
  const fs::path file = dir / "r.csv";
  ASSERT_EQ(run_fraglab(kRun + " -o " + file.string()).status, 0);
  const std::string before = read_text(file);
  const auto seed = run_fraglab(kRun + " --seed 1 -o " + file.string() + " --resume");
  EXPECT_EQ(seed.status, 2);
  EXPECT_NE(seed.err.find(file.string() + ": the results of a different maxbatch run: different workloads"),
            std::string::npos)
      << seed.err;
  const auto shard = run_fraglab(kRun + " --shard 1/2 -o " + file.string() + " --resume");
  EXPECT_EQ(shard.status, 2);
  EXPECT_NE(shard.err.find("different shard counts (2 vs 1)"), std::string::npos) << shard.err;
  EXPECT_EQ(read_text(file), before) << "a refused resume leaves the file as it was";

  const fs::path sweep = dir / "sweep.csv";
  ASSERT_EQ(
      run_fraglab("sweep " + std::string(FRAGLAB_SOURCE_DIR) +
                  "/traces/samples/streams.jsonl --grid max_split_size_mb=none,20 --no-progress -o " + sweep.string())
          .status,
      0);
  const auto from_sweep = run_fraglab(kRun + " -o " + sweep.string() + " --resume");
  EXPECT_EQ(from_sweep.status, 2);
  EXPECT_NE(from_sweep.err.find(sweep.string() + ":1: a sweep results file"), std::string::npos) << from_sweep.err;
}

TEST(MaxbatchResume, ResumeNeedsAnOutputFileAndExcludesOverwrite) {
  const auto no_file = run_fraglab(kRun + " --resume");
  EXPECT_EQ(no_file.status, 2);
  EXPECT_NE(no_file.err.find("fraglab maxbatch: error: --resume needs -o FILE (the results file to continue)\n"),
            std::string::npos)
      << no_file.err;
  const fs::path file = testing::scratch_dir("maxbatch-resume-flags") / "r.csv";
  const auto both = run_fraglab(kRun + " -o " + file.string() + " --resume --overwrite");
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("fraglab maxbatch: error: --resume and --overwrite: give one of them\n"), std::string::npos)
      << both.err;
  // Without --resume an existing file is kept, and the message names both ways on.
  ASSERT_EQ(run_fraglab(kRun + " -o " + file.string()).status, 0);
  const auto again = run_fraglab(kRun + " -o " + file.string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("already exists (--resume continues it, --overwrite replaces it)"), std::string::npos)
      << again.err;
}

}  // namespace
}  // namespace fraglab
