// Device capacity in every answer (issue 14): the header and the results JSON name the capacity
// and where it came from (--device, a recorded oom, the default), --device sizes need a unit,
// and options that act on a share of the GPU's memory warn when the capacity was assumed.
// Expected capacities are computed by hand from the traces below.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace fraglab::testing {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

// Segments of 20 MiB and 4 MiB; the 4 MiB one is released; a 2 MiB one follows. At the first oom
// reserved is 20 + 2 = 22 MiB and the driver reported 10 MiB free: the allocator could obtain
// 32 MiB. The 2 MiB segment is then released; at the second oom reserved is 20 MiB and 13 MiB are
// free (33 MiB): the least of the two, 32 MiB, is what the run could count on. The peak reserved
// (24 MiB) is below it.
const char* kOomTrace =
    "{\"fraglab_trace\":1,\"name\":\"hand-oom\",\"source\":\"capacity_test\"}\n"
    "{\"op\":\"segment_alloc\",\"addr\":139637976727552,\"size\":20971520,\"stream\":0}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":20971520,\"addr\":139637976727552}\n"
    "{\"op\":\"segment_alloc\",\"addr\":139637997699072,\"size\":4194304,\"stream\":0}\n"
    "{\"op\":\"segment_free\",\"addr\":139637997699072,\"size\":4194304,\"stream\":0}\n"
    "{\"op\":\"segment_alloc\",\"addr\":139637997699072,\"size\":2097152,\"stream\":0}\n"
    "{\"op\":\"alloc\",\"id\":2,\"size\":1048576,\"addr\":139637997699072}\n"
    "{\"op\":\"oom\",\"size\":33554432,\"device_free\":10485760}\n"
    "{\"op\":\"free\",\"id\":2}\n"
    "{\"op\":\"segment_free\",\"addr\":139637997699072,\"size\":2097152,\"stream\":0}\n"
    "{\"op\":\"oom\",\"size\":33554432,\"device_free\":13631488}\n"
    "{\"op\":\"free\",\"id\":1}\n";

// No oom recorded: 10 MiB then 20 MiB.
const char* kPlainTrace =
    "{\"fraglab_trace\":1,\"name\":\"plain\"}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":10485760}\n"
    "{\"op\":\"alloc\",\"id\":2,\"size\":20971520}\n"
    "{\"op\":\"free\",\"id\":2}\n"
    "{\"op\":\"free\",\"id\":1}\n";

std::string trace_file(const std::string& name, const char* text) {
  const fs::path path = scratch_dir("capacity") / name;
  write_text(path, text);
  return path.string();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

TEST(Capacity, DefaultIsNamedInTheHeaderAndTheJson) {
  const std::string trace = trace_file("plain.jsonl", kPlainTrace);
  const CommandResult table = run_fraglab("replay " + trace + " -p pytorch");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(first_line(table.out), "trace plain: 4 events, 2 allocs; device sim, capacity 80.00 GiB (default)");
  const CommandResult json = run_fraglab("replay " + trace + " -p pytorch --json -");
  ASSERT_EQ(json.status, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["device"]["kind"], "sim");
  EXPECT_EQ(j["device"]["capacity_bytes"].get<std::uint64_t>(), 80 * kGiB);
  EXPECT_EQ(j["device"]["capacity_source"], "default");
  // Nothing in this run depends on the capacity: no warning, no note.
  EXPECT_EQ(table.err, "");
}

TEST(Capacity, DeviceOptionIsNamedInTheHeaderAndTheJson) {
  const std::string trace = trace_file("plain.jsonl", kPlainTrace);
  const CommandResult table = run_fraglab("compare " + trace + " -p nocache --device sim:52GiB");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(first_line(table.out), "trace plain: 4 events, 2 allocs; device sim:52GiB, capacity 52.00 GiB (--device)");
  const CommandResult json = run_fraglab("compare " + trace + " -p nocache --device sim:52GiB --json -");
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["device"]["capacity_bytes"].get<std::uint64_t>(), 52 * kGiB);
  EXPECT_EQ(j["device"]["capacity_source"], "--device");
  // A device without a capacity leaves the default, and says so.
  const CommandResult plain = run_fraglab("replay " + trace + " -p nocache --device sim:external:1GiB --json -");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["device"]["capacity_source"], "default");
}

TEST(Capacity, RecordedOomGivesTheCapacityWhenNoDeviceIsGiven) {
  const std::string trace = trace_file("oom.jsonl", kOomTrace);
  const CommandResult table = run_fraglab("replay " + trace + " -p nocache");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(first_line(table.out),
            // 11 events and the empty_cache() inferred before the first segment_free (followed by
            // a segment that fits without it: fraglab/validate.hpp).
            "trace hand-oom: 12 events, 2 allocs; device sim, capacity 32.00 MiB (recorded oom)");
  for (const char* command : {"replay", "compare"}) {
    const CommandResult json = run_fraglab(std::string(command) + " " + trace + " -p nocache --json -");
    ASSERT_EQ(json.status, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out);
    EXPECT_EQ(j["device"]["capacity_bytes"].get<std::uint64_t>(), 32 * kMiB) << command;
    EXPECT_EQ(j["device"]["capacity_source"], "recorded oom") << command;
  }
  // --device wins over the record.
  const CommandResult given = run_fraglab("replay " + trace + " -p nocache --device sim:1GiB --json -");
  EXPECT_EQ(nlohmann::json::parse(given.out)["device"]["capacity_bytes"].get<std::uint64_t>(), kGiB);
  // The capacity binds: a 40 MiB request does not fit in 32 MiB (10 + 20 MiB live fit).
  const std::string big =
      trace_file("oom-big.jsonl", (std::string(kOomTrace) + "{\"op\":\"alloc\",\"id\":3,\"size\":41943040}\n").c_str());
  const CommandResult oom = run_fraglab("replay " + big + " -p nocache --json -");
  EXPECT_EQ(nlohmann::json::parse(oom.out)["runs"][0]["num_ooms"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(oom.err.find("note:"), std::string::npos) << "the capacity was not assumed: " << oom.err;
}

TEST(Capacity, SizeWithoutAUnitIsAnErrorShowingTheForms) {
  const std::string trace = trace_file("plain.jsonl", kPlainTrace);
  for (const char* command : {"replay", "compare", "sweep", "diff"}) {
    std::string args = std::string(command) + " " + trace + (std::string(command) == "diff" ? " " + trace : "") +
                       " --device sim:40" + (std::string(command) == "sweep" ? " --grid max_split_size_mb=none" : "");
    const CommandResult r = run_fraglab(args);
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_EQ(r.out, "") << command;
    // 40 GiB = 40 * 2^30 = 42949672960 bytes.
    for (const char* form : {"'sim:40'", "40GiB", "40GB", "42949672960B"}) {
      EXPECT_NE(r.err.find(form), std::string::npos) << command << ": " << r.err;
    }
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const CommandResult typo = run_fraglab("replay " + trace + " --device sim:40GBi");
  EXPECT_EQ(typo.status, 2);
  EXPECT_NE(typo.err.find("42949672960B"), std::string::npos) << typo.err;
}

TEST(Capacity, CapacityOptionsWarnOnlyWhenTheCapacityWasAssumed) {
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const std::string oom = trace_file("oom.jsonl", kOomTrace);
  const std::string both = " -p pytorch:garbage_collection_threshold:0.6,per_process_memory_fraction:0.5";
  const CommandResult assumed = run_fraglab("replay " + plain + both);
  ASSERT_EQ(assumed.status, 0) << assumed.err;
  EXPECT_EQ(assumed.err,
            "warning: garbage_collection_threshold acts on a share of the GPU's memory, and no capacity was given: "
            "pass --device sim:<your GPU's memory> (assumed 80.00 GiB)\n"
            "warning: per_process_memory_fraction acts on a share of the GPU's memory, and no capacity was given: "
            "pass --device sim:<your GPU's memory> (assumed 80.00 GiB)\n");
  EXPECT_EQ(assumed.out.find("warning"), std::string::npos) << "warnings go to stderr only";
  EXPECT_EQ(run_fraglab("replay " + plain + both + " --device sim:24GiB").err, "");
  EXPECT_EQ(run_fraglab("replay " + oom + both).err, "");
  const CommandResult fraction = run_fraglab("replay " + plain + " -p pytorch --memory-fraction 0.5");
  EXPECT_EQ(fraction.err.find("warning: per_process_memory_fraction acts on a share"), 0u) << fraction.err;
  EXPECT_NE(run_fraglab("compare " + plain + both).err.find("warning: per_process_memory_fraction"), std::string::npos);
}

TEST(Capacity, GcWithoutAMemoryFractionWarnsWhateverTheCapacity) {
  // PyTorch collects cached blocks only under a memory fraction (allocator-model §3.3): the threshold
  // alone does nothing, on any device, and the warning says that rather than ask for a capacity.
  const std::string plain = trace_file("plain.jsonl", kPlainTrace);
  const std::string expected =
      "warning: garbage_collection_threshold does nothing without per_process_memory_fraction: PyTorch collects "
      "cached blocks only under a memory fraction\n";
  EXPECT_EQ(run_fraglab("replay " + plain + " -p pytorch:garbage_collection_threshold:0.6").err, expected);
  EXPECT_EQ(run_fraglab("replay " + plain + " -p pytorch:garbage_collection_threshold:0.6 --device sim:24GiB").err,
            expected);
}

TEST(Capacity, OomsOnAnAssumedCapacityAreNoted) {
  // 100 GiB cannot fit in the assumed 80 GiB; on a 128 GiB device it fits and nothing is noted.
  const std::string trace = trace_file("huge.jsonl",
                                       "{\"fraglab_trace\":1,\"name\":\"huge\"}\n"
                                       "{\"op\":\"alloc\",\"id\":1,\"size\":107374182400}\n"
                                       "{\"op\":\"free\",\"id\":1}\n");
  const CommandResult assumed = run_fraglab("replay " + trace + " -p nocache");
  ASSERT_EQ(assumed.status, 0) << assumed.err;
  EXPECT_NE(assumed.err.find("note: the out-of-memory errors depend on the device's capacity"), std::string::npos)
      << assumed.err;
  EXPECT_EQ(run_fraglab("replay " + trace + " -p nocache --device sim:128GiB").err, "");
}

TEST(Capacity, DiffAndCheckNameTheDevice) {
  const std::string trace = trace_file("plain.jsonl", kPlainTrace);
  const CommandResult diff = run_fraglab("diff " + trace + " " + trace + " --device sim:1GiB");
  ASSERT_EQ(diff.status, 0) << diff.err;
  EXPECT_EQ(first_line(diff.out), "diff under pytorch; device sim:1GiB, capacity 1.00 GiB (--device)");
  const CommandResult diff_json = run_fraglab("diff " + trace + " " + trace + " --json -");
  EXPECT_EQ(nlohmann::json::parse(diff_json.out)["device"]["capacity_source"], "default");

  const std::string baseline = (scratch_dir("capacity") / "baseline.json").string();
  const CommandResult update =
      run_fraglab("check " + trace + " -p nocache --baseline " + baseline + " --update-baseline --device sim:2GiB");
  ASSERT_EQ(update.status, 0) << update.err;
  const auto written = nlohmann::json::parse(read_text(baseline));
  EXPECT_EQ(written["device"]["capacity_bytes"].get<std::uint64_t>(), 2 * kGiB);
  EXPECT_EQ(written["device"]["capacity_source"], "--device");
  // Checked later without --device: the baseline's device, and its recorded source.
  const CommandResult check = run_fraglab("check " + trace + " --baseline " + baseline);
  ASSERT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_NE(first_line(check.out).find("; device sim, capacity 2.00 GiB (--device)"), std::string::npos) << check.out;
}

}  // namespace
}  // namespace fraglab::testing
