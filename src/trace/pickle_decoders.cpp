// The pickle reader's argument decoders off the hot path: LONG1/LONG4 payloads wider than 8
// bytes, the text protocol's INT, LONG and FLOAT, and UNICODE's raw-unicode-escape. (The binary
// str opcodes, one per string, are decoded inline in pickle_internal.hpp.)
#include <string>

#include "trace/pickle_internal.hpp"

namespace fraglab::pickle::internal {

namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

}  // namespace

// LONG1/LONG4 payload: little-endian two's complement of n bytes (pickle.encode_long).
Value Machine::read_long(const unsigned char* p, std::size_t n) {
  if (n == 0) return make_int(0);
  bool negative = p[n - 1] & 0x80;
  unsigned char fill = negative ? 0xff : 0x00;
  // Bytes beyond the eighth must only repeat the sign; then the low eight bytes are the value.
  for (std::size_t i = 8; i < n; ++i)
    if (p[i] != fill) fail(fmt::format("integer of {} bytes does not fit in 64 bits", n));
  const std::size_t low = std::min<std::size_t>(n, 8);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < low; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  if (negative && low < 8) v |= ~std::uint64_t{0} << (8 * low);  // sign-extend
  if (negative) {
    // With more than 8 bytes the value is below -2^63 unless bit 63 is set.
    if (n > 8 && !(v >> 63)) fail(fmt::format("integer of {} bytes is below -2^63", n));
    return make_int(static_cast<std::int64_t>(v));
  }
  return make_uint(v);
}

// INT ("I123\n", "I01\n" = True, "I00\n" = False) and LONG ("L123L\n").
Value Machine::read_text_int(std::string_view s, bool long_form) {
  if (!long_form && (s == "00" || s == "01")) {
    Value b;
    b.kind = Kind::Bool;
    b.boolean = s == "01";
    return b;
  }
  if (long_form && !s.empty() && s.back() == 'L') s.remove_suffix(1);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (!digits.empty() && digits.front() != '-') {
    std::uint64_t u = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u);
    if (ec == std::errc() && p == digits.data() + digits.size()) return make_uint(u);
  } else {
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
    if (ec == std::errc() && p == digits.data() + digits.size() && !digits.empty()) return make_int(i);
  }
  fail(fmt::format("expected a decimal integer within 64 bits, got '{}'", s.substr(0, 40)));
}

Value Machine::read_text_float(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double d = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty())
    fail(fmt::format("expected a decimal float, got '{}'", s.substr(0, 40)));
  Value v;
  v.kind = Kind::Float;
  v.real = d;
  return v;
}

// UNICODE's argument is "raw-unicode-escape": bytes are Latin-1 code points, except that a
// \uXXXX or \UXXXXXXXX preceded by an odd number of backslashes is an escape (CPython's codec).
// The decoded UTF-8 lives in the arena.
Value Machine::read_raw_unicode_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c != '\\') {
      append_utf8(out, c);
      ++i;
      continue;
    }
    std::size_t run = 0;
    while (i < s.size() && s[i] == '\\') {
      out.push_back('\\');
      ++run;
      ++i;
    }
    if (run % 2 == 0 || i >= s.size() || (s[i] != 'u' && s[i] != 'U')) continue;
    out.pop_back();  // the escaping backslash
    std::size_t count = s[i] == 'u' ? 4 : 8;
    ++i;
    if (s.size() - i < count) fail("truncated \\uXXXX escape in UNICODE argument");
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < count; ++k) {
      char h = s[i + k];
      std::uint32_t d;
      if (h >= '0' && h <= '9')
        d = h - '0';
      else if (h >= 'a' && h <= 'f')
        d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        d = h - 'A' + 10;
      else
        fail("bad hex digit in \\uXXXX escape of UNICODE argument");
      cp = cp * 16 + d;
    }
    if (cp > 0x10ffff) fail("\\U escape beyond U+10FFFF in UNICODE argument");
    append_utf8(out, cp);
    i += count;
  }
  std::uint32_t n = checked_length(out.size(), "str");
  char* p = static_cast<char*>(arena_.allocate(n ? n : 1));
  // A counted string, not a C string: no terminator.
  if (n) std::memcpy(p, out.data(), n);  // NOLINT(bugprone-not-null-terminated-result)
  return make_text(Kind::Str, p, n);
}

}  // namespace fraglab::pickle::internal
