// fraglab sweep / merge end to end, as separate processes: a sweep killed part-way and resumed
// ends with the same file as an uninterrupted one; shards merged equal the single-process sweep;
// output bytes do not depend on -j.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fraglab/sweep.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::read_text;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

// A trace long enough that one replay takes some milliseconds: 60k allocations of mixed sizes
// (small, 1-10 MiB and large), each freed a little later, from a fixed pseudo-random sequence.
fs::path long_trace(const fs::path& dir) {
  const fs::path path = dir / "long.jsonl";
  if (fs::exists(path)) return path;
  std::string text = "{\"fraglab_trace\":1,\"name\":\"long\",\"source\":\"sweep test\"}\n";
  std::uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<std::uint64_t> live;
  for (std::uint64_t id = 1; id <= 60000; ++id) {
    const std::uint64_t kind = next() % 10;
    const std::uint64_t size = kind < 5   ? 512 + next() % (1 << 20)
                               : kind < 8 ? (1 << 20) + next() % (9 << 20)
                                          : (10 << 20) + next() % (90 << 20);
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(id) + ",\"size\":" + std::to_string(size) + "}\n";
    live.push_back(id);
    while (live.size() > 40 || (!live.empty() && next() % 3 == 0)) {
      const size_t k = next() % live.size();
      text += "{\"op\":\"free\",\"id\":" + std::to_string(live[k]) + "}\n";
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  testing::write_text(path, text);
  return path;
}

const std::string kGrid =
    "--grid max_split_size_mb=none,20,32,64,128,256 --grid expandable_segments=False,True "
    "--grid roundup_power2_divisions=none,2,4,8";  // 48 settings

size_t data_rows(const std::string& text) {
  // Whole lines only, minus the sweep-metadata line ("# {...}") and the header.
  const size_t head = text.starts_with("# ") ? 2 : 1;
  const size_t lines = count_lines(text);
  return lines < head ? 0 : lines - head;
}

TEST(SweepCli, KilledSweepResumesToTheUninterruptedResult) {
  const fs::path dir = testing::scratch_dir("sweep-resume");
  const std::string trace = long_trace(dir).string();
  const fs::path reference = dir / "reference.csv", killed = dir / "killed.csv";
  fs::remove(reference);
  fs::remove(killed);

  const auto full = run_fraglab("sweep " + trace + " " + kGrid + " -j2 --no-progress -o " + reference.string());
  ASSERT_EQ(full.status, 0) << full.err;
  ASSERT_EQ(data_rows(read_text(reference)), 48u);

  // One thread, so the sweep is still running when a few rows have arrived; then kill -9.
  std::vector<std::string> args = {"sweep", trace, "--no-progress", "-j1", "-o", killed.string()};
  for (const char* g : {"max_split_size_mb=none,20,32,64,128,256", "expandable_segments=False,True",
                        "roundup_power2_divisions=none,2,4,8"}) {
    args.emplace_back("--grid");
    args.emplace_back(g);
  }
  const pid_t pid = testing::spawn_fraglab(args, dir / "killed.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (data_rows(read_text(killed)) < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGKILL);
  EXPECT_EQ(testing::wait_for(pid), -1) << "the sweep ended before it was killed: " << read_text(dir / "killed.log");
  const size_t kept = data_rows(read_text(killed));
  ASSERT_GE(kept, 3u);
  ASSERT_LT(kept, 48u) << "too fast to interrupt";
  // As if the kill had landed in the middle of a write: an unfinished last line.
  testing::write_text(killed, read_text(killed) + "long,sim,\"pytorch:max_split_size_mb:2");

  const auto resumed =
      run_fraglab("sweep " + trace + " " + kGrid + " -j2 --no-progress --resume -o " + killed.string());
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find(fmt::format("; {} already in {}; running {} on", kept, killed.string(), 48 - kept)),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(read_text(killed), read_text(reference));
  // The summary covers the whole grid, the resumed rows included.
  EXPECT_NE(resumed.out.find(": 48 settings =="), std::string::npos) << resumed.out;

  // Resuming a finished sweep runs nothing and changes nothing.
  const auto again = run_fraglab("sweep " + trace + " " + kGrid + " --no-progress --resume -o " + killed.string());
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("; 48 already in"), std::string::npos) << again.err;
  EXPECT_EQ(read_text(killed), read_text(reference));
  EXPECT_EQ(again.out, resumed.out);
}

// 12 settings; the bracketed value is quoted for the shell ('>').
const std::string kSmallGrid =
    "--grid max_split_size_mb=none,20,64 --grid expandable_segments=False,True "
    "--grid 'roundup_power2_divisions=none,[1:2,>:4]'";

std::string sample_traces() {
  return kSamples + "two-phase.jsonl " + kSamples + "streams.jsonl " + kSamples + "cutoff.jsonl";
}

TEST(SweepCli, OutputDoesNotDependOnThreads) {
  const fs::path dir = testing::scratch_dir("sweep-threads");
  std::string first_file, first_out;
  for (int threads : {1, 3}) {
    const fs::path out = dir / ("j" + std::to_string(threads) + ".csv");
    fs::remove(out);
    const auto run = run_fraglab("sweep " + sample_traces() + " " + kSmallGrid + " -j " + std::to_string(threads) +
                                 " --no-progress -o " + out.string());
    ASSERT_EQ(run.status, 0) << run.err;
    const std::string file = read_text(out);
    EXPECT_EQ(data_rows(file), 36u);
    if (first_file.empty()) {
      first_file = file;
      first_out = run.out.substr(0, run.out.find("\nresults:"));
    } else {
      EXPECT_EQ(file, first_file);
      EXPECT_EQ(run.out.substr(0, run.out.find("\nresults:")), first_out);
    }
  }
}

TEST(SweepCli, MergedShardsEqualTheSingleProcessSweep) {
  const fs::path dir = testing::scratch_dir("sweep-shards");
  for (const char* f : {"single.csv", "single.jsonl", "s0.csv", "s1.csv", "s2.jsonl", "merged.csv", "merged.jsonl"}) {
    fs::remove(dir / f);
  }
  const auto single = run_fraglab("sweep " + sample_traces() + " " + kSmallGrid + " -j2 --no-progress -o " +
                                  (dir / "single.csv").string());
  ASSERT_EQ(single.status, 0) << single.err;
  const auto single_jsonl = run_fraglab("sweep " + sample_traces() + " " + kSmallGrid + " -j1 --no-progress -o " +
                                        (dir / "single.jsonl").string());
  ASSERT_EQ(single_jsonl.status, 0) << single_jsonl.err;

  // Three shard processes at once, as a job array would run them; one writes JSONL.
  const char* outputs[] = {"s0.csv", "s1.csv", "s2.jsonl"};
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args = {"sweep",
                                     kSamples + "two-phase.jsonl",
                                     kSamples + "streams.jsonl",
                                     kSamples + "cutoff.jsonl",
                                     "--grid",
                                     "max_split_size_mb=none,20,64",
                                     "--grid",
                                     "expandable_segments=False,True",
                                     "--grid",
                                     "roundup_power2_divisions=none,[1:2,>:4]",
                                     "-j1",
                                     "--no-progress",
                                     "--shard",
                                     std::to_string(i) + "/3",
                                     "-o",
                                     (dir / outputs[i]).string()};
    pids.push_back(testing::spawn_fraglab(args, dir / ("shard" + std::to_string(i) + ".log")));
  }
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(testing::wait_for(pids[static_cast<size_t>(i)]), 0)
        << read_text(dir / ("shard" + std::to_string(i) + ".log"));
    const size_t rows = read_results((dir / outputs[i]).string()).rows.size();
    EXPECT_EQ(rows, 12u) << "36 runs round robin over 3 shards";
    total += rows;
  }
  EXPECT_EQ(total, 36u);

  const std::string shards =
      (dir / "s0.csv").string() + " " + (dir / "s1.csv").string() + " " + (dir / "s2.jsonl").string();
  const auto merged = run_fraglab("merge " + shards + " -o " + (dir / "merged.csv").string());
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_EQ(read_text(dir / "merged.csv"), read_text(dir / "single.csv"));
  // The merge prints the same summary as the sweep did.
  EXPECT_EQ(merged.out.substr(merged.out.find("== ")), single.out.substr(0, single.out.find("\nresults:")));
  const auto merged_jsonl = run_fraglab("merge " + shards + " -o " + (dir / "merged.jsonl").string() + " --no-report");
  ASSERT_EQ(merged_jsonl.status, 0) << merged_jsonl.err;
  EXPECT_EQ(read_text(dir / "merged.jsonl"), read_text(dir / "single.jsonl"));
  // Overlapping inputs are fine when they agree.
  const auto twice = run_fraglab("merge " + shards + " " + (dir / "single.csv").string() + " -o - ");
  ASSERT_EQ(twice.status, 0) << twice.err;
  EXPECT_EQ(twice.out, read_text(dir / "single.csv"));
}

TEST(SweepCli, MergeRefusesRunsThatDisagree) {
  const fs::path dir = testing::scratch_dir("sweep-conflict");
  const fs::path a = dir / "a.csv", b = dir / "b.csv";
  fs::remove(a);
  ASSERT_EQ(run_fraglab("sweep " + kSamples +
                        "two-phase.jsonl --grid expandable_segments=False,True --no-progress -o " + a.string())
                .status,
            0);
  std::string text = read_text(a);
  // Change the first row's peak_reserved_bytes (the first number after the knob column).
  const size_t row = text.find('\n') + 1;
  const size_t field = text.find(",False,", row) + 7;
  text.insert(field, "9");
  testing::write_text(b, text);
  const auto run = run_fraglab("merge " + a.string() + " " + b.string() + " -o " + (dir / "m.csv").string());
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find(b.string() +
                         ": the run (trace two-phase, device sim, spec pytorch:expandable_segments:False) "
                         "has other figures than in " +
                         a.string()),
            std::string::npos)
      << run.err;
}

TEST(SweepCli, ExistingOutputNeedsResumeOrOverwrite) {
  const fs::path dir = testing::scratch_dir("sweep-exists");
  const fs::path out = dir / "o.csv";
  fs::remove(out);
  const std::string base =
      "sweep " + kSamples + "two-phase.jsonl --grid expandable_segments=False,True --no-progress -o " + out.string();
  ASSERT_EQ(run_fraglab(base).status, 0);
  const auto again = run_fraglab(base);
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find(out.string() + ": already exists (--resume continues it, --overwrite replaces it)"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(run_fraglab(base + " --overwrite").status, 0);
  const auto no_output = run_fraglab("sweep " + kSamples + "two-phase.jsonl --resume");
  EXPECT_EQ(no_output.status, 2);
  EXPECT_NE(no_output.err.find("--resume needs -o FILE"), std::string::npos);
}

TEST(SweepCli, BestSettingOnASampleIsReadyToPaste) {
  // two-phase.jsonl: step 1's activations are 1 MiB larger than step 0's, so with the defaults the
  // cached blocks split for step 0 cannot be reused (traces/samples/README.md); expandable
  // segments map pages as needed and end below the defaults.
  const auto run =
      run_fraglab("sweep " + kSamples + "two-phase.jsonl --grid expandable_segments=False,True --no-progress");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto defaults = run_fraglab("replay " + kSamples + "two-phase.jsonl -p pytorch --json -");
  const auto expandable =
      run_fraglab("replay " + kSamples + "two-phase.jsonl -p pytorch:expandable_segments:True --json -");
  const auto d = nlohmann::json::parse(defaults.out)["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>();
  const auto e = nlohmann::json::parse(expandable.out)["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>();
  ASSERT_LT(e, d);
  EXPECT_NE(run.out.find("best: pytorch:expandable_segments:True\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace fraglab
