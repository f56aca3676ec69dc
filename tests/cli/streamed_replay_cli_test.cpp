// `fraglab replay` streams a plain JSONL trace into its replays (src/cli/streamed_replay.hpp) and
// reads anything else whole. Its output must not tell which: the same trace gzipped (read whole,
// same name) gives the same bytes on stdout and stderr. And streaming holds a bounded amount of
// memory, whatever the trace's length.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "support/command.hpp"
#include "support/resource_use.hpp"

namespace fraglab::testing {
namespace {

// `path` gzipped into its own folder under the same file name + ".gz": the whole-trace reader,
// and the same default trace name.
fs::path gzipped_copy(const fs::path& path) {
  const fs::path dir = scratch_dir("streamed-cli") / "gz";
  fs::create_directories(dir);
  const fs::path out = dir / (path.filename().string() + ".gz");
  write_jsonl_file(read_trace(path.string()), out.string());
  return out;
}

std::vector<std::string> with_trace(const std::string& trace, std::vector<std::string> args) {
  args.insert(args.begin() + 1, trace);
  return args;
}

// Same stdout, stderr (but for the file's name) and exit status, streamed and whole.
void expect_same_output(const fs::path& path, const std::vector<std::string>& args) {
  const fs::path gz = gzipped_copy(path);
  const MeasuredRun streamed = run_fraglab_measured(with_trace(path.string(), args));
  const MeasuredRun whole = run_fraglab_measured(with_trace(gz.string(), args));
  EXPECT_EQ(streamed.status, whole.status) << streamed.err << whole.err;
  EXPECT_EQ(streamed.out, whole.out);
  std::string err = whole.err;
  for (std::size_t at; (at = err.find(gz.string())) != std::string::npos;) err.replace(at, gz.string().size(), path);
  EXPECT_EQ(streamed.err, err);
}

const std::vector<std::vector<std::string>> kCommands = {
    {"replay", "-p", "pytorch", "-p", "tlsf", "-p", "pytorch:expandable_segments:True"},
    {"replay", "-p", "pytorch", "-p", "nocache", "-p", "bestfit", "--json", "-", "--stats"},
    {"replay", "-p", "pytorch", "-p", "gmlake", "--device", "sim:150MiB", "--stop-on-oom", "--check-invariants"},
    {"replay", "-p", "pytorch:garbage_collection_threshold:0.5", "-p", "cuda_async", "-p", "buddy", "--json", "-",
     "--start-state", "cold"},
};

TEST(StreamedReplayCli, ShippedSamplesPrintWhatTheWholeReadPrints) {
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGLAB_SOURCE_DIR) / "traces/samples")) {
    if (entry.path().extension() != ".jsonl") continue;
    for (const auto& args : kCommands) {
      SCOPED_TRACE(entry.path().string() + " " + args[2]);
      expect_same_output(entry.path(), args);
    }
  }
}

TEST(StreamedReplayCli, ATraceWithARecordedOomIsReadWholeForItsCapacity) {
  // The oom event sets the device (reserved + device_free = 1 GiB here): only a whole read sees it
  // before the replays start, so the streamed run gives way to one.
  const fs::path path = scratch_dir("streamed-cli") / "recorded-oom.jsonl";
  std::string text = "{\"fraglab_trace\":1,\"name\":\"recorded-oom\"}\n";
  for (int i = 1; i <= 300; ++i) text += "{\"op\":\"alloc\",\"id\":" + std::to_string(i) + ",\"size\":4000000}\n";
  text += "{\"op\":\"oom\",\"size\":2000000000,\"device_free\":1073741824}\n";
  write_text(path, text);
  const MeasuredRun run = run_fraglab_measured({"replay", path.string(), "-p", "pytorch"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("capacity 1.00 GiB (recorded oom)"), std::string::npos) << run.out;
  expect_same_output(path, {"replay", "-p", "pytorch", "-p", "tlsf", "--json", "-"});
}

TEST(StreamedReplayCli, ABadLineLateInTheFileIsTheWholeReadsError) {
  const fs::path path = scratch_dir("streamed-cli") / "late-error.jsonl";
  std::string text = "{\"fraglab_trace\":1}\n";
  for (int i = 1; i <= 100000; ++i)
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(i) +
            ",\"size\":512}\n{\"op\":\"free\",\"id\":" + std::to_string(i) + "}\n";
  text += "{\"op\":\"free\",\"id\":5}\n";  // line 200002: a double free, megabytes into the file
  write_text(path, text);
  const MeasuredRun run = run_fraglab_measured({"replay", path.string(), "-p", "pytorch"});
  EXPECT_EQ(run.status, 2);
  const std::string what =
      path.string() + ":200002: free id 5: free of an id that is not live (unknown id or double free)\n";
  EXPECT_EQ(run.err, "fraglab replay: error: " + what);
  EXPECT_EQ(run.out, "");
  // `inspect` reads it whole.
  EXPECT_EQ(run_fraglab_measured({"inspect", path.string()}).err, "fraglab inspect: error: " + what);
}

TEST(StreamedReplayCli, PeakMemoryStaysBoundedOnALongTrace) {
  // ~990,000 events (README "Speed": fraglab gen T5-3B ZeRO-3, micro-batch 64, 50 steps). Read
  // whole, the text and the events alone take ~110 bytes per event; streamed, the replay holds
  // what is live (a few thousand allocations) and one window of the file.
  const fs::path path = scratch_dir("streamed-cli") / "t5-50.jsonl";
  const MeasuredRun gen = run_fraglab_measured({"gen", "--model", "t5-3b", "--framework", "zero3", "--micro-batch",
                                                "64", "--steps", "50", "-o", path.string(), "--overwrite"});
  ASSERT_EQ(gen.status, 0) << gen.err;
  const std::uint64_t events = 990'522;
  const MeasuredRun run = run_fraglab_measured({"replay", path.string(), "-p", "pytorch"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find(std::to_string(events) + " events"), std::string::npos) << run.out;
  // Under 40 bytes per event (measured: ~10 MB in all, most of it the program itself).
  EXPECT_LT(run.max_rss_bytes, 40 * events + kSanitizerAllowance) << run.max_rss_bytes;
}

}  // namespace
}  // namespace fraglab::testing
