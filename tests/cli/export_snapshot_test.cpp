// replay --export-snapshot: the run written as a PyTorch memory snapshot pickle.
//  - round trip: `fraglab validate` on the export is EXACT, and reads back the settings the run
//    had (its allocator_settings), for the shipped samples and real snapshots under several
//    settings, with a cut-off start state, several streams, OOMs and empty_cache bursts;
//  - the pickle holds only plain values (Python's pickletools lists its opcodes);
//  - PyTorch's own viewer code (torch.cuda._memory_viz from Debian's python3-torch) reads its
//    segments: total_size and the folded stacks add up to the reserved bytes at the end that
//    `replay --json` reports;
//  - bad input: one line, exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "fraglab/policy.hpp"
#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";
const std::string kReal = std::string(FRAGLAB_REAL_TRACES) + "/";
// Debian's python3-torch lives in the system Python, not in whatever `python3` PATH finds.
const std::string kPython = "/usr/bin/python3";

fs::path export_path(const std::string& name) { return scratch_dir("export") / (name + ".pickle"); }

// `replay TRACE -p SPEC ARGS --export-snapshot OUT --json -`: the results JSON.
nlohmann::json export_run(const std::string& trace, const std::string& spec, const fs::path& out,
                          const std::string& args = "") {
  const CommandResult r =
      run_fraglab(trace + " -p '" + spec + "' " + args + " --export-snapshot " + out.string() + " --json -");
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// `validate OUT --json -`: the validation report.
nlohmann::json validate(const fs::path& out, const std::string& args = "") {
  const CommandResult r = run_fraglab("validate " + out.string() + " " + args + " --json -");
  EXPECT_TRUE(r.status == 0 || r.status == 1) << r.err;
  return r.status <= 1 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

struct Case {
  std::string trace;
  std::string spec;
  std::string replay_args;    // e.g. a small device, for OOMs
  std::string validate_args;  // e.g. the device's capacity, for a GC limit
};

// Export, validate, and check the settings read back are the run's.
void expect_round_trip(const Case& c, const std::string& name) {
  SCOPED_TRACE(c.trace + " " + c.spec + " " + c.replay_args);
  const fs::path out = export_path(name);
  const nlohmann::json run = export_run("replay " + c.trace, c.spec, out, c.replay_args);
  ASSERT_FALSE(run.is_null());
  const nlohmann::json report = validate(out, c.validate_args);
  ASSERT_FALSE(report.is_null());
  EXPECT_TRUE(report["exact"].get<bool>()) << report.dump(2);
  EXPECT_TRUE(same_policy(report["policy"].get<std::string>(), c.spec))
      << report["policy"] << " read back for " << c.spec;
}

TEST(ExportSnapshot, SamplesRoundTripExactUnderEverySetting) {
  int n = 0;
  for (const std::string trace : {"two-phase.jsonl", "streams.jsonl", "cutoff.jsonl"}) {
    for (const std::string spec : {"pytorch", "pytorch:max_split_size_mb:64", "pytorch:expandable_segments:True"}) {
      expect_round_trip({kSamples + trace, spec, "", ""}, "sample" + std::to_string(n++));
    }
  }
}

// Garbage collection acts only under a memory fraction (allocator-model §6), and both it and the
// GC limit are shares of the GPU's memory: neither the fraction (an API call in PyTorch) nor the
// capacity is in a snapshot, so validate is given them. On 400 MiB, two-phase under a 0.9 fraction
// peaks at 334 MiB without GC and 282 MiB with it (`replay --device sim:400MiB`): the GC path runs.
TEST(ExportSnapshot, GarbageCollectionRoundTripsWithTheFractionAndCapacityGiven) {
  const std::string spec = "pytorch:garbage_collection_threshold:0.5,per_process_memory_fraction:0.9";
  const fs::path out = export_path("gc");
  const nlohmann::json run = export_run("replay " + kSamples + "two-phase.jsonl", spec, out, "--device sim:400MiB");
  ASSERT_FALSE(run.is_null());
  const nlohmann::json given = validate(out, "-p '" + spec + "' --capacity 400MiB");
  EXPECT_TRUE(given["exact"].get<bool>()) << given.dump(2);
  // The recorded settings alone: the threshold, without the fraction.
  EXPECT_EQ(validate(out)["policy"], "pytorch:garbage_collection_threshold:0.5");
}

// roundup_power2_divisions:4 sets all 16 size intervals (1 MiB .. 32768 MiB) to 4 (allocator-model
// §1.4): PyTorch records the table, which reads back as the list form.
TEST(ExportSnapshot, RoundingDivisionsReadBackAsPyTorchsTable) {
  const fs::path out = export_path("rounding");
  ASSERT_FALSE(
      export_run("replay " + kSamples + "two-phase.jsonl", "pytorch:roundup_power2_divisions:4", out).is_null());
  const nlohmann::json report = validate(out);
  EXPECT_TRUE(report["exact"].get<bool>()) << report.dump(2);
  std::string table;
  for (int mib = 1; mib <= 32768; mib *= 2) table += (table.empty() ? "" : ",") + std::to_string(mib) + ":4";
  EXPECT_EQ(report["policy"], "pytorch:roundup_power2_divisions:[" + table + "]");
}

// two-phase peaks at 233 MiB requested: on 256 MiB the caching allocator runs out, flushes its
// cache and records oom entries with device_free; validate reads the obtainable memory from them.
TEST(ExportSnapshot, OutOfMemoryRoundTrips) {
  const fs::path out = export_path("oom");
  const nlohmann::json run =
      export_run("replay " + kSamples + "two-phase.jsonl", "pytorch", out, "--device sim:256MiB");
  ASSERT_FALSE(run.is_null());
  ASSERT_GT(run["runs"][0]["num_ooms"].get<int>(), 0) << "the case needs an out-of-memory";
  const nlohmann::json report = validate(out);
  EXPECT_TRUE(report["exact"].get<bool>()) << report.dump(2);
  EXPECT_EQ(report["ooms_recorded"], run["runs"][0]["num_ooms"]);
}

// A pending free on another stream completed by a cache flush: the retry rung of a malloc on a
// 50 MiB device (the second 30 MiB request fits only once the first block's segment is freed),
// and an empty_cache() (allocator-model §5.3).
TEST(ExportSnapshot, FlushesOfPendingFreesRoundTrip) {
  const fs::path retry = scratch_dir("export") / "retry.jsonl";
  write_text(retry,
             "{\"fraglab_trace\":1,\"name\":\"retry\"}\n"
             "{\"op\":\"alloc\",\"id\":1,\"size\":31457280,\"stream\":1}\n"
             "{\"op\":\"free_requested\",\"id\":1}\n"
             "{\"op\":\"alloc\",\"id\":2,\"size\":31457280,\"stream\":0}\n"
             "{\"op\":\"free_completed\",\"id\":1}\n"
             "{\"op\":\"free\",\"id\":2}\n");
  expect_round_trip({retry.string(), "pytorch", "--device sim:50MiB", ""}, "retry");
  const fs::path flush = scratch_dir("export") / "flush.jsonl";
  write_text(flush,
             "{\"fraglab_trace\":1,\"name\":\"flush\"}\n"
             "{\"op\":\"alloc\",\"id\":1,\"size\":1000,\"stream\":1}\n"
             "{\"op\":\"free_requested\",\"id\":1}\n"
             "{\"op\":\"empty_cache\"}\n"
             "{\"op\":\"free_completed\",\"id\":1}\n"
             "{\"op\":\"alloc\",\"id\":2,\"size\":1000,\"stream\":1}\n");
  expect_round_trip({flush.string(), "pytorch", "", ""}, "flush");
}

TEST(ExportSnapshot, RealSnapshotsRoundTrip) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  int n = 0;
  // tiny-segments starts from nothing; lm2.7b-ctx512 starts cut off with 28.8 GB reserved and
  // empties the cache first (a burst of 597 segment frees).
  for (const std::string trace : {"tiny-segments.pickle", "lm2.7b-ctx512-forward-bf16.pickle"}) {
    for (const std::string spec : {"pytorch", "pytorch:expandable_segments:True"}) {
      expect_round_trip({kReal + trace, spec, "", ""}, "real" + std::to_string(n++));
    }
  }
}

// Runs a Python script with /usr/bin/python3 and ARGS (shell words); {status, stdout and stderr}.
CommandResult run_python(const std::string& script, const std::string& args = "") {
  static int counter = 0;
  const fs::path file = scratch_dir("export") / ("script-" + std::to_string(counter++) + ".py");
  write_text(file, script);
  CommandResult r;
  FILE* pipe = ::popen((kPython + " " + file.string() + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, got);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// Python's own disassembler names every opcode of the export: none may import or call anything.
TEST(ExportSnapshot, HoldsOnlyPlainValues) {
  if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
  const fs::path out = export_path("plain");
  ASSERT_FALSE(export_run("replay " + kSamples + "streams.jsonl", "pytorch:expandable_segments:True", out).is_null());
  const CommandResult r = run_python(
      "import pickletools\n"
      "ops = sorted({op.name for op, arg, pos in pickletools.genops(open('" +
      out.string() + "', 'rb').read())})\nprint(' '.join(ops))\n");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const std::string forbidden : {"GLOBAL", "STACK_GLOBAL", "REDUCE", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "BUILD",
                                      "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"}) {
    EXPECT_EQ((" " + r.out).find(" " + forbidden + " "), std::string::npos) << forbidden << " in: " << r.out;
  }
  EXPECT_NE(r.out.find("SETITEMS"), std::string::npos) << r.out;  // it did list the opcodes
}

// torch.cuda._memory_viz (PyTorch 1.13, python3-torch) on the export's segments: stats() checks
// every segment's total_size against its blocks and sums them; segments() folds one line per
// block, "stream_S;seg_A;STATE SIZE" (its format_flamegraph gets the lines unchanged here). Both
// must come to the reserved bytes at the end that `replay --json` reports. One Python run for
// every export: importing torch takes seconds.
TEST(ExportSnapshot, PyTorchsViewerReadsIt) {
  if (run_python("import torch.cuda._memory_viz\n").status != 0)
    GTEST_SKIP() << kPython << " cannot import torch.cuda._memory_viz (install python3-torch: tools/install-deps.sh)";
  std::vector<std::string> traces;
  for (const std::string trace : {"two-phase.jsonl", "streams.jsonl", "cutoff.jsonl"})
    traces.push_back(kSamples + trace);
  if (fs::exists(kReal)) traces.push_back(kReal + "lm2.7b-ctx512-forward-bf16.pickle");
  std::string script =
      "import pickle, sys\nfrom torch.cuda import _memory_viz as viz\n"
      "for path in sys.argv[1:]:\n"
      "    segments = pickle.load(open(path, 'rb'))['segments']\n"
      "    folded = viz.segments(segments, format_flamegraph=lambda lines: lines)\n"
      "    print(viz.stats(segments)['total_size'].value,\n"
      "          sum(int(line.rsplit(' ', 1)[1]) for line in folded.splitlines() if line))\n";
  std::string paths, expected;
  int n = 0;
  for (const std::string& trace : traces) {
    for (const std::string spec : {"pytorch", "pytorch:expandable_segments:True"}) {
      const fs::path out = export_path("viz" + std::to_string(n++));
      const nlohmann::json run = export_run("replay " + trace, spec, out);
      ASSERT_FALSE(run.is_null()) << trace << " " << spec;
      const std::uint64_t reserved_at_end = run["runs"][0]["reserved_at_end_bytes"].get<std::uint64_t>();
      paths += " " + out.string();
      expected += std::to_string(reserved_at_end) + " " + std::to_string(reserved_at_end) + "\n";
    }
  }
  const CommandResult r = run_python(script, paths);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, expected);
}

// With --frames the export carries each allocation's stack: read with Python's pickle, the alloc
// entries of an export of tiny-segments (its own settings, so the same requests in the same order)
// list the same frames as the recorded snapshot's, cut to the 3 innermost kept.
TEST(ExportSnapshot, FramesAreCarriedThrough) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
  const fs::path out = export_path("frames");
  ASSERT_FALSE(export_run("replay " + kReal + "tiny-segments.pickle", "pytorch", out, "--frames 3").is_null());
  const CommandResult r = run_python(
      "import pickle, sys\n"
      "def allocs(path, keep):\n"
      "    s = pickle.load(open(path, 'rb'))\n"
      "    return [[(f['filename'], f['line'], f['name']) for f in e['frames'][:keep]]\n"
      "            for trace in s['device_traces'] for e in trace if e['action'] == 'alloc']\n"
      "recorded, exported = allocs(sys.argv[1], 3), allocs(sys.argv[2], 1000)\n"
      "print(len(recorded), sum(len(f) for f in recorded), recorded == exported)\n",
      " " + kReal + "tiny-segments.pickle " + out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream words(r.out);
  std::uint64_t allocs = 0, frames = 0;
  std::string same;
  words >> allocs >> frames >> same;
  EXPECT_GT(allocs, 0u) << r.out;
  EXPECT_GT(frames, 0u) << r.out;  // the snapshot does record frames: the comparison is not of empty lists
  EXPECT_EQ(same, "True") << r.out;
}

TEST(ExportSnapshot, BadInputIsOneLineAndExit2) {
  const std::string trace = kSamples + "two-phase.jsonl";
  const CommandResult two =
      run_fraglab("replay " + trace + " -p pytorch -p nocache --export-snapshot " + export_path("two").string());
  EXPECT_EQ(two.status, 2);
  EXPECT_NE(two.err.find("--export-snapshot"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("exactly one -p"), std::string::npos) << two.err;
  EXPECT_EQ(std::count(two.err.begin(), two.err.end(), '\n'), 1) << two.err;

  // A snapshot lists every device up to its own: device 100000 is refused, not written as
  // 100000 empty lists.
  const fs::path far = scratch_dir("export") / "far-device.jsonl";
  write_text(far,
             "{\"fraglab_trace\":1,\"name\":\"far\"}\n{\"op\":\"alloc\",\"id\":1,\"size\":512,\"device\":100000}\n");
  const CommandResult device =
      run_fraglab("replay " + far.string() + " -p pytorch --export-snapshot " + export_path("far").string());
  EXPECT_EQ(device.status, 2);
  EXPECT_NE(device.err.find("device 100000"), std::string::npos) << device.err;
  EXPECT_EQ(std::count(device.err.begin(), device.err.end(), '\n'), 1) << device.err;

  const CommandResult dash = run_fraglab("replay " + trace + " -p pytorch --export-snapshot -");
  EXPECT_EQ(dash.status, 2);
  EXPECT_NE(dash.err.find("--export-snapshot -: expected a file path"), std::string::npos) << dash.err;

  const std::string unwritable = (scratch_dir("export") / "no-such-dir" / "out.pickle").string();
  const CommandResult bad = run_fraglab("replay " + trace + " -p pytorch --export-snapshot " + unwritable);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find(unwritable), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace
}  // namespace fraglab::testing
