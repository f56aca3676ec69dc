// The usage statistics are optional (CachingAllocator::skip_usage_stats(),
// Policy::skip_detailed_stats()): a run that skips them makes every decision, Metrics figure and
// OOM message of a run that keeps them, and says so when asked for the statistics it did not keep.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "fraglab/device_spec.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/report.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/trace_io.hpp"
#include "rig.hpp"
#include "support/real_traces.hpp"

namespace fraglab::cca::test {
namespace {

// 32 MiB device. 3 MiB (large pool, §1.5) takes a 20 MiB segment; 18 MiB does not fit the
// 17 MiB left in it, its own 18 MiB segment does not fit the 12 MiB the device has left, and the
// flush frees nothing (the segment is split) -> OOM. The message counts the 3 MiB allocated: the
// allocated bytes come from the blocks when the statistics are not kept.
TEST(UsageStats, OomMessageCountsTheAllocatedBytesEitherWay) {
  for (const bool keep : {true, false}) {
    Rig r("", 32 * MiB);
    if (!keep) r.alloc.skip_usage_stats();
    EXPECT_EQ(r.alloc.keeps_usage_stats(), keep);
    r.malloc(3 * MiB);
    EXPECT_FALSE(r.alloc.malloc(18 * MiB, 0).has_value());
    EXPECT_NE(r.alloc.last_oom_message().find("Tried to allocate 18.00 MiB. GPU 0 has a total capacity of 32.00 MiB "
                                              "of which 12.00 MiB is free. Of the allocated memory 3.00 MiB is "
                                              "allocated by PyTorch, and 17.00 MiB is reserved by PyTorch but "
                                              "unallocated."),
              std::string::npos)
        << "keep=" << keep << ": " << r.alloc.last_oom_message();
    EXPECT_EQ(r.alloc.stats().num_ooms, 1);
    EXPECT_EQ(r.alloc.stats().num_alloc_retries, 1);
    EXPECT_EQ(r.alloc.stats().reserved_bytes.all().current, static_cast<std::int64_t>(20 * MiB));
    // Kept: the 3 MiB block; skipped: untouched since construction.
    EXPECT_EQ(r.alloc.stats().allocated_bytes.all().current, keep ? static_cast<std::int64_t>(3 * MiB) : 0);
  }
}

TEST(UsageStats, SkippingAfterTheFirstRequestIsRefused) {
  Rig r;
  r.malloc(512);
  EXPECT_THROW(r.alloc.skip_usage_stats(), std::logic_error);
  EXPECT_TRUE(r.alloc.keeps_usage_stats());
}

TEST(UsageStats, ThePolicyRefusesTheStatisticsItSkipped) {
  PolicyOnDevice run("pytorch", parse_device_spec("sim:1GiB"));
  run.policy().skip_detailed_stats();
  EXPECT_THROW((void)run.policy().detailed_stats(), std::logic_error);
}

// On every real snapshot, under settings that split, collect, flush and OOM (a 1 GiB device, from
// a cold start): a replay that skips
// the statistics gives the JSON of one that keeps them (without the statistics themselves), and
// the policy's audit holds during it.
TEST(UsageStats, SkippingChangesNoResultOnTheRealSnapshots) {
  const char* const snapshots[] = {"tiny-segments.pickle",
                                   "finetune-step-oldformat.pickle",
                                   "gpt2medium-ctx128-train-cutoff.pickle",
                                   "lm-forward-bf16-nosegments.pickle",
                                   "lm2.7b-ctx128-fullstep.pickle",
                                   "lm2.7b-ctx512-forward-bf16.pickle",
                                   "state-only-blocks-without-address.pickle"};
  const char* const specs[] = {
      "pytorch", "pytorch:expandable_segments:True",
      "pytorch:max_split_size_mb:64,garbage_collection_threshold:0.6,per_process_memory_fraction:0.9"};
  for (const char* name : snapshots) {
    const std::string path = std::string(FRAGLAB_REAL_TRACES) + "/" + name;
    FRAGLAB_NEEDS_REAL_TRACE(path);
    const Trace trace = read_trace(path);
    for (const char* device : {"", "sim:1GiB"}) {
      for (const char* spec : specs) {
        SCOPED_TRACE(std::string(name) + " " + spec + " " + device);
        const DeviceSpec on = *device == '\0' ? DeviceSpec{} : parse_device_spec(device);
        ReplayOptions keep;
        // The recorded start states do not fit the small device: it starts cold.
        if (*device != '\0') keep.start_state = StartState::Cold;
        ReplayOptions skip = keep;
        skip.detailed_stats = false;
        ReplayObservers checked;
        checked.check_invariants = true;
        const ReplayResult kept = PolicyOnDevice(spec, on).run(trace, keep, checked);
        const ReplayResult skipped = PolicyOnDevice(spec, on).run(trace, skip, checked);
        EXPECT_FALSE(kept.detailed_stats.empty());
        EXPECT_TRUE(skipped.detailed_stats.empty());
        EXPECT_EQ(skipped.invariant_violations, std::optional<std::uint64_t>{0})
            << (skipped.invariant_messages.empty() ? "" : skipped.invariant_messages[0]);
        EXPECT_EQ(run_json(kept).dump(), run_json(skipped).dump());
      }
    }
  }
}

}  // namespace
}  // namespace fraglab::cca::test
