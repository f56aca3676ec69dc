// TraceStream (fraglab/trace_stream.hpp): a JSONL file read a window at a time gives the events,
// strings, summary and errors that reading it whole gives, wherever the windows split the text.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "fraglab/trace_stream.hpp"
#include "support/command.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::read_text;
using testing::scratch_dir;
using testing::write_text;

struct Streamed {
  Trace trace;  // the header, its strings, and every event streamed
  TraceSummary summary;
  std::size_t pieces = 0;
};

Streamed stream_all(const fs::path& path, std::size_t window) {
  std::unique_ptr<TraceStream> stream = TraceStream::open(path.string(), {}, window);
  EXPECT_NE(stream, nullptr) << path;
  Streamed s;
  if (!stream) return s;
  std::vector<Event> events;
  while (stream->next(events)) {
    EXPECT_FALSE(events.empty());
    s.trace.events.insert(s.trace.events.end(), events.begin(), events.end());
    ++s.pieces;
  }
  const Trace& header = stream->trace();
  EXPECT_TRUE(header.events.empty());
  s.trace.name = header.name;
  s.trace.source = header.source;
  s.trace.strings = header.strings;
  s.summary = stream->summary();
  return s;
}

void expect_same_summary(const TraceSummary& a, const TraceSummary& b) {
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.allocs, b.allocs);
  EXPECT_EQ(a.frees, b.frees);
  EXPECT_EQ(a.observed_events, b.observed_events);
  EXPECT_EQ(a.streams, b.streams);
  EXPECT_EQ(a.peak_requested, b.peak_requested);
  EXPECT_EQ(a.total_requested, b.total_requested);
  EXPECT_EQ(a.max_request, b.max_request);
}

// Streamed in windows of every size from `smallest` up: the same as read_trace().
void expect_streams_as_read(const fs::path& path, std::size_t smallest, std::size_t largest, std::size_t step) {
  const Trace whole = read_trace(path.string());
  for (std::size_t window = smallest; window <= largest; window += step) {
    SCOPED_TRACE(window);
    const Streamed s = stream_all(path, window);
    EXPECT_EQ(s.trace.events, whole.events);
    EXPECT_EQ(s.trace.strings, whole.strings);
    EXPECT_EQ(s.trace.name, whole.name);
    EXPECT_EQ(s.trace.source, whole.source);
    expect_same_summary(s.summary, summarize(whole));
  }
}

// A hand-written trace: marks (strings interned while reading), deferred frees, several streams,
// and lines the fast scanner declines (spaces, an escape, a float-free but spaced object), so that
// both readers meet window ends.
std::string mixed_trace(int steps) {
  std::string text = "{\"fraglab_trace\":1,\"name\":\"mixed\",\"source\":\"test\"}\n\n";
  std::uint64_t id = 1;
  for (int s = 0; s < steps; ++s) {
    text += "{\"op\":\"mark\",\"label\":\"step\",\"value\":" + std::to_string(s) + "}\n";
    const std::uint64_t a = id++, b = id++, c = id++;
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(a) + ",\"size\":" + std::to_string(1000 + s * 7) +
            ",\"stream\":0,\"tag\":\"act\"}\n";
    text += "{ \"op\": \"alloc\", \"id\": " + std::to_string(b) + ", \"size\": 2048, \"stream\": 7 }\n";
    text += "{\"op\":\"alloc\",\"id\":" + std::to_string(c) + ",\"size\":512,\"tag\":\"t\\u0061g\"}\n";
    text += "\n";
    text += "{\"op\":\"free_requested\",\"id\":" + std::to_string(b) + "}\n";
    text += "{\"op\":\"free\",\"id\":" + std::to_string(a) + "}\n";
    text += "{\"op\":\"free_completed\",\"id\":" + std::to_string(b) + "}   \n";
    if (s % 3 == 0) text += "{\"op\":\"empty_cache\"}\n";
    text += "{\"op\":\"free\",\"id\":" + std::to_string(c) + ",\"t\":" + std::to_string(s) + "}\n";
  }
  return text;
}

TEST(TraceStream, EveryWindowSizeGivesTheEventsOfTheWholeRead) {
  const fs::path path = scratch_dir("trace_stream") / "mixed.jsonl";
  write_text(path, mixed_trace(40));
  // 64 bytes up: windows end inside nearly every line at one size or another.
  expect_streams_as_read(path, 64, 700, 1);
}

TEST(TraceStream, AFinalLineWithoutNewlineIsRead) {
  const fs::path path = scratch_dir("trace_stream") / "no-final-newline.jsonl";
  std::string text = mixed_trace(5);
  text += "{\"op\":\"alloc\",\"id\":999,\"size\":4096}";
  write_text(path, text);
  expect_streams_as_read(path, 64, 300, 1);
}

TEST(TraceStream, ShippedSamplesStreamAsTheyRead) {
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGLAB_SOURCE_DIR) / "traces/samples")) {
    if (entry.path().extension() != ".jsonl") continue;
    SCOPED_TRACE(entry.path());
    const Trace whole = read_trace(entry.path().string());
    if (!whole.initial.empty()) {  // a start state: read whole (fraglab/trace_stream.hpp)
      EXPECT_EQ(TraceStream::open(entry.path().string()), nullptr);
      continue;
    }
    expect_streams_as_read(entry.path(), 64, 64 + 40 * 37, 37);
    expect_streams_as_read(entry.path(), TraceStream::kDefaultWindow, TraceStream::kDefaultWindow, 1);
  }
}

TEST(TraceStream, AnErrorInALateWindowNamesItsLine) {
  const fs::path path = scratch_dir("trace_stream") / "late-error.jsonl";
  std::string text = mixed_trace(300);  // 2 + 300 * 9 or 10 lines
  const std::size_t lines_before = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  text += "{\"op\":\"free\",\"id\":123456789}\n";  // not live
  text += mixed_trace(1).substr(mixed_trace(1).find('\n') + 1);
  write_text(path, text);
  const std::string expected = fmt::format(
      "{}:{}: free id 123456789: free of an id that is not live (unknown id or "
      "double free)",
      path.string(), lines_before + 1);
  EXPECT_EQ(error_of([&] { read_trace(path.string()); }), expected);
  for (std::size_t window : {std::size_t{64}, std::size_t{1000}, std::size_t{4096}, TraceStream::kDefaultWindow}) {
    SCOPED_TRACE(window);
    std::unique_ptr<TraceStream> stream = TraceStream::open(path.string(), {}, window);
    ASSERT_NE(stream, nullptr);
    std::vector<Event> events;
    std::size_t read = 0;
    const std::string error = error_of([&] {
      while (stream->next(events)) read += events.size();
    });
    EXPECT_EQ(error, expected);
    if (window < 4096) {
      EXPECT_GT(read, 0u);  // the error came in a later window than the first
    }
  }
}

TEST(TraceStream, ABadLineInALaterWindowIsTheWholeReadsError) {
  const fs::path path = scratch_dir("trace_stream") / "late-bad-json.jsonl";
  std::string text = mixed_trace(100);
  text += "{\"op\":\"alloc\",\"id\":5000000,\"size\":12,}\n";
  write_text(path, text);
  const std::string expected = error_of([&] { read_trace(path.string()); });
  ASSERT_NE(expected.find(":" + std::to_string(std::count(text.begin(), text.end(), '\n')) + ":"), std::string::npos)
      << expected;
  std::unique_ptr<TraceStream> stream = TraceStream::open(path.string(), {}, 256);
  ASSERT_NE(stream, nullptr);
  std::vector<Event> events;
  EXPECT_EQ(error_of([&] {
              while (stream->next(events)) {}
            }),
            expected);
}

TEST(TraceStream, WhatItCannotReadExactlyIsLeftToTheWholeRead) {
  const fs::path dir = scratch_dir("trace_stream");
  EXPECT_EQ(TraceStream::open("-"), nullptr);
  EXPECT_EQ(TraceStream::open((dir / "missing.jsonl").string()), nullptr);
  write_text(dir / "empty.jsonl", "");
  EXPECT_EQ(TraceStream::open((dir / "empty.jsonl").string()), nullptr);
  write_text(dir / "blank.jsonl", "\n\n  \n");
  EXPECT_EQ(TraceStream::open((dir / "blank.jsonl").string()), nullptr);
  write_text(dir / "not-jsonl.jsonl", "{\"a\": 1}\n");
  EXPECT_EQ(TraceStream::open((dir / "not-jsonl.jsonl").string()), nullptr);
  write_text(dir / "bad-header.jsonl", "{\"fraglab_trace\": 2}\n");
  EXPECT_EQ(TraceStream::open((dir / "bad-header.jsonl").string()), nullptr);
  EXPECT_EQ(TraceStream::open(dir.string()), nullptr);  // a directory
  // A start state, and stack frames: read whole.
  EXPECT_EQ(TraceStream::open((fs::path(FRAGLAB_SOURCE_DIR) / "traces/samples/cutoff.jsonl").string()), nullptr);
  write_text(dir / "frames.jsonl",
             "{\"fraglab_trace\":1,\"frames\":[[\"a.py\",1,\"f\"]],\"stacks\":[[0]]}\n"
             "{\"op\":\"alloc\",\"id\":1,\"size\":8,\"stack\":0}\n");
  EXPECT_EQ(TraceStream::open((dir / "frames.jsonl").string()), nullptr);
  // gzip, by its name or by its bytes.
  write_jsonl_file(read_trace((dir / "frames.jsonl").string()), (dir / "t.jsonl.gz").string());
  EXPECT_EQ(TraceStream::open((dir / "t.jsonl.gz").string()), nullptr);
  fs::copy_file(dir / "t.jsonl.gz", dir / "gz-bytes.jsonl", fs::copy_options::overwrite_existing);
  EXPECT_EQ(TraceStream::open((dir / "gz-bytes.jsonl").string()), nullptr);
}

TEST(TraceStream, AHeaderLongerThanTheWindowGrowsIt) {
  const fs::path path = scratch_dir("trace_stream") / "long-header.jsonl";
  std::string header = "{\"fraglab_trace\":1,\"name\":\"long\",\"strings\":[";
  for (int i = 0; i < 2000; ++i) header += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  header += "]}\n";
  write_text(path, header + "{\"op\":\"mark\",\"label\":\"s5\",\"value\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":3}\n");
  expect_streams_as_read(path, 64, 64, 1);
  const Streamed s = stream_all(path, 64);
  EXPECT_EQ(s.trace.strings.size(), 2001u);  // s0..s1999 and the value "1"
}

}  // namespace
}  // namespace fraglab
