// The canonical-line reader (src/trace/jsonl_canonical_line.hpp): on every line it accepts it must
// fill exactly what the strict scanner fills, it must decline everything outside the writer's
// exact shape, and whole traces must read the same as through simdjson alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"
#include "support/command.hpp"
#include "support/line_mutation.hpp"
#include "trace/jsonl_canonical_line.hpp"
#include "trace/jsonl_event_line.hpp"

namespace fraglab {
namespace {

using detail::EventFields;

std::string to_jsonl(const Trace& t) {
  std::ostringstream out;
  write_jsonl(t, out);
  return std::move(out).str();
}

// `line` followed by its '\n' and then bytes that would change any number, string or key the
// reader ran on into (digits, letters, quotes): it must stop at the line's end all the same.
std::string padded(std::string_view line) {
  std::string s(line);
  s += '\n';
  while (s.size() < line.size() + 1 + detail::kCanonicalRoom) s += "7a\"}:,9";
  return s;
}

struct Scan {
  bool accepted = false;
  EventFields f;
  std::size_t length = 0;
  std::string tag;  // f.tag's text (f.tag points into a buffer gone after the scan)
};

Scan canonical(std::string_view line) {
  std::string buf = padded(line);
  Scan r;
  const char* newline = nullptr;
  r.accepted = detail::scan_canonical_line(buf.data(), r.f, newline);
  if (r.accepted) r.length = static_cast<std::size_t>(newline - buf.data());
  if (r.accepted && r.f.has(EventFields::kTag)) r.tag = r.f.tag;
  return r;
}

Scan strict(std::string_view line) {
  std::string buf = std::string(line) + "\n";
  Scan r;
  r.accepted = detail::scan_event_line(buf, r.f, r.length);
  if (r.accepted && r.f.has(EventFields::kTag)) r.tag = r.f.tag;
  return r;
}

// The slots both readers set, compared one by one (unset slots are uninitialised).
void expect_same_fields(const Scan& x, const Scan& y, std::string_view line) {
  const EventFields& a = x.f;
  const EventFields& b = y.f;
  ASSERT_EQ(a.seen, b.seen) << line;
  using F = EventFields;
  if (a.has(F::kOp)) {
    EXPECT_EQ(a.op, b.op) << line;
  }
  if (a.has(F::kId)) {
    EXPECT_EQ(a.id, b.id) << line;
  }
  if (a.has(F::kSize)) {
    EXPECT_EQ(a.size, b.size) << line;
  }
  if (a.has(F::kStream)) {
    EXPECT_EQ(a.stream, b.stream) << line;
  }
  if (a.has(F::kAddr)) {
    EXPECT_EQ(a.addr, b.addr) << line;
  }
  if (a.has(F::kTag)) {
    EXPECT_EQ(x.tag, y.tag) << line;
  }
  if (a.has(F::kTime)) {
    EXPECT_EQ(a.time, b.time) << line;
  }
  if (a.has(F::kDevice)) {
    EXPECT_EQ(a.device, b.device) << line;
  }
  if (a.has(F::kStack)) {
    EXPECT_EQ(a.stack, b.stack) << line;
  }
}

// Every line the canonical reader accepts, the strict scanner accepts with the same slots and end.
// Returns how many it accepted.
std::size_t expect_agreement(const std::string& text) {
  std::size_t accepted = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    const Scan c = canonical(line);
    if (!c.accepted) continue;
    ++accepted;
    const Scan s = strict(line);
    EXPECT_TRUE(s.accepted) << line;
    EXPECT_EQ(c.length, line.size()) << line;
    EXPECT_EQ(s.length, line.size()) << line;
    expect_same_fields(c, s, line);
  }
  return accepted;
}

// Spaces after every ':' and ',' outside strings: the fast readers decline every line, so
// simdjson reads the whole trace.
std::string spaced(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    out.push_back(c);
    if (c == '"' && (i == 0 || text[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && (c == ':' || c == ',')) out.push_back(' ');
  }
  return out;
}

Trace generated(const char* model, Framework framework) {
  WorkloadOptions o;
  o.model = builtin_model(model);
  o.framework = framework;
  o.micro_batch = 1;
  o.steps = 2;
  return generate_trace(o);
}

TEST(JsonlCanonicalLine, ShippedAndGeneratedTracesReadTheSameAsThroughSimdjson) {
  std::vector<std::pair<std::string, std::string>> texts;  // name, text
  for (const char* f : {"two-phase.jsonl", "streams.jsonl", "cutoff.jsonl", "anatomy.jsonl", "concat-before.jsonl",
                        "concat-after.jsonl"})
    texts.emplace_back(f, testing::read_text(std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/" + f));
  texts.emplace_back("gpt2-xl zero3", to_jsonl(generated("gpt2-xl", Framework::Zero3)));
  texts.emplace_back("t5-3b fsdp1", to_jsonl(generated("t5-3b", Framework::Fsdp1)));
  for (const auto& [name, text] : texts) {
    SCOPED_TRACE(name);
    const std::size_t events = parse_jsonl(text, name).events.size();
    const std::size_t accepted = expect_agreement(text);
    // The writer's alloc and free lines are most of every trace: the fast reader must take them.
    EXPECT_GT(accepted * 2, events);
    EXPECT_EQ(parse_jsonl(text, name), parse_jsonl(spaced(text), name));
  }
}

TEST(JsonlCanonicalLine, ReadsTheWritersShapeWithHandCheckedValues) {
  const Scan a = canonical(R"({"op":"alloc","id":7,"size":1048576,"stream":94000000000000,"addr":139637976727552,)"
                           R"("tag":"act","t":1700000000000001,"device":3,"stack":12})");
  ASSERT_TRUE(a.accepted);
  EXPECT_EQ(a.f.op, Op::Alloc);
  EXPECT_EQ(a.f.id, 7u);
  EXPECT_EQ(a.f.size, 1048576u);
  EXPECT_EQ(a.f.stream, 94000000000000u);
  EXPECT_EQ(a.f.addr, 139637976727552u);
  EXPECT_EQ(a.tag, "act");
  EXPECT_EQ(a.f.time, 1700000000000001);
  EXPECT_EQ(a.f.device, 3u);
  EXPECT_EQ(a.f.stack, 12u);

  const Scan f = canonical(R"({"op":"free_completed","id":0,"t":-9223372036854775808})");
  ASSERT_TRUE(f.accepted);
  EXPECT_EQ(f.f.op, Op::FreeCompleted);
  EXPECT_EQ(f.f.id, 0u);
  EXPECT_EQ(f.f.time, INT64_MIN);
  EXPECT_EQ(f.f.seen, EventFields::kOp | EventFields::kId | EventFields::kTime);

  const Scan r = canonical(R"({"op":"free_requested","id":9999999999999999999})");  // 19 digits
  ASSERT_TRUE(r.accepted);
  EXPECT_EQ(r.f.op, Op::FreeRequested);
  EXPECT_EQ(r.f.id, 9999999999999999999u);

  const Scan q = canonical(std::string(R"({"op":"free","id":3,"tag":" !#~)") + "\x7f\"}");
  ASSERT_TRUE(q.accepted);
  EXPECT_EQ(q.tag, " !#~\x7f");
}

TEST(JsonlCanonicalLine, EveryDigitCountAgreesWithStrtoull) {
  std::mt19937_64 rng(1811);
  for (int digits = 1; digits <= 19; ++digits) {
    for (int round = 0; round < 200; ++round) {
      std::string n(1, static_cast<char>('1' + rng() % 9));
      while (n.size() < static_cast<std::size_t>(digits)) n += static_cast<char>('0' + rng() % 10);
      const Scan s = canonical(R"({"op":"alloc","size":)" + n + "}");
      ASSERT_TRUE(s.accepted) << n;
      EXPECT_EQ(s.f.size, std::stoull(n)) << n;
      const Scan t = canonical(R"({"op":"free","t":-)" + n + "}");
      if (std::stoull(n) <= static_cast<std::uint64_t>(INT64_MAX)) {
        ASSERT_TRUE(t.accepted) << n;
        EXPECT_EQ(t.f.time, -std::stoll(n)) << n;
      } else if (std::stoull(n) > static_cast<std::uint64_t>(INT64_MAX) + 1) {
        EXPECT_FALSE(t.accepted) << n;  // below int64: left to simdjson, which reports it
      }
    }
  }
}

TEST(JsonlCanonicalLine, DeclinesEverythingElse) {
  for (std::string_view line : {
           R"({"op":"alloc","id":18446744073709551615})",  // 2^64-1: 20 digits
           R"({"op":"alloc","id":10000000000000000000})",  // 20 digits
           R"({"op":"alloc","t":9223372036854775808})",    // past int64
           R"({"op":"alloc","t":-9223372036854775809})",   // below int64
           R"({"op":"alloc","id":-1})",                    // negative where unsigned
           R"({"op":"alloc","id":01})",                    // leading zero
           R"({"op":"alloc","id":00000000})",              // leading zeros, a whole word
           R"({"op":"alloc","id":1.5})",                   // a fraction
           R"({"op":"alloc","id":1e3})",                   // an exponent
           R"({"op":"alloc","id":})",                      // no value
           R"({"op":"alloc","tag":"a\"b"})",               // an escape
           "{\"op\":\"alloc\",\"tag\":\"\xc3\xa9\"}",      // non-ASCII
           "{\"op\":\"alloc\",\"tag\":\"a\tb\"}",          // a control byte
           R"({"op":"alloc","size":1,"id":2})",            // keys out of the writer's order
           R"({"op":"alloc","id":1,"id":2})",              // a duplicate key
           R"({"id":1,"op":"free"})",                      // op not first
           R"({"op":"free","id":1,"device_free":5})",      // a key only sharing a prefix
           R"({"op":"free","id":1,"x":1})",                // an unknown key
           R"({"op": "free","id":1})",                     // whitespace
           R"({"op":"free","id":1} )",                     // trailing whitespace
           "{\"op\":\"free\",\"id\":1}\r",                 // a CR before the newline
           R"({"op":"free","id":1}x)",                     // trailing text
           R"({"op":"free","id":1,})",                     // a trailing comma
           R"({"op":"free","id":1)",                       // unterminated
           R"({"op":"mark","label":"step","value":1})",    // ops left to the strict scanner
           R"({"op":"segment_alloc","addr":0,"size":2,"stream":0})",
           R"({"op":"oom","size":1,"device_free":0})",
           R"({"op":"empty_cache"})",
           R"({"op":"freed","id":1})",  // not an op
           R"({"op":"fre","id":1})",
           R"({"op":"alloc\u0000","id":1})",
           "",
       }) {
    EXPECT_FALSE(canonical(line).accepted) << line;
  }
  // A tag longer than kMaxTag + 7 bytes is left to the strict scanner (which bounds a line's reads).
  const std::string long_tag(detail::kMaxTag + 8, 'x');
  EXPECT_FALSE(canonical(R"({"op":"alloc","id":1,"size":2,"tag":")" + long_tag + "\"}").accepted);
}

// Randomly damaged writer lines: whatever the canonical reader accepts, the strict scanner reads
// the same way, and a whole read gives the same trace or error as simdjson alone.
TEST(JsonlCanonicalLine, MutatedLinesAgreeWithTheStrictScannerAndSimdjson) {
  const std::string text = to_jsonl(generated("gpt2-xl", Framework::Fsdp1));
  std::vector<std::string> lines;
  for (std::size_t pos = text.find('\n') + 1; pos < text.size();) {
    const std::size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    if (canonical(line).accepted) lines.push_back(line);
    pos = end + 1;
  }
  ASSERT_GT(lines.size(), 100u);
  const std::string alphabet = "0123456789\"{}[]:,-.eE \\tfnaxu\x01\xc3\n";
  const std::string head = "{\"fraglab_trace\":1}\n";
  const std::string tail(detail::kCanonicalRoom, '\n');  // blank lines: room for the fast reader
  std::mt19937_64 rng(20261126);
  std::size_t accepted = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string line = lines[rng() % lines.size()];
    testing::mutate_line(line, rng, alphabet, 2);
    if (line.find('\n') != std::string::npos) continue;  // one line at a time
    const Scan c = canonical(line);
    if (c.accepted) {
      ++accepted;
      const Scan s = strict(line);
      ASSERT_TRUE(s.accepted) << line;
      expect_same_fields(c, s, line);
    }
    // Whole reads: the fast path (room after the line) against simdjson (a leading space), the
    // same trace or the same error. Frees of unknown ids fail the same way either way.
    std::string fast, slow;
    try {
      fast = to_jsonl(parse_jsonl(head + line + "\n" + tail, "m.jsonl"));
    } catch (const InputError& e) {
      fast = std::string("error: ") + e.what();
    }
    try {
      slow = to_jsonl(parse_jsonl(head + " " + line + "\n" + tail, "m.jsonl"));
    } catch (const InputError& e) {
      slow = std::string("error: ") + e.what();
    }
    ASSERT_EQ(fast, slow) << line;
  }
  EXPECT_GT(accepted, 300u);  // the comparison did exercise the fast reader
}

// Outcome of reading `line` after `head` and a live id 1: the trace written back, or the error.
// `fast` leaves kCanonicalRoom blank lines after it (the canonical reader and the event builder
// inlined for it take the line); otherwise a leading space sends the line to simdjson and the
// general make_event().
std::string read_outcome(const std::string& head, const std::string& line, bool fast) {
  const std::string text = head + "{\"op\":\"alloc\",\"id\":1,\"size\":512,\"t\":0}\n" + (fast ? "" : " ") + line +
                           "\n" + std::string(detail::kCanonicalRoom, '\n');
  try {
    return to_jsonl(parse_jsonl(text, "c.jsonl"));
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

// Every check the event builder for canonical lines makes, on both sides of its bound: the same
// trace or the same message as the general path, and the messages as the README's rules say.
TEST(JsonlCanonicalLine, EventsBuiltFromCanonicalLinesMatchTheGeneralPathAtEveryCheck) {
  const std::string plain = "{\"fraglab_trace\":1}\n";
  const std::string stacks = R"({"fraglab_trace":1,"frames":[["a.py",1,"f"]],"stacks":[[0]]})"
                             "\n";
  struct Case {
    const std::string& head;
    std::string line;
    std::string error;  // empty: read
  };
  const std::vector<Case> cases = {
      {plain, R"({"op":"alloc","id":2,"size":1})", ""},
      {plain, R"({"op":"alloc","id":2,"size":1152921504606846975})", ""},  // 2^60 - 1
      {plain, R"({"op":"alloc","id":2,"size":1152921504606846976})",
       "c.jsonl:3: alloc: impossible size 1152921504606846976 (expected < 2^60)"},
      {plain, R"({"op":"alloc","id":2,"size":0})", "c.jsonl:3: alloc: size 0 (expected a positive size)"},
      {plain, R"({"op":"alloc","id":2})", "c.jsonl:3: alloc: missing field 'id' or 'size'"},
      {plain, R"({"op":"alloc","size":8})", "c.jsonl:3: alloc: missing field 'id' or 'size'"},
      {plain, R"({"op":"alloc","id":1,"size":8})",
       "c.jsonl:3: alloc id 1: alloc of an id that is already live (duplicate live id)"},
      {plain, R"({"op":"alloc","id":2,"size":8,"stream":7,"addr":4096,"t":-5,"device":4294967295})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"device":4294967296})",
       "c.jsonl:3: field 'device': 4294967296 is not a device index (expected < 2^32)"},
      {plain, R"({"op":"alloc","id":2,"size":8,"tag":""})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"tag":"a"})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"tag":"abcdefg"})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"tag":"abcdefgh"})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"tag":"abcdefghi"})", ""},
      {plain, R"({"op":"free","id":1,"size":3,"tag":"x"})", ""},
      {plain, R"({"op":"free","size":3})", "c.jsonl:3: free: missing field 'id'"},
      {plain, R"({"op":"free","id":7})",
       "c.jsonl:3: free id 7: free of an id that is not live (unknown id or double free)"},
      {plain, R"({"op":"free_completed","id":1})",
       "c.jsonl:3: free_completed id 1: free_completed of an allocation whose free was never requested"},
      {plain, R"({"op":"free_requested","t":1})", "c.jsonl:3: free_requested: missing field 'id'"},
      {plain, R"({"op":"free_requested","id":1})", ""},
      {plain, R"({"op":"alloc","id":2,"size":8,"stack":5})", ""},  // no "stacks" in the header: ignored
      {stacks, R"({"op":"alloc","id":2,"size":8,"stack":0})", ""},
      {stacks, R"({"op":"alloc","id":2,"size":8})", ""},
      {stacks, R"({"op":"alloc","id":2,"size":8,"stack":1})",
       "c.jsonl:3: field 'stack': 1 out of range (the header lists 1 stacks)"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(canonical(c.line).accepted) << c.line;  // the fast reader does take the line
    const std::string fast = read_outcome(c.head, c.line, true);
    EXPECT_EQ(fast, read_outcome(c.head, c.line, false)) << c.line;
    if (c.error.empty()) {
      EXPECT_EQ(fast.rfind("error: ", 0), std::string::npos) << fast;
    } else {
      EXPECT_EQ(fast, "error: " + c.error);
    }
  }
  // A pair the fast path builds in turn: the request marks the id, the completion ends it.
  const std::string pair =
      std::string(R"({"op":"free_requested","id":1})") + "\n" + R"({"op":"free_completed","id":1})";
  EXPECT_EQ(read_outcome(plain, pair, true), read_outcome(plain, pair, false));
  const std::string twice = std::string(R"({"op":"free_requested","id":1})") + "\n" + R"({"op":"free","id":1})";
  EXPECT_EQ(read_outcome(plain, twice, true),
            "error: c.jsonl:4: free id 1: free of an id whose free was already requested (expected free_completed)");
}

// The event vector is sized once from a count of the remaining lines (line_count.hpp), exact: the
// capacity is one more than the lines after the header (a final line without '\n' would count as
// one).
TEST(JsonlCanonicalLine, EventVectorIsSizedFromAnExactLineCount) {
  for (const std::size_t lines : {0, 1, 2, 15, 16, 17, 63, 64, 65, 66, 67, 300, 4079, 4080, 4081, 9000}) {
    std::string events = "{\"fraglab_trace\":1}\n", blanks = events;
    for (std::size_t i = 0; i < lines; ++i) {
      events += "{\"op\":\"empty_cache\"}\n";  // 21 bytes
      blanks += std::string(15, ' ') + "\n";   // 16 bytes: every '\n' in one lane, 255 per batch
    }
    const Trace t = parse_jsonl(events, "count.jsonl");
    EXPECT_EQ(t.events.size(), lines);
    EXPECT_EQ(t.events.capacity(), lines + 1) << lines;
    EXPECT_EQ(parse_jsonl(blanks, "blank.jsonl").events.capacity(), lines + 1) << lines;
  }
}

// Progress is reported before the line that follows every 65,536th line (the header included),
// with that line's offset, and once at the end: runs of canonical lines stop for it like any
// other reader. The expected calls are worked out from the text's own line starts.
TEST(JsonlCanonicalLine, ProgressComesBeforeTheLineAfterEvery65536Lines) {
  std::string text = "{\"fraglab_trace\":1}\n";
  for (int i = 1; i <= 200'000; ++i) {
    // Mostly canonical lines; every 997th has a space (simdjson), every 1009th is a mark (the
    // strict scanner), so the runs break at many places, some just before a report.
    const std::string id = std::to_string(i);
    if (i % 997 == 0) {
      text += "{\"op\": \"alloc\",\"id\":" + id + ",\"size\":512}\n";
    } else if (i % 1009 == 0) {
      text += "{\"op\":\"mark\",\"label\":\"step\",\"value\":" + id + "}\n";
    } else {
      text +=
          "{\"op\":\"alloc\",\"id\":" + id + ",\"size\":" + std::to_string(512 * (i % 7 + 1)) + ",\"t\":" + id + "}\n";
    }
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected;
  std::size_t lines_read = 1;  // the header
  for (std::size_t pos = text.find('\n') + 1; pos < text.size(); pos = text.find('\n', pos) + 1) {
    if (lines_read % 65536 == 0) expected.emplace_back(pos, text.size());
    ++lines_read;
  }
  expected.emplace_back(text.size(), text.size());
  ASSERT_EQ(expected.size(), 4u);  // after lines 65,536, 131,072 and 196,608, and at the end
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  const Trace t =
      parse_jsonl(text, "p.jsonl", [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(t.events.size(), 200'000u);
  EXPECT_EQ(calls, expected);
}

}  // namespace
}  // namespace fraglab
