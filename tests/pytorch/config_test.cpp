// Option parsing and validation per version (allocator-model §10, §13). Expected messages are PyTorch's
// texts from the spec's §10 tables, prefixed with "pytorch: ".
#include <gtest/gtest.h>

#include <algorithm>

#include "fraglab/types.hpp"
#include "pytorch/config.hpp"

namespace fraglab::cca {
namespace {

std::string error_of(const std::string& options) {
  try {
    parse_config(options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

DivisionTable table(std::initializer_list<Bytes> values) {
  DivisionTable t{};
  std::copy(values.begin(), values.end(), t.begin());
  return t;
}

TEST(Config, DefaultsAreNewestAndUnlimited) {
  const Config c = parse_config("");
  EXPECT_EQ(c.version, Version::Newest);
  EXPECT_EQ(c.max_split_size, kUnlimited);
  EXPECT_EQ(c.max_non_split_rounding, 20 * MiB);
  EXPECT_EQ(c.large_segment_size, 20 * MiB);
  EXPECT_EQ(c.rounding.divisions, DivisionTable{});
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_FALSE(c.memory_fraction.has_value());
}

TEST(Config, GreaterThanFillDiffersBefore2_9) {
  // [256:1,512:2,1024:4,>:8]: 256 -> slot log2(256) = 8 (first key also fills slots 0..7 with 1);
  // 512 -> slot 9 = 2; 1024 -> slot 10 = 4. ">" fills from the last explicit slot (10) in <= 2.8,
  // overwriting it with 8; from slot 11 in 2.9+, so slot 10 stays 4 (§1.4).
  const std::string list = "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
  EXPECT_EQ(parse_config("version:2.8," + list).rounding.divisions,
            table({1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8}));
  EXPECT_EQ(parse_config("version:2.9," + list).rounding.divisions,
            table({1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8}));
  // Effect on a 1.5 GiB + 1 request (slot 10): 2.8 uses d = 8: step = 1 GiB / 8 = 128 MiB,
  // 1.5 GiB = 12 steps -> 13 * 128 MiB = 1,744,830,464; 2.9 uses d = 4: step 256 MiB,
  // 1.5 GiB = 6 steps -> 7 * 256 MiB = 1,879,048,192.
  const Bytes n = GiB + GiB / 2 + 1;
  EXPECT_EQ(round_size(n, parse_config("version:2.8," + list).rounding), 1744830464u);
  EXPECT_EQ(round_size(n, parse_config("version:2.9," + list).rounding), 1879048192u);
}

TEST(Config, ListKeysAreLowerBoundsOfTheirInterval) {
  // [256:4]: slot 8 = [256 MiB, 512 MiB) gets 4 (and slots below it, first key); slot 9+ stay 0.
  const Config c = parse_config("roundup_power2_divisions:[256:4]");
  // 300 MiB + 1 -> slot 8, d = 4: floor2 256 MiB, step 64 MiB -> 5 * 64 MiB = 335,544,320.
  EXPECT_EQ(round_size(300 * MiB + 1, c.rounding), 335544320u);
  // 600 MiB + 1 -> slot 9, d = 0 -> 512 rounding: 629,145,601 -> 629,146,112.
  EXPECT_EQ(round_size(600 * MiB + 1, c.rounding), 629146112u);
  // [1:4]: K = 1 -> slot 0 = everything below 2 MiB: 1,500,000 (> 2048): floor2 = 1 MiB,
  // step 256 KiB -> ceil(1,500,000 / 262,144) = 6 -> 1,572,864.
  EXPECT_EQ(round_size(1500000, parse_config("roundup_power2_divisions:[1:4]").rounding), 1572864u);
}

TEST(Config, ScalarDivisionsFillEverySlot) {
  EXPECT_EQ(parse_config("roundup_power2_divisions:4").rounding.divisions,
            table({4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(error_of("roundup_power2_divisions:3"), "pytorch: For roundups, the divisions has to be power of 2 ");
  EXPECT_EQ(error_of("roundup_power2_divisions:0"), "pytorch: For roundups, the divisions has to be power of 2 ");
  EXPECT_EQ(error_of("version:2.1,roundup_power2_divisions:3"),
            "pytorch: For roundups, the divisons has to be power of 2 ");
}

TEST(Config, ZeroInAListIsAcceptedFrom2_4) {
  EXPECT_EQ(error_of("version:2.1,roundup_power2_divisions:[256:0]"),
            "pytorch: For roundups, the divisons has to be power of 2 ");
  EXPECT_EQ(parse_config("version:2.4,roundup_power2_divisions:[256:0,>:4]").rounding.divisions,
            table({0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4}));  // <= 2.8: ">" overwrites slot 8
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:3]"),
            "pytorch: For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
  EXPECT_EQ(error_of("roundup_power2_divisions:[300:2]"),
            "pytorch: For roundups, the intervals have to be power of 2 ");
}

TEST(Config, MaxSplitSizeMinimumPerVersion) {
  // <= 2.8: must be > 20; 2.9: >= 20; newest: >= large_segment_size_mb.
  EXPECT_EQ(error_of("version:2.8,max_split_size_mb:20"),
            "pytorch: CachingAllocator option max_split_size_mb too small, must be > 20");
  EXPECT_EQ(parse_config("version:2.8,max_split_size_mb:21").max_split_size, 21 * MiB);
  EXPECT_EQ(parse_config("version:2.9,max_split_size_mb:20").max_split_size, 20 * MiB);
  EXPECT_EQ(error_of("version:2.9,max_split_size_mb:19"),
            "pytorch: CachingAllocator option max_split_size_mb too small, must be >= 20");
  EXPECT_EQ(error_of("version:1.13,max_split_size_mb:20"),
            "pytorch: CachingAllocator option max_split_size_mb too small, must be > 20");
  EXPECT_EQ(error_of("large_segment_size_mb:64,max_split_size_mb:40"),
            "pytorch: CachingAllocator option max_split_size_mb too small, must be >= 64");
  // large_segment_size_mb is read first, whatever its position.
  EXPECT_EQ(error_of("max_split_size_mb:40,large_segment_size_mb:64"),
            "pytorch: CachingAllocator option max_split_size_mb too small, must be >= 64");
}

TEST(Config, MaxNonSplitRounding) {
  EXPECT_EQ(error_of("version:2.4,max_non_split_rounding_mb:64"),
            "pytorch: Unrecognized CachingAllocator option: max_non_split_rounding_mb");
  EXPECT_EQ(error_of("version:2.6,max_non_split_rounding_mb:20"),
            "pytorch: CachingAllocator option max_non_split_rounding_mb too small, must be > 20");
  EXPECT_EQ(parse_config("version:2.6,max_non_split_rounding_mb:64").oversize_slack(), 64 * MiB);
  EXPECT_EQ(parse_config("version:2.4").oversize_slack(), kLargeBuffer);  // R = kLargeBuffer before 2.6
  // newest: the default follows large_segment_size.
  EXPECT_EQ(parse_config("large_segment_size_mb:32").oversize_slack(), 32 * MiB);
}

TEST(Config, LargeSegmentSize) {
  EXPECT_EQ(parse_config("large_segment_size_mb:64").large_segment_size, 64 * MiB);
  EXPECT_EQ(error_of("large_segment_size_mb:10"),
            "pytorch: CachingAllocator option large_segment_size_mb must be > 10 MB");
  EXPECT_EQ(error_of("version:2.9,large_segment_size_mb:64"),
            "pytorch: Unrecognized key 'large_segment_size_mb' in CUDA allocator config.");
}

TEST(Config, GarbageCollectionThresholdMessages) {
  EXPECT_DOUBLE_EQ(parse_config("garbage_collection_threshold:0.6").garbage_collection_threshold, 0.6);
  EXPECT_EQ(error_of("version:2.8,garbage_collection_threshold:0"),
            "pytorch: garbage_collect_threshold too small, set it 0.0~1.0");
  EXPECT_EQ(error_of("version:2.8,garbage_collection_threshold:1.0"),
            "pytorch: garbage_collect_threshold too big, set it 0.0~1.0");
  EXPECT_EQ(error_of("garbage_collection_threshold:1.5"),
            "pytorch: garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
}

TEST(Config, UnknownKeyMessagesPerVersion) {
  EXPECT_EQ(error_of("version:1.13,foo:1"), "pytorch: Unrecognized CachingAllocator option: foo");
  EXPECT_EQ(error_of("version:2.8,foo:1"), "pytorch: Unrecognized CachingAllocator option: foo");
  EXPECT_EQ(error_of("version:2.9,foo:1"), "pytorch: Unrecognized key 'foo' in CUDA allocator config.");
  EXPECT_EQ(error_of("foo:1"), "pytorch: Unrecognized key 'foo' in Accelerator allocator config.");
  // Options a version does not have are unknown there.
  EXPECT_EQ(error_of("version:2.0,expandable_segments:True"),
            "pytorch: Unrecognized CachingAllocator option: expandable_segments");
  EXPECT_EQ(error_of("version:2.4,roundup_bypass_threshold_mb:64"),
            "pytorch: Unrecognized CachingAllocator option: roundup_bypass_threshold_mb");
}

TEST(Config, BooleansAndSeparators) {
  EXPECT_TRUE(parse_config("expandable_segments:True").expandable_segments);
  EXPECT_EQ(error_of("version:2.8,expandable_segments:yes"),
            "pytorch: Expected a single True/False argument for expandable_segments");
  // 2.9+ tokens: [expandable_segments, :, true] -> the value is token 2.
  EXPECT_EQ(error_of("expandable_segments:true"),
            "pytorch: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'");
  // 2.0-2.8 check the separator after a value strictly.
  EXPECT_EQ(error_of("version:2.8,expandable_segments:True:False"),
            "pytorch: Error parsing CachingAllocator settings, expected ,");
  EXPECT_EQ(error_of("version:2.8,max_split_size_mb"), "pytorch: Error parsing CachingAllocator settings, expected :");
  EXPECT_EQ(error_of("version:2.8,max_split_size_mb:"), "pytorch: Error, expecting max_split_size_mb value");
}

TEST(Config, Version1_13Syntax) {
  // Whitespace separates too, items without a value are skipped (and noted).
  const Config c =
      parse_config("version:1.13,max_split_size_mb:64 roundup_power2_divisions:4,garbage_collection_threshold");
  EXPECT_EQ(c.max_split_size, 64 * MiB);
  EXPECT_EQ(c.rounding.divisions[0], 4u);
  EXPECT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(parse_config("version:1.13,roundup_bypass_threshold_mb:64").rounding.bypass_threshold, 64 * MiB);
}

TEST(Config, BackendAndInertOptions) {
  EXPECT_NE(error_of("backend:cudaMallocAsync").find("cuda_async"), std::string::npos);
  EXPECT_EQ(error_of("backend:magic"), "pytorch: Unknown allocator backend, options are native and cudaMallocAsync");
  const Config c = parse_config(
      "backend:native,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,"
      "pinned_num_register_threads:8,graph_capture_record_stream_reuse:False");
  EXPECT_EQ(c.notes.size(), 5u);
  EXPECT_EQ(error_of("pinned_num_register_threads:3"),
            "pytorch: Number of register threads has to be power of 2, got 3");
}

TEST(Config, MemoryFractionAndVersion) {
  EXPECT_DOUBLE_EQ(*parse_config("per_process_memory_fraction:0.5").memory_fraction, 0.5);
  EXPECT_EQ(error_of("per_process_memory_fraction:1.5"),
            "pytorch: per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
  EXPECT_EQ(parse_config("max_split_size_mb:64,version:2.6").version, Version::V2_6);
  EXPECT_EQ(error_of("version:3.7"),
            "pytorch: version: unknown PyTorch version '3.7' (accepted: 1.13, 2.0, 2.1, 2.4, 2.6, 2.8, 2.9, newest)");
}

TEST(Config, MalformedRoundupListsNameTheListAndWhatWasExpected) {
  // A list missing its ']' (PyTorch 2.9+: "Index out of bounds in ConfigTokenizer"; 2.8:
  // "expected ,"): every version names the list as written and the expected form.
  const std::string unclosed =
      "pytorch: roundup_power2_divisions: the list '[256:1,512:2' has no closing ']' (expected "
      "[SIZE_MB:DIVISIONS,...,>:DIVISIONS], e.g. [256:1,512:2,>:4])";
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:1,512:2"), unclosed);
  EXPECT_EQ(error_of("version:2.8,roundup_power2_divisions:[256:1,512:2"), unclosed);
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:1,512:2,max_split_size_mb:64"),
            "pytorch: roundup_power2_divisions: the list '[256:1,512:2,max_split_size_mb:64' has no closing ']' "
            "(expected [SIZE_MB:DIVISIONS,...,>:DIVISIONS], e.g. [256:1,512:2,>:4])");
  // An entry without its value.
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:1,512]"),
            "pytorch: roundup_power2_divisions: list entry '512' has no value (expected SIZE_MB:DIVISIONS or "
            ">:DIVISIONS, e.g. [256:1,512:2,>:4])");
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:]"),
            "pytorch: roundup_power2_divisions: list entry '256' has no value (expected SIZE_MB:DIVISIONS or "
            ">:DIVISIONS, e.g. [256:1,512:2,>:4])");
  // Not a number.
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:four]"),
            "pytorch: roundup_power2_divisions: expected an integer, got 'four'");
  EXPECT_EQ(error_of("roundup_power2_divisions:[big:4]"),
            "pytorch: roundup_power2_divisions: expected an integer, got 'big'");
  // PyTorch accepts an empty list and changes nothing: so do we, with a note that names it.
  const Config empty = parse_config("roundup_power2_divisions:[]");
  EXPECT_EQ(empty.rounding.divisions, DivisionTable{});
  ASSERT_EQ(empty.notes.size(), 1u);
  EXPECT_NE(empty.notes[0].find("roundup_power2_divisions:[] is an empty list"), std::string::npos) << empty.notes[0];
}

TEST(Config, ConfigEndingEarlyNamesTheKeyNotAnIndex) {
  EXPECT_EQ(error_of("roundup_power2_divisions:"),
            "pytorch: roundup_power2_divisions: the config ends where a value was expected "
            "(PyTorch: Index out of bounds in ConfigTokenizer)");
  EXPECT_EQ(error_of("max_split_size_mb"),
            "pytorch: max_split_size_mb: the config ends where ':' was expected "
            "(PyTorch: Index out of bounds in ConfigTokenizer)");
  EXPECT_EQ(error_of("max_split_size_mb:64,expandable_segments:"),
            "pytorch: expandable_segments: the config ends where True or False was expected "
            "(PyTorch: Index out of bounds in ConfigTokenizer)");
  EXPECT_EQ(error_of("version:2.9,backend"),
            "pytorch: backend: the config ends where ':' was expected "
            "(PyTorch: Index out of bounds in ConfigTokenizer)");
}

}  // namespace
}  // namespace fraglab::cca
