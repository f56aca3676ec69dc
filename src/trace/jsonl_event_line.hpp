// One JSONL event line, read into plain slots before its op is interpreted (JSON objects are
// unordered: "op" may come last). Three readers fill these slots:
//  - scan_canonical_line() (jsonl_canonical_line.hpp): only the writer's exact alloc/free* lines,
//    tried first;
//  - scan_event_line() below: a strict, allocation-free scanner for the compact form writers emit
//    (jsonl_writer.cpp), in any key order and for every op: the lines the first one declines;
//  - the simdjson On-Demand reader in jsonl_reader.cpp, for every line the scanner declines.
//
// Invariants:
//  - the scanner accepts only a subset of JSON whose meaning is unambiguous: `{`, then
//    `"key":value` pairs separated by `,` with no whitespace, `}`, then only whitespace. Keys are
//    ASCII without escapes; values are strings of printable ASCII without escapes, integers
//    (JSON grammar, at most 19 digits, so they cannot overflow), true, false or null;
//  - on anything else it returns false having decided nothing, and simdjson reads the line
//    again: so every error message, and every unusual but valid line, comes from one reader;
//  - all readers fill the same slots the same way (last duplicate key wins, unknown keys with
//    scalar values are ignored), which the tests check by reading lines both ways.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "fraglab/trace.hpp"

namespace fraglab::detail {

struct EventFields {
  enum : std::uint32_t {
    kOp = 1 << 0,
    kId = 1 << 1,
    kSize = 1 << 2,
    kStream = 1 << 3,
    kAddr = 1 << 4,
    kTag = 1 << 5,
    kTime = 1 << 6,
    kDevice = 1 << 7,
    kLabel = 1 << 8,
    kValue = 1 << 9,
    kDeviceFree = 1 << 10,
    kStack = 1 << 11,
  };
  // A slot holds a value only when its bit is in `seen`: the others are left uninitialised, since
  // zeroing this struct for every line was a measurable part of the ingest time.
  std::uint32_t seen = 0;
  Op op;
  std::string_view tag, label;  // unescaped text
  std::string_view value;       // a mark value's exact JSON text
  std::uint64_t id, size, stream, addr, device, device_free, stack;
  std::int64_t time;
  bool has(std::uint32_t bit) const { return (seen & bit) != 0; }
  std::uint64_t get(std::uint32_t bit, const std::uint64_t& slot) const { return has(bit) ? slot : 0; }
};

// The op spelled by `name` (no quotes); alloc and free, most lines of any trace, come first.
inline std::optional<Op> event_op(std::string_view name) {
  if (name == "alloc") return Op::Alloc;
  if (name == "free") return Op::Free;
  return op_from_name(name);
}

namespace event_line_impl {

struct Cursor {
  const char* p;
  const char* end;
  bool at(char c) const { return p < end && *p == c; }
};

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// At c.p: `lit` (e.g. a key's rest, its closing quote and colon)? Then step over it. A byte loop
// of constant length, which the compiler unrolls (it left std::memcmp as a library call).
template <std::size_t N>
[[gnu::always_inline]] inline bool skip_literal(Cursor& c, const char (&lit)[N]) {
  constexpr std::size_t n = N - 1;
  if (static_cast<std::size_t>(c.end - c.p) < n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (c.p[i] != lit[i]) return false;
  c.p += n;
  return true;
}

// A string without escapes or control characters, ASCII only (other bytes would need UTF-8
// validation: simdjson does that). Returns its content.
[[gnu::always_inline]] inline bool scan_string(Cursor& c, std::string_view& out) {
  if (!c.at('"')) return false;
  const char* begin = ++c.p;
  while (c.p < c.end) {
    auto u = static_cast<unsigned char>(*c.p);
    if (u == '"') {
      out = std::string_view(begin, static_cast<std::size_t>(c.p - begin));
      ++c.p;
      return true;
    }
    if (u < 0x20 || u >= 0x80 || u == '\\') return false;
    ++c.p;
  }
  return false;
}

// Eight ASCII digits at p, as a number (the SWAR method simdjson also uses): addresses and
// microsecond times have 15-16 digits, and digit-at-a-time parsing was the scanner's hot spot.
inline bool eight_digits(const char* p, std::uint64_t& out) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  // Every byte in '0'..'9': high nibble 3, and adding 6 does not carry out of the low nibble.
  if (((v & 0xF0F0F0F0F0F0F0F0ull) | (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) !=
      0x3333333333333333ull)
    return false;
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  v = (v & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;
  v = (v & 0x00FF00FF00FF00FFull) * 6553601 >> 16;
  out = (v & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32;
  return true;
}

// A JSON integer of at most 19 digits (below 10^19 < 2^64: no overflow to check). Fractions and
// exponents are declined, as are leading zeros (not JSON).
[[gnu::always_inline]] inline bool scan_integer(Cursor& c, bool& negative, std::uint64_t& magnitude) {
  negative = c.at('-');
  if (negative) ++c.p;
  if (c.p >= c.end || !is_digit(*c.p)) return false;
  const char* begin = c.p;
  std::uint64_t v = 0, eight;
  while (c.end - c.p >= 8 && eight_digits(c.p, eight)) {
    v = v * 100000000 + eight;  // wraps only past 19 digits, which are declined below
    c.p += 8;
  }
  while (c.p < c.end && is_digit(*c.p)) {
    v = v * 10 + static_cast<std::uint64_t>(*c.p - '0');
    ++c.p;
  }
  std::size_t digits = static_cast<std::size_t>(c.p - begin);
  if (digits > 19 || (digits > 1 && *begin == '0')) return false;
  if (c.p < c.end && (*c.p == '.' || *c.p == 'e' || *c.p == 'E')) return false;
  magnitude = v;
  return true;
}

[[gnu::always_inline]] inline bool scan_u64(Cursor& c, std::uint64_t& out) {
  bool negative;
  return scan_integer(c, negative, out) && !negative;
}

[[gnu::always_inline]] inline bool scan_i64(Cursor& c, std::int64_t& out) {
  bool negative;
  std::uint64_t m;
  if (!scan_integer(c, negative, m)) return false;
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(INT64_MAX);
  if (m > kMax + (negative ? 1 : 0)) return false;
  out = negative ? static_cast<std::int64_t>(~m + 1) : static_cast<std::int64_t>(m);
  return true;
}

// Any scalar this scanner understands; returns its exact text.
inline bool scan_scalar(Cursor& c, std::string_view& text) {
  const char* begin = c.p;
  if (c.p >= c.end) return false;
  char first = *c.p;
  bool ok;
  if (first == '"') {
    std::string_view ignored;
    ok = scan_string(c, ignored);
  } else if (first == '-' || is_digit(first)) {
    bool negative;
    std::uint64_t m;
    ok = scan_integer(c, negative, m);
  } else {
    std::string_view rest(c.p, static_cast<std::size_t>(c.end - c.p));
    std::size_t n = rest.starts_with("true") ? 4 : rest.starts_with("false") ? 5 : rest.starts_with("null") ? 4 : 0;
    c.p += n;
    ok = n != 0;
  }
  text = std::string_view(begin, static_cast<std::size_t>(c.p - begin));
  return ok;
}

[[gnu::always_inline]] inline bool scan_op(Cursor& c, EventFields& f) {
  f.seen |= EventFields::kOp;
  // Most lines are allocs and frees: match them whole, quotes included.
  if (skip_literal(c, "\"alloc\"")) {
    f.op = Op::Alloc;
    return true;
  }
  if (skip_literal(c, "\"free\"")) {
    f.op = Op::Free;
    return true;
  }
  std::string_view name;
  if (!scan_string(c, name)) return false;
  std::optional<Op> op = event_op(name);
  if (!op) return false;  // simdjson's reader reports the unknown op
  f.op = *op;
  return true;
}

// c.p is just past a key's opening quote. Known keys are matched whole, with their closing quote
// and colon, by a switch on the first letter; then the value is read into the key's slot.
// Inlined into the line loop: as a call it paid a frame per field, ~6 per line.
[[gnu::always_inline]] inline bool scan_field(Cursor& c, EventFields& f) {
  using F = EventFields;
  // Each known key marks its slot as seen, then reads the value (false = declined).
  if (c.p < c.end) {
    switch (*c.p) {
      case 'o':
        if (skip_literal(c, "op\":")) return scan_op(c, f);
        break;
      case 'i':
        if (skip_literal(c, "id\":")) {
          f.seen |= F::kId;
          return scan_u64(c, f.id);
        }
        break;
      case 's':
        if (skip_literal(c, "size\":")) {
          f.seen |= F::kSize;
          return scan_u64(c, f.size);
        }
        if (skip_literal(c, "stream\":")) {
          f.seen |= F::kStream;
          return scan_u64(c, f.stream);
        }
        if (skip_literal(c, "stack\":")) {
          f.seen |= F::kStack;
          return scan_u64(c, f.stack);
        }
        break;
      case 'a':
        if (skip_literal(c, "addr\":")) {
          f.seen |= F::kAddr;
          return scan_u64(c, f.addr);
        }
        break;
      case 't':
        if (skip_literal(c, "t\":")) {
          f.seen |= F::kTime;
          return scan_i64(c, f.time);
        }
        if (skip_literal(c, "tag\":")) {
          f.seen |= F::kTag;
          return scan_string(c, f.tag);
        }
        break;
      case 'd':
        if (skip_literal(c, "device\":")) {
          f.seen |= F::kDevice;
          return scan_u64(c, f.device);
        }
        if (skip_literal(c, "device_free\":")) {
          f.seen |= F::kDeviceFree;
          return scan_u64(c, f.device_free);
        }
        break;
      case 'l':
        if (skip_literal(c, "label\":")) {
          f.seen |= F::kLabel;
          return scan_string(c, f.label);
        }
        break;
      case 'v':
        if (skip_literal(c, "value\":")) {
          f.seen |= F::kValue;
          return scan_scalar(c, f.value);
        }
        break;
      default:
        break;
    }
  }
  // An unknown key: ignored, but its name and its value must still be scanned exactly.
  --c.p;  // back to the opening quote
  std::string_view key, ignored;
  if (!scan_string(c, key) || !c.at(':')) return false;
  ++c.p;
  return scan_scalar(c, ignored);
}

}  // namespace event_line_impl

// Reads the first line of `text` into `f` if it is in the scanner's strict subset (see the top of
// this file), and sets `length` to the line's length without its '\n'. The scan never crosses a
// newline (strings refuse control characters), so the line's end need not be found first.
// On false, `f` may be partly filled: the caller starts again from a fresh EventFields.
inline bool scan_event_line(std::string_view text, EventFields& f, std::size_t& length) {
  using namespace event_line_impl;
  Cursor c{text.data(), text.data() + text.size()};
  if (!c.at('{')) return false;
  ++c.p;
  if (c.at('}')) {
    ++c.p;
  } else {
    for (;;) {
      if (!c.at('"')) return false;
      ++c.p;
      if (!scan_field(c, f)) return false;
      if (c.at(',')) {
        ++c.p;
        continue;
      }
      if (!c.at('}')) return false;
      ++c.p;
      break;
    }
  }
  for (; c.p < c.end && *c.p != '\n'; ++c.p)
    if (*c.p != ' ' && *c.p != '\t' && *c.p != '\r') return false;
  length = static_cast<std::size_t>(c.p - text.data());
  return true;
}

}  // namespace fraglab::detail
