// The policy kit (fraglab/policy_kit.hpp) and Policy::audit(): the option reader on a hand-made
// option table, the size helpers on hand-computed values, each policy's audit() catching a state
// corrupted through its own interface (a free with the wrong size, a double free), and every
// policy's audit() silent on every shipped sample with the invariant checker attached.
#include <filesystem>

#include "fraglab/policy_kit.hpp"
#include "fraglab/trace_io.hpp"
#include "policies/rig.hpp"
#include "support/input_error.hpp"

namespace fraglab::test {
namespace {

const PolicyInfo kToy{"toy", "", "", {{"size_mb", "64", ""}, {"mode", "fast", ""}, {"check", "false", ""}}, nullptr};

using fraglab::testing::error_of;

auto mib = [](std::string_view v) { return kit::parse_whole_units(v, MiB); };

TEST(OptionReader, TakesDefaultsFromTheTableAndTheLastOfARepeatedKey) {
  const kit::OptionReader none(kToy, "");
  EXPECT_EQ(none.get<Bytes>("size_mb", "MiB", mib), 64 * MiB);
  EXPECT_EQ(none.choice("mode", {"fast", "slow"}), 0u);
  EXPECT_FALSE(none.flag("check"));
  EXPECT_FALSE(none.given("size_mb"));
  const kit::OptionReader set(kToy, "size_mb:1,mode:slow,size_mb:3,check:True");
  EXPECT_EQ(set.get<Bytes>("size_mb", "MiB", mib), 3 * MiB);
  EXPECT_EQ(set.choice("mode", {"fast", "slow"}), 1u);
  EXPECT_TRUE(set.flag("check"));
  EXPECT_TRUE(set.given("size_mb"));
}

TEST(OptionReader, GeneratesTheUnknownOptionAndBadValueMessages) {
  EXPECT_EQ(error_of([] { kit::OptionReader(kToy, "mode:fast,colour:red"); }),
            "toy: unknown option 'colour' (accepted: size_mb, mode, check)");
  EXPECT_EQ(error_of([] {
              kit::OptionReader(kToy, "mode:medium").choice("mode", {"fast", "slow", "off"});
            }),
            "toy: mode: expected fast, slow or off, got 'medium'");
  // Every occurrence is checked, not only the last.
  EXPECT_EQ(error_of([] { kit::OptionReader(kToy, "size_mb:x,size_mb:2").get<Bytes>("size_mb", "MiB", mib); }),
            "toy: size_mb: expected MiB, got 'x'");
  EXPECT_EQ(error_of([] { kit::OptionReader(kToy, "check:maybe").flag("check"); }),
            "toy: check: expected True or False (also true, false, 1, 0), got 'maybe'");
}

TEST(OptionReader, ValueParsersOnHandPickedEdges) {
  EXPECT_EQ(kit::parse_whole("6", 6), 6u);
  EXPECT_EQ(kit::parse_whole("7", 6), std::nullopt);
  EXPECT_EQ(kit::parse_whole("-1", 6), std::nullopt);
  EXPECT_EQ(kit::parse_whole("1.5", 6), std::nullopt);
  EXPECT_EQ(kit::parse_whole_units("17592186044415", MiB), 17592186044415u * MiB);  // (2^64 - 1) / 2^20
  EXPECT_EQ(kit::parse_whole_units("17592186044416", MiB), std::nullopt);           // 2^44 MiB = 2^64 B
  EXPECT_EQ(kit::parse_bytes("4KiB"), 4096u);
  EXPECT_EQ(kit::parse_bytes("lots"), std::nullopt);
  EXPECT_EQ(kit::parse_number("inf"), std::nullopt);
  EXPECT_EQ(kit::parse_flag("0"), false);
  EXPECT_EQ(kit::parse_flag("TRUE"), std::nullopt);
}

TEST(Sizes, RoundingAndTheLargestRequest) {
  EXPECT_EQ(kit::round_request(0, 512), 512u);
  EXPECT_EQ(kit::round_request(513, 512), 1024u);
  EXPECT_EQ(kit::round_request(1024, 512), 1024u);
  const Bytes eib = Bytes{1} << 60;
  EXPECT_EQ(kit::round_request(eib - 1, 512), eib);  // the largest possible request still rounds
  EXPECT_EQ(kit::round_request(eib + 1, 512), eib + 1);
  EXPECT_TRUE(kit::impossible_request(eib));
  EXPECT_FALSE(kit::impossible_request(eib - 1));
}

// ---- audit() catches corrupted states ---------------------------------------------------------

struct Direct {
  SimDevice device;
  std::unique_ptr<Policy> policy;
  explicit Direct(const std::string& spec) : policy(create_policy(spec, device)) {}
  Block take(Bytes size) {
    std::optional<Block> b = policy->allocate(size, 0);
    EXPECT_TRUE(b.has_value());
    return b.value_or(Block{});
  }
};

std::string first(const std::vector<std::string>& problems) { return problems.empty() ? "(none)" : problems.front(); }

TEST(Audit, TlsfCatchesADoubleFree) {
  Direct d("tlsf");
  d.take(512);
  const Block b = d.take(512);
  d.policy->free_completed(b);
  EXPECT_TRUE(d.policy->audit().empty()) << first(d.policy->audit());
  d.policy->free(b);  // again: b's record is already free and merged with the rest of the pool
  const std::vector<std::string> problems = d.policy->audit();
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("tlsf audit: "), std::string::npos) << problems.front();
}

TEST(Audit, BestfitCatchesAFreeOfTheWrongSize) {
  Direct d("bestfit");
  const Block b = d.take(1024);
  d.take(512);
  EXPECT_TRUE(d.policy->audit().empty()) << first(d.policy->audit());
  d.policy->free_completed(Block{b.addr, 512, 512, 0, b.cookie});  // [addr + 512, +512) is lost
  EXPECT_NE(first(d.policy->audit()).find("bestfit audit: arena not tiled"), std::string::npos)
      << first(d.policy->audit());
}

TEST(Audit, BuddyCatchesAFreeOfTheWrongSize) {
  Direct d("buddy");
  const Block b = d.take(512);
  EXPECT_TRUE(d.policy->audit().empty()) << first(d.policy->audit());
  // Freed as order 1: it merges with its order-1 buddy and upwards while its true order-0 buddy
  // stays on the order-0 free list, inside the now "free" top-level block.
  d.policy->free_completed(Block{b.addr, 1024, 512, 0, b.cookie});
  EXPECT_NE(first(d.policy->audit()).find("buddy audit: "), std::string::npos) << first(d.policy->audit());
}

// ---- the invariant checker calls audit() and checks the OOM count -----------------------------

// nocache, except that audit() reports a problem once `broken` is set and num_ooms can lag.
class Faulty final : public Policy {
 public:
  explicit Faulty(Device& device) : inner_(create_policy("nocache", device)) {}
  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    if (size >= fail_from) return std::nullopt;  // not counted in num_ooms
    return inner_->allocate(size, stream);
  }
  void free_requested(const Block& b) override { inner_->free_requested(b); }
  void free_completed(const Block& b) override {
    inner_->free_completed(b);
    broken = true;
  }
  PolicyCounters counters() const override { return inner_->counters(); }
  std::vector<std::string> audit() const override {
    if (broken) return {"faulty audit: broken on purpose"};
    return {};
  }
  bool broken = false;
  Bytes fail_from = ~Bytes{0};

 private:
  std::unique_ptr<Policy> inner_;
};

std::vector<std::string> check(Faulty& policy, SimDevice& device, const Trace& trace) {
  InvariantChecker checker(device);
  Replayer replayer(trace, policy, device);
  replayer.add_observer(&checker);
  replayer.run("faulty");
  return checker.violations();
}

TEST(InvariantCheckerAudit, ReportsWhatAuditFindsAtTheEvent) {
  SimDevice device;
  Faulty policy(device);
  const std::vector<std::string> v = check(policy, device, make_trace({alloc(1, 4096), free_of(1), alloc(2, 512)}));
  ASSERT_EQ(v.size(), 2u);  // after events 1 and 2
  EXPECT_EQ(v[0], "event 1 (free id=1): faulty audit: broken on purpose");
}

TEST(InvariantCheckerAudit, ReportsAnOomThePolicyDidNotCount) {
  SimDevice device;
  Faulty policy(device);
  policy.fail_from = 1 * GiB;
  const std::vector<std::string> v = check(policy, device, make_trace({alloc(1, 4096), alloc(2, 2 * GiB)}));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], "event 1 (alloc id=2): the policy counts 0 out-of-memory failures, the replay saw 1");
}

// ---- every policy, every sample ---------------------------------------------------------------

TEST(InvariantCheckerAudit, EveryPolicyIsCleanOnEverySample) {
  const std::filesystem::path samples = std::filesystem::path(FRAGLAB_SOURCE_DIR) / "traces/samples";
  int runs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(samples)) {
    if (entry.path().extension() != ".jsonl") continue;
    const Trace trace = read_trace(entry.path().string());
    for (const PolicyInfo* info : PolicyRegistry::instance().all()) {
      if (info->needs_tags) continue;  // the samples carry no tags
      const PolicyRun run = run_policy(info->name, trace);
      EXPECT_TRUE(run.violations.empty())
          << info->name << " on " << entry.path().filename() << ": " << run.violations.front();
      ++runs;
    }
  }
  EXPECT_GE(runs, 5 * 7);  // five samples, seven untagged policies
}

}  // namespace
}  // namespace fraglab::test
