// The fastest of the three JSONL event-line readers: the exact line shape fraglab's own writer
// emits (jsonl_writer.cpp) for alloc, free, free_requested and free_completed, most lines of any
// trace. The reader tries it first; a line it declines goes to scan_event_line()
// (jsonl_event_line.hpp: any key order, any op), and a line that declines too to simdjson.
//
// Invariants:
//  - it accepts only `{"op":OP` followed by `,"key":value` pairs in the writer's order (id, size,
//    stream, addr, tag, t, device, stack), each at most once, then `}` and the line's end. That is
//    a subset of scan_event_line()'s subset, and it fills the same slots with the same values
//    (tests/trace/jsonl_test.cpp reads lines both ways), so which reader took a line never shows;
//  - values: integers of at most 19 digits without leading zeros (so no overflow check is needed),
//    and tags of printable ASCII without escapes; anything else is declined, deciding nothing;
//  - it reads 8 bytes at a time without finding the line's end first and without bounds checks:
//    the caller guarantees kCanonicalRoom readable bytes from the line's start, more than any
//    line it reads can reach (under 330 bytes: `{"op":` and the op 23, 7 numeric fields of at most
//    30, the tag field at most kMaxTag + 16, and a load 24 bytes ahead of a number's start). Every step only moves over
//    bytes that cannot be a
//    '\n' (key letters, digits, string bytes of at least 0x20), so it never passes the line's end,
//    and bytes after the line, which loads may see, never change what it decides.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "trace/jsonl_event_line.hpp"

namespace fraglab::detail {

// Tags longer than this (up to 7 bytes more) are left to the other readers: a bound on what a
// line may read.
inline constexpr std::size_t kMaxTag = 64;
// Readable bytes the caller guarantees from the line's start (see the top of this file).
inline constexpr std::size_t kCanonicalRoom = 512;

namespace canonical_impl {

constexpr std::uint64_t kOnes = 0x0101010101010101ull;
constexpr std::uint64_t kHigh = 0x8080808080808080ull;

// 8 bytes at p, the first in the lowest byte (callers check the machine is little-endian).
inline std::uint64_t load8(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The first min(n, 8) bytes of a literal as a load8() word, and the mask of those bytes.
constexpr std::uint64_t word_of(const char* s, std::size_t n) {
  std::uint64_t w = 0;
  for (std::size_t i = 0; i < n && i < 8; ++i) w |= std::uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
  return w;
}
constexpr std::uint64_t mask_of(std::size_t n) {
  return n >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * n)) - 1;
}

// At p: the literal `lit` (up to 16 bytes)? Then step over it. One or two masked word compares.
template <std::size_t N>
[[gnu::always_inline]] inline bool match(const char*& p, const char (&lit)[N]) {
  constexpr std::size_t n = N - 1;
  static_assert(n >= 1 && n <= 16);
  if ((load8(p) & mask_of(n)) != word_of(lit, n)) return false;
  if constexpr (n > 8) {
    if ((load8(p + 8) & mask_of(n - 8)) != word_of(lit + 8, n - 8)) return false;
  }
  p += n;
  return true;
}

// The non-digit bytes of w: the high bit of every byte outside '0'..'9' (+0x46 takes a byte above
// '9' past 0x7F, -0x30 one below '0' below 0; bytes of 0x80 and up have it already). Carries and
// borrows only move towards later bytes, and digits make none, so the first flagged byte is the
// first non-digit; later flags may be wrong, and are never used.
inline std::uint64_t nondigits(std::uint64_t w) { return ((w + 0x46 * kOnes) | (w - 0x30 * kOnes)) & kHigh; }

// The number spelled by 8 digit values (0..9 each, the first, most significant, in the lowest byte
// of d): Lemire's SWAR method with the two final steps merged into two multiplies, as simdjson's
// parse_eight_digits_unrolled. d * 10 + (d >> 8) leaves each even byte the 2-digit number of its
// pair (odd bytes hold junk, masked off); the pairs 0 and 2 of each half, times 100 and 10^6, and
// 1 and 3, times 1 and 10^4, sum in bits 32..63 of the product (lower terms stay below 2^32, terms
// past bit 63 fall out).
inline std::uint64_t eight_digit_value(std::uint64_t d) {
  d = d * 10 + (d >> 8);
  constexpr std::uint64_t kPairs = 0x000000FF000000FFull;
  return ((d & kPairs) * (100 + (1000000ull << 32)) + ((d >> 16) & kPairs) * (1 + (10000ull << 32))) >> 32;
}

// The number spelled by the digits of w before its first non-digit, given `flags` = nondigits(w)
// != 0 with the first non-digit at byte n >= 1: the digits' values are moved to the top of the
// word (zero digits before them: the shift is 64 - 8n = 71 - countr_zero(flags)). Subtracting '0'
// from the digits borrows nothing; the bytes it garbles are shifted out.
inline std::uint64_t leading_digits_value(std::uint64_t w, std::uint64_t flags) {
  return eight_digit_value((w - 0x30 * kOnes) << (71 - std::countr_zero(flags)));
}

constexpr std::uint64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

// A JSON integer's digits at p, at most 19 (below 10^19 < 2^64: no overflow), no leading zero.
// p + 16 + 8 is at most 24 bytes past the number's start: at most the line's '\n' for the number
// (19 digits) plus the bytes of room the caller guarantees.
[[gnu::always_inline]] inline bool read_digits(const char*& p, std::uint64_t& out) {
  const std::uint64_t w = load8(p);
  const std::uint64_t t = nondigits(w);
  if (t != 0) [[likely]] {  // fewer than 8 digits: ids, sizes below 100 MB, small times
    const unsigned n = static_cast<unsigned>(std::countr_zero(t)) / 8;
    if (n == 0 || (n > 1 && (w & 0xFF) == '0')) return false;
    out = leading_digits_value(w, t);
    p += n;
    return true;
  }
  if ((w & 0xFF) == '0') return false;  // a leading zero
  std::uint64_t v = eight_digit_value(w - 0x30 * kOnes);
  const std::uint64_t w2 = load8(p + 8);
  const std::uint64_t t2 = nondigits(w2);
  if (t2 != 0) {
    const unsigned n2 = static_cast<unsigned>(std::countr_zero(t2)) / 8;
    if (n2 != 0) v = v * kPow10[n2] + leading_digits_value(w2, t2);
    p += 8 + n2;
    out = v;
    return true;
  }
  v = v * 100000000 + eight_digit_value(w2 - 0x30 * kOnes);
  const std::uint64_t w3 = load8(p + 16);
  const std::uint64_t t3 = nondigits(w3);
  const unsigned n3 = t3 == 0 ? 8 : static_cast<unsigned>(std::countr_zero(t3)) / 8;
  if (n3 > 3) return false;  // 20 digits or more: left to the other readers
  if (n3 != 0) v = v * kPow10[n3] + leading_digits_value(w3, t3);
  p += 16 + n3;
  out = v;
  return true;
}

// A JSON integer in int64_t. Times are never negative in the traces fraglab writes: the '-' is the
// rare branch.
[[gnu::always_inline]] inline bool read_i64(const char*& p, std::int64_t& out) {
  std::uint64_t m;
  if (*p != '-') [[likely]] {
    if (!read_digits(p, m) || m > static_cast<std::uint64_t>(INT64_MAX)) return false;
    out = static_cast<std::int64_t>(m);
    return true;
  }
  ++p;
  if (!read_digits(p, m) || m > static_cast<std::uint64_t>(INT64_MAX) + 1) return false;
  out = static_cast<std::int64_t>(~m + 1);
  return true;
}

// A string's content from p (just past its opening quote) to its closing quote, which must come
// before any '\\', control byte or non-ASCII byte (the bytes scan_event_line() declines too).
// Each of the four tests below flags its first matching byte exactly (borrows only move towards
// later bytes), so the first flagged byte is the first byte that ends the fast string.
[[gnu::always_inline]] inline bool read_string(const char*& p, std::string_view& out) {
  const char* begin = p;
  for (;;) {
    const std::uint64_t w = load8(p);
    const std::uint64_t quote = w ^ (0x22 * kOnes), backslash = w ^ (0x5C * kOnes);
    const std::uint64_t t =
        (((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) | ((w - 0x20 * kOnes) & ~w) | w) & kHigh;
    if (t == 0) {
      p += 8;
      if (static_cast<std::size_t>(p - begin) > kMaxTag) return false;
      continue;
    }
    p += std::countr_zero(t) / 8;
    if (*p != '"') return false;
    out = std::string_view(begin, static_cast<std::size_t>(p - begin));
    ++p;
    return true;
  }
}

}  // namespace canonical_impl

// Reads the event line at `p` into `f` if it has the writer's exact shape (see the top of this
// file) and sets `newline` to its '\n'. kCanonicalRoom bytes from p must be readable. On false `f`
// may be partly filled: the caller starts the next reader from a fresh EventFields. Always inlined
// into the read loop: called, its register saves and restores were ~18 instructions per line.
[[gnu::always_inline]] inline bool scan_canonical_line(const char* p, EventFields& f, const char*& newline) {
  using namespace canonical_impl;
  using F = EventFields;
  if constexpr (std::endian::native != std::endian::little) return false;
  if (!match(p, R"({"op":")")) return false;
  f.seen = F::kOp;
  if (match(p, R"(alloc")")) {
    f.op = Op::Alloc;
  } else if (match(p, R"(free")")) {
    f.op = Op::Free;
  } else if (match(p, R"(free_requested")")) {
    f.op = Op::FreeRequested;
  } else if (match(p, R"(free_completed")")) {
    f.op = Op::FreeCompleted;
  } else {
    return false;  // marks, segments, oom, empty_cache: the general scanner
  }
  if (match(p, R"(,"id":)")) {
    f.seen |= F::kId;
    if (!read_digits(p, f.id)) return false;
  }
  // Free lines go on with "t", most alloc lines with "tag" after "size": a key's first letter 't'
  // (p[2], after `,"`) rules out the three keys below, which one byte test decides at once.
  if (p[2] != 't') {
    if (match(p, R"(,"size":)")) {
      f.seen |= F::kSize;
      if (!read_digits(p, f.size)) return false;
    }
    if (match(p, R"(,"stream":)")) {
      f.seen |= F::kStream;
      if (!read_digits(p, f.stream)) return false;
    }
    if (match(p, R"(,"addr":)")) {
      f.seen |= F::kAddr;
      if (!read_digits(p, f.addr)) return false;
    }
  }
  if (match(p, R"(,"tag":")")) {
    f.seen |= F::kTag;
    if (!read_string(p, f.tag)) return false;
  }
  if (match(p, R"(,"t":)")) {
    f.seen |= F::kTime;
    if (!read_i64(p, f.time)) return false;
  }
  // Most lines end after "t": at a '}' neither key below can match, so trying them decides nothing.
  if (p[0] != '}') {
    if (match(p, R"(,"device":)")) {
      f.seen |= F::kDevice;
      if (!read_digits(p, f.device)) return false;
    }
    if (match(p, R"(,"stack":)")) {
      f.seen |= F::kStack;
      if (!read_digits(p, f.stack)) return false;
    }
  }
  if (p[0] != '}' || p[1] != '\n') return false;
  newline = p + 1;
  return true;
}

}  // namespace fraglab::detail
