// Diagnostics and progress (README "Commands", global options): stdout carries only results, so
// `--json -` parses as JSON even when a run has warnings and notes; -q leaves only errors on
// stderr, -v adds details; progress lines appear on stderr only when it is a terminal (the tests
// run the command under a pseudo-terminal with `script`) and never with --no-progress.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

// 10 MiB then 20 MiB, both freed: nothing in it produces a note or a warning by itself.
const char* kPlainTrace =
    "{\"fraglab_trace\":1,\"name\":\"plain\"}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":10485760}\n"
    "{\"op\":\"alloc\",\"id\":2,\"size\":20971520}\n"
    "{\"op\":\"free\",\"id\":2}\n"
    "{\"op\":\"free\",\"id\":1}\n";

// One 100 GiB request: more than the default 80 GiB device, so every policy has an out-of-memory
// on an assumed capacity, which is noted (README "What-if answers", device capacity).
const char* kOomTrace =
    "{\"fraglab_trace\":1,\"name\":\"huge\"}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":107374182400}\n"
    "{\"op\":\"free\",\"id\":1}\n";

// PyTorch collects garbage only under a memory fraction (allocator-model §3.3): this spec gets
// the warning that the threshold does nothing, on any trace.
const std::string kInertGc = " -p pytorch:garbage_collection_threshold:0.6";
const std::string kInertGcWarning =
    "warning: garbage_collection_threshold does nothing without per_process_memory_fraction: PyTorch collects "
    "cached blocks only under a memory fraction\n";

std::string trace_file(const std::string& name, const char* text) {
  const fs::path path = scratch_dir("diagnostics") / name;
  write_text(path, text);
  return path.string();
}

// kAllocs allocations of 1 MiB, each freed at once: 2 * kAllocs events, enough for several
// progress callbacks (run_replay calls it every 65536 events).
constexpr int kAllocs = 100000;
const std::string& big_trace() {
  static const std::string path = [] {
    std::string text = "{\"fraglab_trace\":1,\"name\":\"big\"}\n";
    for (int i = 1; i <= kAllocs; ++i) {
      text += "{\"op\":\"alloc\",\"id\":" + std::to_string(i) + ",\"size\":1048576}\n";
      text += "{\"op\":\"free\",\"id\":" + std::to_string(i) + "}\n";
    }
    const fs::path p = scratch_dir("diagnostics") / "big.jsonl";
    write_text(p, text);
    return p.string();
  }();
  return path;
}

bool parses_as_json(const std::string& text) {
  try {
    return !nlohmann::json::parse(text).is_discarded();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// What a terminal shows: `fraglab ARGS` run under a pseudo-terminal (util-linux `script`), its
// stdout sent to `out_file` so that what comes back is stderr alone. `env` prefixes the command.
std::string terminal_stderr(const std::string& args, const fs::path& out_file, const std::string& env) {
  const std::string inner = env + " " + std::string(FRAGLAB_BINARY) + " " + args + " > " + out_file.string();
  const std::string command = "script -qfec '" + inner + "' /dev/null";
  std::string shown;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return shown;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) shown.append(buffer.data(), n);
  ::pclose(pipe);
  return shown;
}

TEST(Diagnostics, JsonOnStdoutStaysJsonWithWarningsAndNotes) {
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const std::string huge = trace_file("huge.jsonl", kOomTrace);
  for (const std::string& args : {"replay " + plain + kInertGc, "compare " + plain + kInertGc}) {
    const CommandResult run = run_fraglab(args + " --json -");
    ASSERT_EQ(run.status, 0) << args << run.err;
    EXPECT_TRUE(parses_as_json(run.out)) << args << "\n" << run.out;
    EXPECT_EQ(run.err, kInertGcWarning) << args;
  }
  for (const std::string command : {"replay ", "compare "}) {
    const CommandResult run = run_fraglab(command + huge + " -p pytorch --json -");
    ASSERT_EQ(run.status, 0) << command << run.err;
    EXPECT_TRUE(parses_as_json(run.out)) << command << "\n" << run.out;
    EXPECT_EQ(run.err.rfind("note: the out-of-memory errors depend on the device's capacity", 0), 0u) << run.err;
  }
  const CommandResult diff = run_fraglab("diff " + plain + " " + plain + kInertGc + " --json -");
  ASSERT_EQ(diff.status, 0) << diff.err;
  EXPECT_TRUE(parses_as_json(diff.out)) << diff.out;
  EXPECT_EQ(diff.err, kInertGcWarning +
                          "diff: plain and plain replayed under pytorch:garbage_collection_threshold:0.6 "
                          "from the recorded start state\n");
  for (const std::string& args : {"inspect " + plain + " --json -", std::string("policies --json")}) {
    const CommandResult run = run_fraglab(args);
    ASSERT_EQ(run.status, 0) << args << run.err;
    EXPECT_TRUE(parses_as_json(run.out)) << args;
    EXPECT_EQ(run.err, "") << args;
  }
}

TEST(Diagnostics, ValidateJsonOnStdoutIsJson) {
  const std::string snapshot = std::string(FRAGLAB_REAL_TRACES) + "/tiny-segments.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(snapshot);
  const CommandResult run = run_fraglab("validate " + snapshot + " --json -");
  EXPECT_TRUE(parses_as_json(run.out)) << run.out;
}

TEST(Diagnostics, QuietLeavesOnlyErrors) {
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const std::string huge = trace_file("huge.jsonl", kOomTrace);
  const CommandResult loud = run_fraglab("replay " + plain + kInertGc);
  ASSERT_EQ(loud.err, kInertGcWarning);
  // After the command or before it: the same.
  for (const std::string& args :
       {"replay " + plain + kInertGc + " -q", "-q replay " + plain + kInertGc, "--quiet replay " + plain + kInertGc}) {
    const CommandResult quiet = run_fraglab(args);
    ASSERT_EQ(quiet.status, 0) << args << quiet.err;
    EXPECT_EQ(quiet.err, "") << args;
    EXPECT_EQ(quiet.out, loud.out) << args;  // results are not diagnostics
  }
  EXPECT_EQ(run_fraglab("compare " + huge + " -p pytorch -q").err, "");
  EXPECT_EQ(run_fraglab("diff " + plain + " " + plain + " -q").err, "");
  // gen says which defaults it chose and what it wrote; -q leaves that out.
  const std::string out = (scratch_dir("diagnostics") / "gen.jsonl").string();
  const std::string gen_args = "gen --model gpt2-xl --framework zero3 --micro-batch 1 --steps 1 -o " + out;
  fs::remove(out);
  const CommandResult gen = run_fraglab(gen_args);
  EXPECT_EQ(gen.status, 0) << gen.err;
  EXPECT_NE(gen.err.find("gen: --attention not given: "), std::string::npos) << gen.err;
  EXPECT_NE(gen.err.find("wrote " + out + ": "), std::string::npos) << gen.err;
  fs::remove(out);
  const CommandResult quiet_gen = run_fraglab(gen_args + " -q");
  EXPECT_EQ(quiet_gen.status, 0) << quiet_gen.err;
  EXPECT_EQ(quiet_gen.err, "");
  EXPECT_EQ(read_text(out).empty(), false);
  // A bad input is still the one-line error, word for word, with exit 2.
  const std::string missing = (scratch_dir("diagnostics") / "missing.jsonl").string();
  const CommandResult normal = run_fraglab("replay " + missing);
  const CommandResult quiet = run_fraglab("-q replay " + missing);
  EXPECT_EQ(normal.status, 2);
  EXPECT_EQ(quiet.status, 2);
  EXPECT_EQ(quiet.err, normal.err);
  EXPECT_EQ(quiet.err.rfind("fraglab replay: error: " + missing, 0), 0u) << quiet.err;
}

TEST(Diagnostics, VerboseAddsDetails) {
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const CommandResult normal = run_fraglab("replay " + plain + " -p pytorch");
  ASSERT_EQ(normal.err, "");
  for (const std::string& args : {"replay " + plain + " -p pytorch -v", "-v replay " + plain + " -p pytorch",
                                  "--verbose replay " + plain + " -p pytorch"}) {
    const CommandResult verbose = run_fraglab(args);
    ASSERT_EQ(verbose.status, 0) << args << verbose.err;
    EXPECT_EQ(verbose.out, normal.out) << args;
    // The trace has 4 events (written above), the default device is 80 GiB.
    EXPECT_NE(verbose.err.find("read " + plain + ": trace plain, 4 events in "), std::string::npos) << verbose.err;
    EXPECT_NE(verbose.err.find("plain: device sim, capacity 80.00 GiB (default)\n"), std::string::npos) << verbose.err;
    EXPECT_NE(verbose.err.find("plain: start state recorded (--start-state auto)\n"), std::string::npos) << verbose.err;
    EXPECT_NE(verbose.err.find("replay pytorch: 4 events in "), std::string::npos) << verbose.err;
  }
  // -v keeps the JSON clean too.
  const CommandResult json = run_fraglab("replay " + plain + " -p pytorch -v --json -");
  EXPECT_TRUE(parses_as_json(json.out)) << json.out;
  EXPECT_NE(json.err.find("read "), std::string::npos);
}

TEST(Diagnostics, GlobalOptionMistakesExitTwo) {
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const CommandResult both = run_fraglab("replay " + plain + " -v -q");
  EXPECT_EQ(both.status, 2);
  EXPECT_EQ(both.err, "fraglab replay: error: -v (--verbose) and -q (--quiet): expected one of them\n");
  const CommandResult split = run_fraglab("-v replay " + plain + " -q");
  EXPECT_EQ(split.status, 2);
  EXPECT_EQ(split.err, both.err);
  const CommandResult before = run_fraglab("-q -v replay " + plain);
  EXPECT_EQ(before.status, 2);
  EXPECT_EQ(before.err, "fraglab: -v (--verbose) and -q (--quiet): expected one of them\n");
  EXPECT_EQ(run_fraglab("replay " + plain + " --loudly").status, 2);
  EXPECT_EQ(run_fraglab("replay " + plain + " -x").status, 2);
  const CommandResult unknown = run_fraglab("--loud replay " + plain);
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(unknown.err.rfind("fraglab: unknown command '--loud'\n", 0), 0u) << unknown.err;
  // Global options alone name no command: the usage, exit 2.
  EXPECT_EQ(run_fraglab("-v").status, 2);
}

TEST(Progress, OnATerminalOnlyAndNeverOnStdout) {
  const std::string& trace = big_trace();
  const fs::path out = scratch_dir("diagnostics") / "terminal-out.txt";
  const std::string events = std::to_string(2 * kAllocs);
  // FRAGLAB_PROGRESS_AFTER=0: progress from the start instead of after a second (README).
  const std::string shown = terminal_stderr("replay " + trace + " -p pytorch", out, "FRAGLAB_PROGRESS_AFTER=0");
  EXPECT_NE(shown.find("replay pytorch: "), std::string::npos) << shown;
  EXPECT_NE(shown.find(" of " + events + " events, "), std::string::npos) << shown;
  EXPECT_NE(shown.find(" events/s, ETA "), std::string::npos) << shown;
  // stdout (to a file here) has the results and no progress: the same bytes as without a terminal.
  const CommandResult plain = run_fraglab("replay " + trace + " -p pytorch");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(read_text(out), plain.out);
  EXPECT_EQ(read_text(out).find("events/s"), std::string::npos);

  // Not a terminal (stderr to a file): none, even with the second waived.
  ::setenv("FRAGLAB_PROGRESS_AFTER", "0", 1);
  const CommandResult logged = run_fraglab("replay " + trace + " -p pytorch");
  ::unsetenv("FRAGLAB_PROGRESS_AFTER");
  EXPECT_EQ(logged.err, "");
  // --no-progress: none on a terminal either, before or after the command.
  for (const std::string& args :
       {"replay " + trace + " -p pytorch --no-progress", "--no-progress replay " + trace + " -p pytorch"}) {
    const std::string quiet = terminal_stderr(args, out, "FRAGLAB_PROGRESS_AFTER=0");
    EXPECT_EQ(quiet.find("events/s"), std::string::npos) << args << "\n" << quiet;
  }
}

TEST(Progress, EveryReplayingCommandShowsIt) {
  const std::string& trace = big_trace();
  const fs::path out = scratch_dir("diagnostics") / "terminal-out.txt";
  const std::string env = "FRAGLAB_PROGRESS_AFTER=0";
  const std::string compare = terminal_stderr("compare " + trace + " -p pytorch -p nocache", out, env);
  EXPECT_NE(compare.find("compare pytorch: "), std::string::npos) << compare;
  EXPECT_NE(compare.find("compare nocache: "), std::string::npos) << compare;
  // diff: one line for both traces, counting the events of both.
  const std::string diff = terminal_stderr("diff " + trace + " " + trace, out, env);
  EXPECT_NE(diff.find("diff pytorch: "), std::string::npos) << diff;
  EXPECT_NE(diff.find(" of " + std::to_string(4 * kAllocs) + " events, "), std::string::npos) << diff;
  const fs::path baseline = scratch_dir("diagnostics") / "baseline.json";
  fs::remove(baseline);
  const std::string check = terminal_stderr(
      "check " + trace + " -p pytorch --baseline " + baseline.string() + " --update-baseline", out, env);
  EXPECT_NE(check.find("check pytorch: "), std::string::npos) << check;
  // Reading a JSONL trace (inspect, convert and every command that reads one): bytes.
  const std::string inspect = terminal_stderr("inspect " + trace, out, env);
  EXPECT_NE(inspect.find("inspect reading " + trace + ": "), std::string::npos) << inspect;
  EXPECT_NE(inspect.find(" of " + std::to_string(fs::file_size(trace)) + " bytes, "), std::string::npos) << inspect;
  const fs::path converted = scratch_dir("diagnostics") / "converted.jsonl";
  fs::remove(converted);
  const std::string convert = terminal_stderr("convert " + trace + " -o " + converted.string(), out, env);
  EXPECT_NE(convert.find("convert reading " + trace + ": "), std::string::npos) << convert;
  // gen: steps.
  const fs::path generated = scratch_dir("diagnostics") / "generated.jsonl";
  fs::remove(generated);
  const std::string gen = terminal_stderr(
      "gen --model gpt2-xl --framework zero3 --micro-batch 1 --steps 3 -o " + generated.string(), out, env);
  EXPECT_NE(gen.find("gen generating:  33% (1 of 3 steps, "), std::string::npos) << gen;
  // merge: files.
  const fs::path dir = scratch_dir("diagnostics");
  std::string shards;
  for (const char* i : {"0", "1"}) {
    const fs::path shard = dir / (std::string("shard-") + i + ".csv");
    fs::remove(shard);
    ASSERT_EQ(run_fraglab("sweep " + trace + " --grid expandable_segments=False,True --shard " + i + "/2 -o " +
                          shard.string())
                  .status,
              0);
    shards += " " + shard.string();
  }
  fs::remove(dir / "merged.csv");
  const std::string merge = terminal_stderr("merge" + shards + " -o " + (dir / "merged.csv").string(), out, env);
  EXPECT_NE(merge.find("merge reading:   0% (0 of 2 files, "), std::string::npos) << merge;
  // sweep: runs, not events.
  const std::string sweep = terminal_stderr("sweep " + trace + " --grid expandable_segments=False,True -j1", out, env);
  EXPECT_NE(sweep.find("2/2 100%"), std::string::npos) << sweep;
  EXPECT_NE(sweep.find(" runs/s "), std::string::npos) << sweep;
  // Not a terminal: a sweep shows none either.
  ::setenv("FRAGLAB_PROGRESS_AFTER", "0", 1);
  const CommandResult logged = run_fraglab("sweep " + trace + " --grid expandable_segments=False,True -j1");
  ::unsetenv("FRAGLAB_PROGRESS_AFTER");
  EXPECT_EQ(logged.err.find("runs/s"), std::string::npos) << logged.err;
}

}  // namespace
}  // namespace fraglab::testing
