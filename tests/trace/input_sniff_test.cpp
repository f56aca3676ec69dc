// What a non-trace input looks like (src/trace/input_sniff.hpp), from bytes written by hand with
// the formats' documented magic numbers, and that no shipped trace is ever taken for one.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "fraglab/trace_io.hpp"
#include "support/command.hpp"
#include "trace/input_sniff.hpp"

namespace fraglab {
namespace {

using detail::not_a_trace;
using detail::not_a_trace_start;

std::string what(std::string_view bytes) { return not_a_trace(bytes).value_or("(a trace)"); }

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST(InputSniff, TraceStartsPass) {
  EXPECT_EQ(not_a_trace(std::string("\x80\x04\x95", 3)), std::nullopt);    // pickle, protocol 4
  EXPECT_EQ(not_a_trace(std::string("\x80\x02}q\x00", 5)), std::nullopt);  // protocol 2
  EXPECT_EQ(not_a_trace("{\"fraglab_trace\":1}\n{\"op\":\"empty_cache\"}\n"), std::nullopt);
  // The header's keys in any order, after blank lines (README "Traces").
  EXPECT_EQ(not_a_trace("\n \r\n{\"name\": \"x\", \"fraglab_trace\": 1}\n"), std::nullopt);
  // Streams: gzip's magic (RFC 1952), or too little yet to tell.
  EXPECT_EQ(not_a_trace_start(std::string("\x1f\x8b\x08\x00", 4)), std::nullopt);
  EXPECT_EQ(not_a_trace_start("\x1f"), std::nullopt);
  EXPECT_EQ(not_a_trace_start("PK"), std::nullopt);
  EXPECT_EQ(not_a_trace_start("  \n"), std::nullopt);
  EXPECT_EQ(not_a_trace_start("{\n"), std::nullopt);  // JSON or JSONL: the first line decides
}

TEST(InputSniff, NonTracesSayWhatTheyLookLike) {
  EXPECT_TRUE(contains(what(""), "is empty; expected a fraglab JSONL trace")) << what("");
  EXPECT_TRUE(contains(what(" \n\n\t"), "has only blank lines")) << what(" \n");
  // torch.save's zip: local file header PK\3\4, or an empty archive's end record PK\5\6.
  const std::string zip = what(std::string("PK\x03\x04\x14\x00", 6));
  EXPECT_TRUE(contains(zip,
                       "looks like a torch.save/zip archive (it starts with 50 4b 03 04); "
                       "expected a memory snapshot from torch.cuda.memory._dump_snapshot() "
                       "or a fraglab JSONL trace"))
      << zip;
  EXPECT_TRUE(contains(what(std::string("PK\x05\x06", 4)), "torch.save/zip archive"));
  EXPECT_TRUE(contains(what("BZh91AY&SY"), "bzip2-compressed"));
  EXPECT_TRUE(contains(what(std::string("\xfd"
                                        "7zXZ\0\0",
                                        7)),
                       "xz-compressed"));
  EXPECT_TRUE(contains(what(std::string("\x28\xb5\x2f\xfd\x00", 5)), "zstd-compressed"));
  EXPECT_TRUE(contains(what(std::string(8, '\0')), "binary data (it starts with 00 00 00 00)"));
  EXPECT_TRUE(contains(what("\x7f"
                            "ELF\x02\x01"),
                       "an executable"));
  // JSON that is not JSONL: a results file pretty-printed, the same on one line, an array.
  const std::string pretty = what("{\n  \"runs\": []\n}\n");
  EXPECT_TRUE(contains(pretty,
                       "looks like pretty-printed JSON (its first line is \"{\"), not "
                       "fraglab JSONL; expected one JSON object per line, the first "
                       "{\"fraglab_trace\": 1, ...}"))
      << pretty;
  EXPECT_TRUE(contains(what("{\"runs\": []}\n"),
                       "looks like JSON, not a fraglab JSONL trace: "
                       "its first line has no \"fraglab_trace\" key"));
  EXPECT_TRUE(contains(what("[{\"op\": \"alloc\"}]"), "looks like JSON (an array)"));
  EXPECT_TRUE(
      contains(what("alloc 1 4096\nfree 1\n"), "looks like text that is not a trace (it starts \"alloc 1 4096\")"));
}

TEST(InputSniff, NoShippedTraceIsRefused) {
  const std::filesystem::path samples = std::filesystem::path(FRAGLAB_SOURCE_DIR) / "traces";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(samples))
    if (e.path().extension() == ".jsonl" || e.path().extension() == ".gz") files.push_back(e.path());
  const std::filesystem::path real = FRAGLAB_REAL_TRACES;
  if (std::filesystem::exists(real))
    for (const auto& e : std::filesystem::directory_iterator(real))
      if (e.path().extension() == ".pickle") files.push_back(e.path());
  files.push_back(std::filesystem::path(FRAGLAB_SOURCE_DIR) / "tests/data/two-gpus.pickle");
  EXPECT_GE(files.size(), 6u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = read_file_bytes(f.string());
    EXPECT_EQ(not_a_trace(bytes), std::nullopt);
    EXPECT_EQ(not_a_trace_start(std::string_view(bytes).substr(0, detail::kSniffBytes)), std::nullopt);
  }
}

TEST(InputSniff, ReadTraceRefusesAndReadFileBytesDoesNot) {
  const auto dir = testing::scratch_dir("sniff");
  try {
    read_trace(dir.string());
    ADD_FAILURE() << "a directory was read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir.string() + ": is a directory; expected a fraglab", 0), 0u) << e.what();
  }
  // JSON is a trace mistake, but read_file_bytes also reads JSON model configs: untouched.
  const auto json = dir / "model.json";
  testing::write_text(json, "{\n  \"layers\": 4\n}\n");
  EXPECT_EQ(read_file_bytes(json.string()), "{\n  \"layers\": 4\n}\n");
  try {
    read_trace(json.string());
    ADD_FAILURE() << "JSON was read as a trace";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "model.json: looks like pretty-printed JSON")) << e.what();
  }
}

}  // namespace
}  // namespace fraglab
