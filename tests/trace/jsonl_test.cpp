// Native JSONL: exact layout, exact round trips, both line readers agreeing, gzip files, and every
// kind of bad input reported with its line.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "fraglab/trace_io.hpp"
#include "support/events.hpp"
#include "support/line_mutation.hpp"
#include "trace/jsonl_event_line.hpp"

namespace fraglab {
namespace {

using test::alloc;
using test::with_op;

std::string to_jsonl(const Trace& t) {
  std::ostringstream out;
  write_jsonl(t, out);
  return std::move(out).str();
}

std::string spaced(const std::string& text);

Event mark(Trace& t, std::string_view label, std::string_view value_json) {
  Event e;
  e.op = Op::Mark;
  e.id = t.intern(label);
  e.size = t.intern(value_json);
  return e;
}

// A trace using every op and every optional field.
Trace full_trace() {
  Trace t;
  t.name = "full";
  t.source = "unit test";
  t.events.push_back(mark(t, "step", "0"));
  Event a = alloc(1, 4096);
  a.tag = t.intern("param");
  a.has_addr = true;
  a.addr = 0x7f0000000000;
  a.has_time = true;
  a.time_us = 1700000000000001;
  t.events.push_back(a);
  Event b = alloc(2, 3 * MiB, 0x55d0c4a3f1b0);
  b.device = 3;
  b.tag = t.intern("act");
  t.events.push_back(b);
  t.events.push_back(mark(t, "phase", "\"backward\""));
  t.events.push_back(with_op(Op::FreeRequested, 2));
  Event neg_time = with_op(Op::FreeCompleted, 2);
  neg_time.has_time = true;
  neg_time.time_us = -5;
  t.events.push_back(neg_time);
  t.events.push_back(with_op(Op::Free, 1));
  t.events.push_back(with_op(Op::EmptyCache, 0));
  t.events.push_back(mark(t, "converged", "true"));
  t.events.push_back(mark(t, "lr", "3.5e-4"));
  t.events.push_back(mark(t, "note", "null"));
  Event seg;
  seg.op = Op::SegmentAlloc;
  seg.has_addr = true;
  seg.addr = 0x7f0000000000;
  seg.size = 20 * MiB;
  t.events.push_back(seg);
  seg.op = Op::SegmentUnmap;
  seg.stream = 7;
  t.events.push_back(seg);
  Event oom;
  oom.op = Op::Oom;
  oom.size = 2 * GiB;
  oom.addr = 512 * MiB;  // device_free
  t.events.push_back(oom);
  return t;
}

constexpr const char* kFullText =
    R"({"fraglab_trace":1,"name":"full","source":"unit test"}
{"op":"mark","label":"step","value":0}
{"op":"alloc","id":1,"size":4096,"addr":139637976727552,"tag":"param","t":1700000000000001}
{"op":"alloc","id":2,"size":3145728,"stream":94355140637104,"tag":"act","device":3}
{"op":"mark","label":"phase","value":"backward"}
{"op":"free_requested","id":2}
{"op":"free_completed","id":2,"t":-5}
{"op":"free","id":1}
{"op":"empty_cache"}
{"op":"mark","label":"converged","value":true}
{"op":"mark","label":"lr","value":3.5e-4}
{"op":"mark","label":"note","value":null}
{"op":"segment_alloc","addr":139637976727552,"size":20971520,"stream":0}
{"op":"segment_unmap","addr":139637976727552,"size":20971520,"stream":7}
{"op":"oom","size":2147483648,"device_free":536870912}
)";

// A header with allocations 1 and 2 live from the start.
std::string header_with_live_ids() {
  return "{\"fraglab_trace\":1,\"initial_allocations\":[{\"id\":1,\"addr\":0,\"size\":8},"
         "{\"id\":2,\"addr\":8,\"size\":8}]}\n";
}

TEST(JsonlWrite, ExactLayoutForEveryOp) { EXPECT_EQ(to_jsonl(full_trace()), kFullText); }

TEST(JsonlRoundTrip, EveryOpAndFieldComesBackEqual) {
  Trace t = full_trace();
  std::string text = to_jsonl(t);
  Trace back = parse_jsonl(text, "full.jsonl");
  EXPECT_EQ(back, t);
  EXPECT_EQ(back.strings, (std::vector<std::string>{"step", "0", "param", "act", "phase", "\"backward\"", "converged",
                                                    "true", "lr", "3.5e-4", "note", "null"}));
  EXPECT_EQ(to_jsonl(back), text);
}

TEST(JsonlRoundTrip, OptionalFieldsOnEveryOp) {
  // Every field an Event can carry, set to a non-default value on every op where the format
  // allows it: whatever a reader fills in must survive a write and a read.
  Trace t;
  std::uint32_t tag = t.intern("x");
  auto decorate = [&](Event e) {
    e.stream = 11;
    e.tag = tag;
    e.has_time = true;
    e.time_us = 123;
    e.device = 2;
    return e;
  };
  auto with_addr = [](Event e) {
    e.has_addr = true;
    e.addr = 4096;
    return e;
  };
  Event free_req = with_addr(decorate(with_op(Op::FreeRequested, 1)));
  free_req.size = 100;
  Event free_done = with_addr(decorate(with_op(Op::FreeCompleted, 1)));
  free_done.size = 100;
  Event empty = with_addr(decorate(with_op(Op::EmptyCache, 5)));
  empty.size = 7;
  Event m = with_addr(decorate(mark(t, "step", "1")));
  Event seg = with_addr(decorate(with_op(Op::SegmentMap, 9)));
  seg.size = 2 * MiB;
  Event oom = decorate(with_op(Op::Oom, 9));
  oom.size = GiB;
  oom.addr = MiB;
  t.events = {with_addr(decorate(alloc(1, 100))),
              free_req,
              free_done,
              with_addr(decorate(alloc(2, 100))),
              with_addr(decorate(with_op(Op::Free, 2))),
              empty,
              m,
              seg,
              oom};
  std::string text = to_jsonl(t);
  EXPECT_NE(text.find(R"({"op":"empty_cache","id":5,"size":7,"stream":11,"addr":4096,"tag":"x",)"
                      R"("t":123,"device":2})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"op":"oom","size":1073741824,"device_free":1048576,"id":9,"stream":11,)"
                      R"("tag":"x","t":123,"device":2})"),
            std::string::npos)
      << text;
  Trace back = parse_jsonl(text, "x");
  EXPECT_EQ(back, t);
  EXPECT_EQ(parse_jsonl(spaced(text), "x"), t);
  EXPECT_EQ(to_jsonl(back), text);
}

TEST(JsonlRoundTrip, InitialStateAndHeaderFields) {
  Trace t;
  t.name = "cut";
  t.source = "pytorch-snapshot";
  t.allocator_conf = "expandable_segments:True,max_split_size_mb:128";
  t.allocator_conf_known = true;
  t.source_entries = 12345;
  t.initial.segments = {{0x1000000, 2 * MiB, 0, true, false}, {0x2000000, 20 * MiB, 9, false, true}};
  t.initial.allocations = {{5, 0x1000000, 1000, 1024, 0, false}, {6, 0x2000000, 3 * MiB, 0, 9, true}};
  t.events = {with_op(Op::Free, 5), with_op(Op::FreeCompleted, 6)};
  std::string text = to_jsonl(t);
  EXPECT_EQ(text, R"({"fraglab_trace":1,"name":"cut","source":"pytorch-snapshot",)"
                  R"("allocator_conf":"expandable_segments:True,max_split_size_mb:128",)"
                  R"("source_entries":12345,"initial_segments":[)"
                  R"({"addr":16777216,"size":2097152,"pool":"small"},)"
                  R"({"addr":33554432,"size":20971520,"stream":9,"expandable":true}],)"
                  R"("initial_allocations":[{"id":5,"addr":16777216,"size":1000,"block_size":1024},)"
                  R"({"id":6,"addr":33554432,"size":3145728,"stream":9,"free_requested":true}]})"
                  "\n"
                  R"({"op":"free","id":5})"
                  "\n"
                  R"({"op":"free_completed","id":6})"
                  "\n");
  Trace back = parse_jsonl(text, "cut.jsonl");
  EXPECT_EQ(back, t);
  EXPECT_EQ(to_jsonl(back), text);
}

TEST(JsonlRoundTrip, KnownButEmptyAllocatorConfIsKept) {
  Trace t;
  t.allocator_conf_known = true;
  std::string text = to_jsonl(t);
  EXPECT_EQ(text, "{\"fraglab_trace\":1,\"name\":\"\",\"source\":\"\",\"allocator_conf\":\"\"}\n");
  EXPECT_EQ(parse_jsonl(text, "x"), t);
}

TEST(JsonlRoundTrip, StringTableOutOfFirstUseOrderIsWrittenInTheHeader) {
  Trace t;
  t.intern("unused");
  std::uint32_t grad = t.intern("grad");
  std::uint32_t param = t.intern("param");
  Event a = alloc(1, 10);
  a.tag = param;  // first used after "grad" was interned: not the reader's natural order
  Event b = alloc(2, 10);
  b.tag = grad;
  t.events = {a, b};
  std::string text = to_jsonl(t);
  EXPECT_NE(text.find(R"("strings":["unused","grad","param"])"), std::string::npos) << text;
  Trace back = parse_jsonl(text, "x");
  EXPECT_EQ(back, t);
  EXPECT_EQ(to_jsonl(back), text);
}

TEST(JsonlRoundTrip, StringsNeedingEscapes) {
  Trace t;
  t.name = "quote\" backslash\\ tab\t nl\n ctl\x01 utf8 \xc3\xa9";
  Event a = alloc(1, 10);
  a.tag = t.intern("a\"b");
  t.events = {a, mark(t, "l\\x", "\"v\\\"\\u00e9\"")};
  std::string text = to_jsonl(t);
  EXPECT_NE(text.find(R"("name":"quote\" backslash\\ tab\t nl\n ctl\u0001 utf8 )"
                      "\xc3\xa9\""),
            std::string::npos)
      << text;
  Trace back = parse_jsonl(text, "x");
  EXPECT_EQ(back, t);
  EXPECT_EQ(back.strings[2], "\"v\\\"\\u00e9\"");  // the value's JSON text, escapes and all
  EXPECT_EQ(to_jsonl(back), text);
}

TEST(JsonlRoundTrip, MarkValueThatIsNotJsonTextIsWrittenAsAString) {
  Trace t;
  t.events = {mark(t, "phase", "forward")};  // a bare word: not JSON text
  std::string text = to_jsonl(t);
  EXPECT_NE(text.find(R"({"op":"mark","label":"phase","value":"forward"})"), std::string::npos);
  Trace back = parse_jsonl(text, "x");
  EXPECT_EQ(back.strings[1], "\"forward\"");
}

TEST(JsonlRead, MarkValuesKeepTheirExactText) {
  Trace t = parse_jsonl(
      "{\"fraglab_trace\":1}\n"
      "{\"op\":\"mark\",\"label\":\"a\",\"value\":1.50E+3}\n"
      "{\"op\": \"mark\", \"label\": \"b\", \"value\":  -0.0  }\n"
      "{\"op\":\"mark\",\"label\":\"c\",\"value\":\"x\\u0041\"}\n"
      "{ \"value\" : false , \"label\" : \"d\" , \"op\" : \"mark\" }\n",
      "m.jsonl");
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.string_at(static_cast<std::uint32_t>(t.events[0].size)), "1.50E+3");
  EXPECT_EQ(t.string_at(static_cast<std::uint32_t>(t.events[1].size)), "-0.0");
  EXPECT_EQ(t.string_at(static_cast<std::uint32_t>(t.events[2].size)), "\"x\\u0041\"");
  EXPECT_EQ(t.string_at(static_cast<std::uint32_t>(t.events[3].size)), "false");
  EXPECT_EQ(t.string_at(static_cast<std::uint32_t>(t.events[3].id)), "d");
  std::string text = to_jsonl(t);
  EXPECT_NE(text.find(R"({"op":"mark","label":"a","value":1.50E+3})"), std::string::npos);
  EXPECT_EQ(to_jsonl(parse_jsonl(text, "again")), text);
}

TEST(JsonlRead, LenientWhereTheFormatAllows) {
  // Blank lines, CRLF, spaces, keys in any order, unknown fields of any type, no final newline.
  std::string text =
      "\n  \n"
      "{ \"name\": \"hand\", \"fraglab_trace\": 1, \"comment\": [1, {\"x\": 2}] }\r\n"
      "\r\n"
      "{\"size\": 512, \"id\": 7, \"op\": \"alloc\", \"stack\": [{\"file\": \"a.py\"}]}\r\n"
      "\t\n"
      "{\"op\":\"alloc\",\"id\":8,\"size\":1024,\"extra\":\"x\",\"n\":1.5,\"ok\":true}\n"
      "{\"op\":\"free\",\"id\":7}";
  Trace t = parse_jsonl(text, "hand.jsonl");
  EXPECT_EQ(t.name, "hand");
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_EQ(t.events[0], alloc(7, 512));
  EXPECT_EQ(t.events[1], alloc(8, 1024));
  EXPECT_EQ(t.events[2], with_op(Op::Free, 7));
}

TEST(JsonlRead, EscapedKeysAndOpsMeanWhatTheySay) {
  Trace t = parse_jsonl(
      "{\"fraglab_trace\":1}\n"
      "{\"o\\u0070\":\"all\\u006fc\",\"id\":1,\"si\\u007ae\":8,\"tag\":\"a\\nb\"}\n",
      "x");
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].op, Op::Alloc);
  EXPECT_EQ(t.events[0].size, 8u);
  EXPECT_EQ(t.string_at(t.events[0].tag), "a\nb");
}

TEST(JsonlRead, FreeOfAnInitialAllocation) {
  Trace t = parse_jsonl(R"({"fraglab_trace":1,"initial_allocations":[{"id":1,"addr":0,"size":8},)"
                        R"({"id":2,"addr":8,"size":8,"free_requested":true}]}
{"op":"free","id":1}
{"op":"free_completed","id":2}
{"op":"alloc","id":1,"size":4}
)",
                        "x");
  EXPECT_EQ(t.events.size(), 3u);
  EXPECT_EQ(t.initial.allocations.size(), 2u);
}

// ---- the strict scanner and the simdjson reader must agree
// ---------------------------------------

// Same JSON, but with a space after every ':' and ',' outside strings: the strict scanner declines
// every such line, so simdjson reads it.
std::string spaced(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    out.push_back(c);
    if (c == '"' && (i == 0 || text[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && (c == ':' || c == ',')) out.push_back(' ');
  }
  return out;
}

TEST(JsonlRead, StrictScannerAndSimdjsonReadTheSameTrace) {
  Trace t = full_trace();
  std::string compact = to_jsonl(t);
  std::string loose = spaced(compact);
  ASSERT_NE(loose, compact);
  EXPECT_EQ(parse_jsonl(loose, "loose"), parse_jsonl(compact, "compact"));
  EXPECT_EQ(parse_jsonl(loose, "loose"), t);
}

// The result of reading `text`: the trace written back, or the error message.
std::string outcome(const std::string& text) {
  try {
    return to_jsonl(parse_jsonl(text, "m.jsonl"));
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(JsonlRead, MutatedLinesReadTheSameThroughBothReaders) {
  // A leading space makes the strict scanner decline a line, so simdjson reads it. For thousands
  // of randomly damaged event lines, both ways must give the same trace or the same error.
  std::string text = to_jsonl(full_trace());
  std::vector<std::string> lines;
  for (std::size_t pos = text.find('\n') + 1; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  const std::string alphabet = "0123456789\"{}[]:,-.eE \\tfnaxu\x01\xc3";
  std::mt19937_64 rng(20240611);
  std::size_t accepted_fast = 0;
  for (int round = 0; round < 6000; ++round) {
    std::string line = lines[rng() % lines.size()];
    testing::mutate_line(line, rng, alphabet, 3);
    detail::EventFields f;
    std::size_t length;
    if (detail::scan_event_line(line, f, length)) ++accepted_fast;
    // Frees refer to id 1 and 2: make them live first so that more lines get past the checks.
    std::string head = header_with_live_ids();
    ASSERT_EQ(outcome(head + line + "\n"), outcome(head + " " + line + "\n")) << line;
  }
  EXPECT_GT(accepted_fast, 500u);  // the comparison did exercise the fast path
}

TEST(JsonlEventLine, ReadsTheCompactFormAndStopsAtTheNewline) {
  detail::EventFields f;
  std::size_t length = 0;
  std::string_view text =
      "{\"op\":\"alloc\",\"id\":12345678901234567,\"size\":99,\"t\":-9223372036854775808,"
      "\"x\":null,\"tag\":\"act\"}  \r\n{\"op\":\"free\"}";
  ASSERT_TRUE(detail::scan_event_line(text, f, length));
  EXPECT_EQ(text.substr(length, 1), "\n");
  EXPECT_EQ(f.op, Op::Alloc);
  EXPECT_EQ(f.id, 12345678901234567u);
  EXPECT_EQ(f.size, 99u);
  EXPECT_EQ(f.time, INT64_MIN);
  EXPECT_EQ(f.tag, "act");
  EXPECT_FALSE(f.has(detail::EventFields::kStream));
}

TEST(JsonlEventLine, DeclinesAnythingOutsideItsSubset) {
  for (std::string_view line : {
           R"({"op":"alloc","size":1.0})",                   // a fraction
           R"({"op":"alloc","size":1e3})",                   // an exponent
           R"({"op":"alloc","size":012})",                   // a leading zero (not JSON)
           R"({"op":"alloc","size":12345678901234567890})",  // 20 digits
           R"({"op":"alloc","size":-1})",                    // negative where unsigned
           R"({"op":"alloc","t":9223372036854775808})",      // past int64
           R"({"op":"alloc","tag":"a\"b"})",                 // an escape
           "{\"op\":\"alloc\",\"tag\":\"\xc3\xa9\"}",        // non-ASCII
           R"({"op":"alloc","x":[1]})",                      // a non-scalar, even unknown
           R"({"op":"malloc"})",                             // an unknown op
           R"({ "op":"alloc"})",                             // whitespace
           R"({"op":"alloc"} x)",                            // trailing text
           R"({"op":"alloc",})",                             // a trailing comma
           R"({"op":"alloc")",                               // unterminated
           R"({"op":tru})",                                  // a bad literal
       }) {
    detail::EventFields f;
    std::size_t length;
    EXPECT_FALSE(detail::scan_event_line(line, f, length)) << line;
  }
}

// ---- bad input
// -------------------------------------------------------------------------------------

std::string error_of(std::string_view text) {
  try {
    parse_jsonl(text, "bad.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR(text, expected_prefix)                                                                         \
  do {                                                                                                              \
    std::string msg = error_of(text);                                                                               \
    EXPECT_EQ(msg.substr(0, std::string_view(expected_prefix).size()), expected_prefix) << "full message: " << msg; \
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;                                                            \
  } while (0)

const std::string kHeader = "{\"fraglab_trace\":1}\n";

TEST(JsonlErrors, HeaderProblems) {
  EXPECT_ERROR("", "bad.jsonl:1: empty input: expected a header line");
  EXPECT_ERROR("\n\n", "bad.jsonl:1: empty input");
  EXPECT_ERROR("{\"op\":\"alloc\",\"id\":1,\"size\":1}\n",
               "bad.jsonl:1: missing header: expected {\"fraglab_trace\": 1, ...} as the first line");
  EXPECT_ERROR("\n[1]\n", "bad.jsonl:2: not a JSON object (expected the header");
  EXPECT_ERROR("{\"fraglab_trace\":2}\n",
               "bad.jsonl:1: unsupported fraglab_trace version 2 (this build reads version 1)");
  EXPECT_ERROR("{\"fraglab_trace\":\"1\"}\n",
               "bad.jsonl:1: field 'fraglab_trace': expected the format version 1, got \"1\"");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"name\":5}\n", "bad.jsonl:1: field 'name': expected a string, got 5");
  EXPECT_ERROR("{\"fraglab_trace\":1} {}\n", "bad.jsonl:1: unexpected text after the JSON object");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"initial_segments\":[{\"addr\":0,\"size\":8,\"pool\":\"x\"}]}",
               "bad.jsonl:1: field 'initial_segments[0].pool': expected \"small\" or \"large\"");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"initial_allocations\":[{\"id\":1,\"addr\":0}]}",
               "bad.jsonl:1: initial_allocations[0]: missing field 'id', 'addr' or 'size'");
  EXPECT_ERROR(
      "{\"fraglab_trace\":1,\"initial_allocations\":[{\"id\":1,\"addr\":0,\"size\":8},"
      "{\"id\":1,\"addr\":8,\"size\":8}]}",
      "bad.jsonl:1: initial_allocations[1]: id 1 is already live");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"initial_allocations\":[{\"id\":1,\"addr\":0,\"size\":0}]}",
               "bad.jsonl:1: field 'initial_allocations[0].size': size 0");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"initial_segments\":{}}",
               "bad.jsonl:1: field 'initial_segments': expected an array");
}

TEST(JsonlErrors, NotJsonOrNotOneObjectPerLine) {
  EXPECT_ERROR(kHeader + "hello\n", "bad.jsonl:2: not a JSON object (expected one event per line)");
  EXPECT_ERROR(kHeader + "{\"op\":\"empty_cache\",\"x\":tru}\n", "bad.jsonl:2: field 'x': not valid JSON: tru");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"x\":nul}\n", "bad.jsonl:1: field 'x': not valid JSON: nul");
  EXPECT_ERROR(kHeader + "{\"op\":\"mark\",\"label\":\"a\",\"value\":01}\n",
               "bad.jsonl:2: field 'value': not a valid JSON scalar: 01");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\n\"size\":1}\n", "bad.jsonl:2: not valid JSON");
  EXPECT_ERROR(kHeader + "{\"op\":\"free\",\"id\":1 x}\n", "bad.jsonl:2: not valid JSON");
  EXPECT_ERROR(kHeader + "{\"op\":\"empty_cache\"}{\"op\":\"empty_cache\"}\n",
               "bad.jsonl:2: unexpected text after the JSON object (expected one object per line)");
  EXPECT_ERROR(kHeader + "[\"op\",\"alloc\"]\n", "bad.jsonl:2: not a JSON object (expected one event per line)");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1,\"tag\":\"\xff\"}\n",
               "bad.jsonl:2: not valid JSON");  // invalid UTF-8
}

TEST(JsonlErrors, LineNumbersCountBlankLines) {
  EXPECT_ERROR(kHeader + "\n   \n{\"op\":\"jump\"}\n",
               "bad.jsonl:4: unknown op \"jump\" (expected alloc, free, free_requested, "
               "free_completed, empty_cache, mark, segment_alloc, segment_free, segment_map, "
               "segment_unmap or oom)");
  EXPECT_ERROR("\r\n" + kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1}\r\n\r\n{\"op\": \"jump\"}",
               "bad.jsonl:5: unknown op \"jump\"");
}

TEST(JsonlErrors, MissingOrWronglyTypedFields) {
  EXPECT_ERROR(kHeader + "{\"id\":1}\n", "bad.jsonl:2: missing field 'op'");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"size\":1}\n", "bad.jsonl:2: alloc: missing field 'id' or 'size'");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1}\n", "bad.jsonl:2: alloc: missing field 'id' or 'size'");
  EXPECT_ERROR(kHeader + "{\"op\":\"free\"}\n", "bad.jsonl:2: free: missing field 'id'");
  EXPECT_ERROR(kHeader + "{\"op\":\"mark\",\"label\":\"step\"}\n",
               "bad.jsonl:2: mark: missing field 'label' or 'value'");
  EXPECT_ERROR(kHeader + "{\"op\":\"segment_map\",\"addr\":1}\n",
               "bad.jsonl:2: segment_map: missing field 'addr' or 'size'");
  EXPECT_ERROR(kHeader + "{\"op\":\"oom\",\"size\":1}\n", "bad.jsonl:2: oom: missing field 'size' or 'device_free'");
  EXPECT_ERROR(kHeader + "{\"op\":5}\n", "bad.jsonl:2: field 'op': expected a string, got 5");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":\"7\",\"size\":1}\n",
               "bad.jsonl:2: field 'id': expected an unsigned 64-bit integer, got \"7\"");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1.5}\n",
               "bad.jsonl:2: field 'size': expected an unsigned 64-bit integer, got 1.5");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1,\"tag\":3}\n",
               "bad.jsonl:2: field 'tag': expected a string, got 3");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1,\"t\":\"now\"}\n",
               "bad.jsonl:2: field 't': expected a signed 64-bit integer, got \"now\"");
  EXPECT_ERROR(kHeader + "{\"op\":\"mark\",\"label\":\"a\",\"value\":[1]}\n",
               "bad.jsonl:2: field 'value': expected a JSON scalar");
  EXPECT_ERROR(kHeader + "{\"op\":\"mark\",\"label\":\"a\",\"value\":{\"b\":1}}\n",
               "bad.jsonl:2: field 'value': expected a JSON scalar");
}

TEST(JsonlErrors, NegativeOverflowingAndImpossibleNumbers) {
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":-5}\n",
               "bad.jsonl:2: field 'size': expected an unsigned 64-bit integer, got -5");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":18446744073709551616,\"size\":1}\n",
               "bad.jsonl:2: field 'id': expected an unsigned 64-bit integer, got 18446744073709551616");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1,\"t\":9223372036854775808}\n",
               "bad.jsonl:2: field 't': expected a signed 64-bit integer");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":0}\n",
               "bad.jsonl:2: alloc: size 0 (expected a positive size)");
  EXPECT_ERROR(kHeader + "{\"op\":\"alloc\",\"id\":1,\"size\":1152921504606846976}\n",
               "bad.jsonl:2: alloc: impossible size 1152921504606846976 (expected < 2^60)");
  EXPECT_ERROR(kHeader + "{\"op\":\"segment_alloc\",\"addr\":0,\"size\":18446744073709551615}\n",
               "bad.jsonl:2: segment_alloc: impossible size");
  EXPECT_ERROR(kHeader + "{\"op\":\"empty_cache\",\"device\":4294967296}\n",
               "bad.jsonl:2: field 'device': 4294967296 is not a device index");
  // The largest values that are allowed.
  Trace t = parse_jsonl(kHeader +
                            "{\"op\":\"alloc\",\"id\":18446744073709551615,\"size\":1152921504606846975,"
                            "\"stream\":18446744073709551615,\"device\":4294967295}\n",
                        "ok");
  EXPECT_EQ(t.events[0].id, UINT64_MAX);
  EXPECT_EQ(t.events[0].size, (std::uint64_t{1} << 60) - 1);
  EXPECT_EQ(t.events[0].device, UINT32_MAX);
}

TEST(JsonlErrors, LifetimeViolationsNameTheLine) {
  const std::string a1 = "{\"op\":\"alloc\",\"id\":1,\"size\":8}\n";
  EXPECT_ERROR(kHeader + "{\"op\":\"free\",\"id\":9}\n",
               "bad.jsonl:2: free id 9: free of an id that is not live (unknown id or double free)");
  EXPECT_ERROR(kHeader + a1 + "{\"op\":\"free\",\"id\":1}\n{\"op\":\"free\",\"id\":1}\n",
               "bad.jsonl:4: free id 1: free of an id that is not live");
  EXPECT_ERROR(kHeader + a1 + a1, "bad.jsonl:3: alloc id 1: alloc of an id that is already live (duplicate live id)");
  EXPECT_ERROR(kHeader + a1 + "{\"op\":\"free_requested\",\"id\":1}\n{\"op\":\"free_requested\",\"id\":1}\n",
               "bad.jsonl:4: free_requested id 1: free_requested twice for the same allocation");
  EXPECT_ERROR(kHeader + a1 + "{\"op\":\"free_completed\",\"id\":1}\n",
               "bad.jsonl:3: free_completed id 1: free_completed of an allocation whose free was "
               "never requested");
  EXPECT_ERROR(kHeader + a1 + "{\"op\":\"free_requested\",\"id\":1}\n{\"op\":\"free\",\"id\":1}\n",
               "bad.jsonl:4: free id 1: free of an id whose free was already requested");
  EXPECT_ERROR(kHeader + "{\"op\":\"free_completed\",\"id\":3}\n",
               "bad.jsonl:2: free_completed id 3: free_completed of an id that is not live");
  EXPECT_ERROR("{\"fraglab_trace\":1,\"initial_allocations\":[{\"id\":4,\"addr\":0,\"size\":8}]}\n" + a1 +
                   "{\"op\":\"alloc\",\"id\":4,\"size\":8}\n",
               "bad.jsonl:3: alloc id 4: alloc of an id that is already live");
  // A freed id may be used again.
  EXPECT_EQ(parse_jsonl(kHeader + a1 + "{\"op\":\"free\",\"id\":1}\n" + a1, "ok").events.size(), 3u);
}

// ---- files
// ---------------------------------------------------------------------------------------

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fraglab-jsonl-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string slurp_raw(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void spit(const std::string& p, std::string_view bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_;
};

using JsonlFiles = TempDir;

TEST_F(JsonlFiles, PlainFileRoundTrip) {
  Trace t = full_trace();
  write_jsonl_file(t, path("full.jsonl"));
  EXPECT_EQ(slurp_raw(path("full.jsonl")), kFullText);
  EXPECT_EQ(read_trace(path("full.jsonl")), t);
}

TEST_F(JsonlFiles, GzipFileRoundTripIsDeterministic) {
  Trace t = full_trace();
  write_jsonl_file(t, path("a.jsonl.gz"));
  write_jsonl_file(t, path("b.jsonl.gz"));
  std::string gz = slurp_raw(path("a.jsonl.gz"));
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(gz, slurp_raw(path("b.jsonl.gz")));  // no timestamp in the gzip header
  EXPECT_EQ(read_file_bytes(path("a.jsonl.gz")), kFullText);
  EXPECT_EQ(read_trace(path("a.jsonl.gz")), t);
}

TEST_F(JsonlFiles, LargeGzipFileRoundTrip) {
  // Larger than the writer's and zlib's buffers, so both stream in several pieces.
  Trace t;
  t.name = "big";
  for (AllocId id = 1; id <= 60000; ++id) {
    t.events.push_back(alloc(id, id * 512, id % 3));
    if (id % 2 == 0) t.events.push_back(with_op(Op::Free, id - 1));
  }
  write_jsonl_file(t, path("big.jsonl.gz"));
  EXPECT_LT(slurp_raw(path("big.jsonl.gz")).size(), to_jsonl(t).size() / 3);
  EXPECT_EQ(read_trace(path("big.jsonl.gz")), t);
}

TEST_F(JsonlFiles, ConcatenatedGzipMembersReadAsOneStream) {
  // What `cat a.gz b.gz > c.gz` gives: gzip reads it as the concatenated text, and so do we.
  Trace t;
  t.name = "cat";
  t.events = {alloc(1, 8)};
  write_jsonl_file(t, path("one.gz"));
  std::string member = slurp_raw(path("one.gz"));
  spit(path("two.gz"), member + member);
  EXPECT_EQ(read_file_bytes(path("two.gz")), to_jsonl(t) + to_jsonl(t));
}

TEST_F(JsonlFiles, TruncatedOrCorruptGzipIsAnError) {
  write_jsonl_file(full_trace(), path("t.jsonl.gz"));
  std::string gz = slurp_raw(path("t.jsonl.gz"));
  spit(path("short.gz"), gz.substr(0, gz.size() - 12));
  try {
    read_trace(path("short.gz"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path("short.gz") + ": truncated gzip data (the file ends inside the compressed stream)");
  }
  std::string bad = gz;
  bad[bad.size() - 6] ^= 0x55;  // inside the CRC-32 / length trailer
  spit(path("crc.gz"), bad);
  EXPECT_THROW(read_trace(path("crc.gz")), InputError);
  bad = gz;
  bad[3] = 0x7f;  // reserved header flag bits
  spit(path("flags.gz"), bad);
  try {
    read_file_bytes(path("flags.gz"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(": corrupt gzip data ("), std::string::npos) << e.what();
  }
  spit(path("junk.gz"), gz + "junk");
  EXPECT_THROW(read_file_bytes(path("junk.gz")), InputError);
}

TEST_F(JsonlFiles, NameDefaultsToTheFileStem) {
  Trace t;
  t.events = {alloc(1, 8)};
  write_jsonl_file(t, path("my-run.jsonl.gz"));
  EXPECT_EQ(read_trace(path("my-run.jsonl.gz")).name, "my-run");
  write_jsonl_file(t, path("other.jsonl"));
  EXPECT_EQ(read_trace(path("other.jsonl")).name, "other");
}

TEST_F(JsonlFiles, ErrorsNameTheFile) {
  try {
    read_trace(path("missing.jsonl"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path("missing.jsonl") + ": cannot open: ", 0), 0u) << e.what();
  }
  spit(path("bad.jsonl"), kHeader + "{\"op\":\"free\",\"id\":1}\n");
  try {
    read_trace(path("bad.jsonl"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path("bad.jsonl") + ":2: free id 1", 0), 0u) << e.what();
  }
  EXPECT_THROW(write_jsonl_file(Trace{}, path("no-such-dir/x.jsonl")), InputError);
}

TEST(JsonlSamples, ShippedSamplesAreValidCanonicalAndSummarizeAsDocumented) {
  // traces/samples/README.md quotes these figures.
  struct Expected {
    const char* file;
    std::uint64_t events, allocs, frees, streams, peak, total, max;
  };
  for (const Expected& x : {
           Expected{"two-phase.jsonl", 86, 40, 36, 1, 244323328, 686841344, 55574528},
           Expected{"streams.jsonl", 48, 18, 18, 2, 77611520, 318850048, 50332160},
           Expected{"cutoff.jsonl", 12, 2, 5, 1, 92278688, 92274688, 73400320},
       }) {
    std::string path = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/" + x.file;
    Trace t = read_trace(path);
    EXPECT_NO_THROW(validate_trace(t, path));
    EXPECT_EQ(to_jsonl(t), read_file_bytes(path)) << x.file << " is not in canonical form";
    TraceSummary s = summarize(t);
    EXPECT_EQ(s.events, x.events) << x.file;
    EXPECT_EQ(s.allocs, x.allocs) << x.file;
    EXPECT_EQ(s.frees, x.frees) << x.file;
    EXPECT_EQ(s.streams, x.streams) << x.file;
    EXPECT_EQ(s.peak_requested, x.peak) << x.file;
    EXPECT_EQ(s.total_requested, x.total) << x.file;
    EXPECT_EQ(s.max_request, x.max) << x.file;
  }
}

TEST_F(JsonlFiles, PickleBytesGoToTheSnapshotReader) {
  // 0x80 starts every pickle of protocol >= 2: whatever the snapshot reader says about this one
  // (an empty list is no snapshot), the JSONL reader must not be the one answering.
  spit(path("snap.pickle"), std::string("\x80\x02]q\x00.", 6));
  try {
    read_trace(path("snap.pickle"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("missing header"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fraglab
