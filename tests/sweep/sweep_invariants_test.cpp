// Invariant checks in sweeps: run_sweep with check_invariants reports each run's violations as
// run_replay does (a policy that breaks one is caught, one that keeps them counts zero), and
// `fraglab sweep --check-invariants` changes nothing of a clean sweep's output but adds the check.
#include <gtest/gtest.h>

#include <map>

#include "fraglab/sweep.hpp"
#include "fraglab/trace_io.hpp"
#include "support/command.hpp"
#include "support/events.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";

// Every block 512 bytes short of its request, in its own cudaMalloc of that size: invariant 3
// (a block is at least the request) fails on every allocation, the others hold. Registered for
// this test binary only.
class ShortBlockPolicy final : public Policy {
 public:
  explicit ShortBlockPolicy(Device& device) : device_(device) {}
  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    const Bytes block = size - 512;
    const std::optional<Addr> addr = device_.malloc(block);
    if (!addr) return std::nullopt;
    return Block{*addr, block, size, stream, 0};
  }
  void free_requested(const Block&) override {}
  void free_completed(const Block& block) override { device_.free(block.addr); }
  PolicyCounters counters() const override { return {}; }

 private:
  Device& device_;
};

const PolicyRegistration kShortBlock{PolicyInfo{"test-short-block",
                                                "test only: blocks 512 bytes short",
                                                "tests/sweep/sweep_invariants_test.cpp",
                                                {},
                                                [](std::string_view, Device& device) -> std::unique_ptr<Policy> {
                                                  return std::make_unique<ShortBlockPolicy>(device);
                                                }}};

TEST(SweepInvariants, RunSweepChecksEveryRunWhenAsked) {
  Trace t;
  t.name = "three";
  t.events = {test::alloc(1, 1 * MiB),    test::alloc(2, 4 * MiB),    test::alloc(3, 8 * MiB),
              test::with_op(Op::Free, 1), test::with_op(Op::Free, 2), test::with_op(Op::Free, 3)};
  const std::vector<SweepJob> jobs{{&t, "test-short-block"}, {&t, "nocache"}, {&t, "pytorch"}};
  for (const bool check : {false, true}) {
    SweepRunOptions options;
    options.threads = 2;
    options.check_invariants = check;
    std::map<std::size_t, std::optional<std::uint64_t>> violations;
    run_sweep(jobs, options, [&](std::size_t i, const ReplayResult& r) { violations[i] = r.invariant_violations; });
    ASSERT_EQ(violations.size(), 3u);
    if (!check) {
      for (const auto& [i, v] : violations) EXPECT_FALSE(v.has_value()) << "job " << i << ": not checked";
      continue;
    }
    EXPECT_EQ(violations[0], 3u);  // each of the three allocations is 512 bytes short
    EXPECT_EQ(violations[1], 0u);
    EXPECT_EQ(violations[2], 0u);
  }
}

TEST(SweepInvariants, CleanSweepOutputIsUnchangedByTheCheck) {
  const fs::path dir = testing::scratch_dir("sweep-invariants");
  const std::string command = "sweep " + kSamples + "two-phase.jsonl " + kSamples +
                              "cutoff.jsonl --grid max_split_size_mb=none,64 --grid expandable_segments=False,True "
                              "-j2 --no-progress -o ";
  fs::remove(dir / "plain.csv");
  fs::remove(dir / "checked.csv");
  const auto plain = run_fraglab(command + (dir / "plain.csv").string());
  const auto checked = run_fraglab(command + (dir / "checked.csv").string() + " --check-invariants");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(checked.status, 0) << checked.err;
  EXPECT_EQ(testing::read_text(dir / "checked.csv"), testing::read_text(dir / "plain.csv"));
  EXPECT_EQ(checked.out.substr(0, checked.out.find("\nresults:")), plain.out.substr(0, plain.out.find("\nresults:")));
  EXPECT_EQ(checked.err.find("invariant"), std::string::npos) << checked.err;
}

}  // namespace
}  // namespace fraglab
