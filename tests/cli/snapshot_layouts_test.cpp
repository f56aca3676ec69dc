// The older snapshot layouts through the commands that read them: inspect, replay, validate and
// convert on a hand-built 1.13 list of segments and on the shipped 2.0-era dump whose blocks
// carry no 'address' (figures from ../shared/traces/real/README.md).
#include <gtest/gtest.h>

#include <string>

#include "support/command.hpp"
#include "support/pickle_writer.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

const std::string kReal = std::string(FRAGLAB_REAL_TRACES) + "/";

// pickle.dump(torch.cuda.memory_snapshot()) on 1.13: one 20 MiB segment, blocks of 4 MiB
// (active, 4,000,000 B requested), 6 MiB (inactive) and 10 MiB (active, 10,000,000 B).
fs::path list_of_segments() {
  constexpr std::uint64_t base = 0x7f0000000000, mib = 1 << 20;
  auto block = [](std::uint64_t addr, std::uint64_t size, const char* state, std::uint64_t real) {
    return PyDict{{"address", addr},
                  {"size", size},
                  {"state", state},
                  {"history", PyList{PyDict{{"addr", addr}, {"real_size", real}}}}};
  };
  Py segments = PyList{PyDict{{"device", 0},
                              {"address", base},
                              {"total_size", 20 * mib},
                              {"allocated_size", 14 * mib},
                              {"active_size", 14 * mib},
                              {"stream", 0},
                              {"segment_type", "large"},
                              {"blocks", PyList{block(base, 4 * mib, "active_allocated", 4000000),
                                                block(base + 4 * mib, 6 * mib, "inactive", 5000000),
                                                block(base + 10 * mib, 10 * mib, "active_allocated", 10000000)}}}};
  const fs::path path = scratch_dir("layouts") / "list113.pickle";
  write_text(path, PickleWriter(2).encode(segments));
  return path;
}

TEST(SnapshotLayoutCli, ListOfSegmentsThroughEveryCommand) {
  const std::string snap = list_of_segments().string();
  const std::string state = "initial state: 1 segments, 20.00 MiB reserved (20971520 bytes), 2 live allocations";
  CommandResult r = run_fraglab("inspect " + snap);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("events       0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(state), std::string::npos) << r.out;
  r = run_fraglab("replay " + snap + " -p pytorch");
  EXPECT_EQ(r.status, 0) << r.err;
  r = run_fraglab("validate " + snap);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("list113: EXACT"), std::string::npos) << r.out;
  const std::string jsonl = (scratch_dir("layouts") / "list113.jsonl").string();
  r = run_fraglab("convert " + snap + " -o " + jsonl);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_fraglab("inspect " + jsonl);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(state), std::string::npos) << r.out;
}

TEST(SnapshotLayoutCli, BlocksWithoutAddressValidateExactly) {
  const std::string snap = kReal + "state-only-blocks-without-address.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(snap);
  CommandResult r = run_fraglab("validate " + snap);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("state-only-blocks-without-address: EXACT"), std::string::npos) << r.out;
  // README: reserved 1,851,785,216 B at start = peak = end, 112 segments.
  EXPECT_NE(r.out.find("peak reserved 1851785216 B recorded, 1851785216 B simulated"), std::string::npos) << r.out;
  r = run_fraglab("inspect " + snap);
  ASSERT_EQ(r.status, 0) << r.err;
  // 541 active blocks + the allocation the one trace entry frees (read with Python).
  EXPECT_NE(r.out.find("initial state: 112 segments, 1.72 GiB reserved (1851785216 bytes), 542 "
                       "live allocations"),
            std::string::npos)
      << r.out;
  r = run_fraglab("replay " + snap + " -p pytorch");
  EXPECT_EQ(r.status, 0) << r.err;
  r = run_fraglab("convert " + snap + " -o " + (scratch_dir("layouts") / "state.jsonl.gz").string());
  EXPECT_EQ(r.status, 0) << r.err;
}

}  // namespace
}  // namespace fraglab::testing
