// The 8-bytes-at-a-time number reading of the canonical-line reader (src/trace/jsonl_canonical_line.hpp):
// the SWAR helpers on hand-worked words, and read_digits() / read_i64() against std::from_chars on
// every digit count from 1 to 20, leading zeros, a non-digit at every position, and the bounds
// (10^19 - 1 is read; 20 digits, and int64 overflow, are declined).
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "trace/jsonl_canonical_line.hpp"

namespace fraglab {
namespace {

using namespace detail::canonical_impl;

// The first 8 bytes of s (at least 8) as load8() reads them: the first in the lowest byte.
std::uint64_t word(const char* s) {
  std::uint64_t w = 0;
  for (int i = 0; i < 8; ++i) w |= std::uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
  return w;
}

// read_digits() on `text`, which is followed by enough bytes for its loads (a '}' and padding).
struct Read {
  bool ok;
  std::uint64_t value;
  std::size_t used;
};
Read read_u(const std::string& text) {
  std::string buf = text + "}" + std::string(32, ' ');
  const char* p = buf.data();
  Read r{false, 0, 0};
  r.ok = read_digits(p, r.value);
  r.used = static_cast<std::size_t>(p - buf.data());
  return r;
}
struct ReadSigned {
  bool ok;
  std::int64_t value;
  std::size_t used;
};
ReadSigned read_s(const std::string& text) {
  std::string buf = text + "}" + std::string(32, ' ');
  const char* p = buf.data();
  ReadSigned r{false, 0, 0};
  r.ok = read_i64(p, r.value);
  r.used = static_cast<std::size_t>(p - buf.data());
  return r;
}

TEST(SwarDigits, EightDigitValueOnHandWorkedWords) {
  // Digit values (0..9) with the most significant digit in the lowest byte.
  EXPECT_EQ(eight_digit_value(0), 0u);
  EXPECT_EQ(eight_digit_value(word("12345678") - 0x3030303030303030ull), 12345678u);
  EXPECT_EQ(eight_digit_value(word("99999999") - 0x3030303030303030ull), 99999999u);
  EXPECT_EQ(eight_digit_value(word("00000001") - 0x3030303030303030ull), 1u);
  EXPECT_EQ(eight_digit_value(word("10000000") - 0x3030303030303030ull), 10000000u);
  EXPECT_EQ(eight_digit_value(word("09080706") - 0x3030303030303030ull), 9080706u);
}

TEST(SwarDigits, NondigitsFlagsTheFirstNonDigitExactly) {
  // The first flagged byte is the first byte outside '0'..'9', whatever it is.
  for (int c = 0; c < 256; ++c) {
    char s[9] = "12345678";
    s[3] = static_cast<char>(c);
    const std::uint64_t t = nondigits(word(s));
    const bool digit = c >= '0' && c <= '9';
    if (digit) {
      EXPECT_EQ(t, 0u) << c;
    } else {
      ASSERT_NE(t, 0u) << c;
      EXPECT_EQ(std::countr_zero(t) / 8, 3) << c;
    }
  }
  EXPECT_EQ(nondigits(word("0123456789")), 0u);
  EXPECT_EQ(std::countr_zero(nondigits(word("/:\x80"
                                            "00000"))) /
                8,
            0);  // '/' and ':' bracket the digits
}

TEST(SwarDigits, EveryDigitCountAgreesWithFromChars) {
  std::mt19937_64 rng(424242);
  for (int digits = 1; digits <= 20; ++digits) {
    for (int round = 0; round < 300; ++round) {
      std::string n(1, static_cast<char>('1' + rng() % 9));
      while (n.size() < static_cast<std::size_t>(digits)) n += static_cast<char>('0' + rng() % 10);
      if (round == 0) n = std::string(1, '1') + std::string(static_cast<std::size_t>(digits - 1), '0');  // 10^k
      if (round == 1) n = std::string(static_cast<std::size_t>(digits), '9');                            // 10^k - 1
      const Read r = read_u(n);
      if (digits <= 19) {
        std::uint64_t expected = 0;
        ASSERT_EQ(std::from_chars(n.data(), n.data() + n.size(), expected).ec, std::errc{}) << n;
        ASSERT_TRUE(r.ok) << n;
        EXPECT_EQ(r.value, expected) << n;
        EXPECT_EQ(r.used, n.size()) << n;
      } else {
        EXPECT_FALSE(r.ok) << n;  // 20 digits: left to the other readers (which check overflow)
      }
    }
  }
  EXPECT_EQ(read_u("9999999999999999999").value, 9999999999999999999ull);
  EXPECT_FALSE(read_u("18446744073709551615").ok);  // 2^64 - 1 has 20 digits
  EXPECT_FALSE(read_u("18446744073709551616").ok);
}

TEST(SwarDigits, ZeroAndLeadingZeros) {
  const Read zero = read_u("0");
  ASSERT_TRUE(zero.ok);
  EXPECT_EQ(zero.value, 0u);
  EXPECT_EQ(zero.used, 1u);
  // JSON has no leading zeros: every longer number starting with '0' is declined.
  for (const char* n : {"00", "01", "0000000", "00000000", "012345678", "0000000000000000", "01234567890123456"})
    EXPECT_FALSE(read_u(n).ok) << n;
  EXPECT_FALSE(read_s("-01").ok);
  const ReadSigned minus_zero = read_s("-0");
  ASSERT_TRUE(minus_zero.ok);
  EXPECT_EQ(minus_zero.value, 0);
}

TEST(SwarDigits, ANonDigitAtEveryPositionEndsTheNumberThere) {
  const std::string digits = "1234567890123456789";
  for (std::size_t at = 0; at <= digits.size(); ++at) {
    for (char stop : {',', '}', '.', 'e', ' ', '"', '/', ':', '\n', '\x80'}) {
      std::string text = digits.substr(0, at) + stop + "99999999999999999999";
      const Read r = read_u(text);
      if (at == 0) {
        EXPECT_FALSE(r.ok) << text;  // no digits
        continue;
      }
      std::uint64_t expected = 0;
      ASSERT_EQ(std::from_chars(text.data(), text.data() + at, expected).ec, std::errc{});
      ASSERT_TRUE(r.ok) << text;
      EXPECT_EQ(r.value, expected) << text;
      EXPECT_EQ(r.used, at) << text;  // stopped at the non-digit (a fraction is the caller's to refuse)
    }
  }
}

TEST(SwarDigits, SignedBoundsAgreeWithFromChars) {
  for (const char* n : {"9223372036854775807", "-9223372036854775808", "-1", "0", "123456789012", "-123456789012"}) {
    std::int64_t expected = 0;
    const std::string s = n;
    ASSERT_EQ(std::from_chars(s.data(), s.data() + s.size(), expected).ec, std::errc{}) << n;
    const ReadSigned r = read_s(s);
    ASSERT_TRUE(r.ok) << n;
    EXPECT_EQ(r.value, expected) << n;
    EXPECT_EQ(r.used, s.size()) << n;
  }
  for (const char* n : {"9223372036854775808", "-9223372036854775809", "9999999999999999999", "-", "--1", "+1"})
    EXPECT_FALSE(read_s(n).ok) << n;
}

}  // namespace
}  // namespace fraglab
