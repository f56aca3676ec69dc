// count_lines (src/trace/line_count.hpp) against std::count on texts of every length across the
// 8-, 16- and 32-byte steps and the 255-step lane flushes, newlines at every density up to all of
// them (each byte lane's counter at its limit).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "trace/line_count.hpp"

namespace fraglab {
namespace {

std::size_t reference(const std::string& s) {
  return 1 + static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(LineCount, EmptyAndSmallTextsByHand) {
  EXPECT_EQ(detail::count_lines(""), 1u);
  EXPECT_EQ(detail::count_lines("a"), 1u);
  EXPECT_EQ(detail::count_lines("\n"), 2u);
  EXPECT_EQ(detail::count_lines("a\nb\n"), 3u);
  EXPECT_EQ(detail::count_lines("\n\n\n"), 4u);
}

TEST(LineCount, AgreesWithStdCountAtEveryLengthAndDensity) {
  std::mt19937_64 rng(99);
  for (std::size_t length = 0; length <= 700; ++length) {
    for (int density : {0, 1, 10, 50, 100}) {  // percent of newline bytes
      std::string s(length, 'x');
      for (char& c : s) c = static_cast<int>(rng() % 100) < density ? '\n' : static_cast<char>('a' + rng() % 26);
      ASSERT_EQ(detail::count_lines(s), reference(s)) << length << " " << density;
    }
  }
}

TEST(LineCount, LongTextsAcrossLaneFlushes) {
  // 255 steps of 32 bytes are 8,160 bytes: these cross several flushes, all at the lanes' limit
  // (only newlines), and with bytes near '\n' (0x0A) that must not count.
  for (std::size_t length : {8159u, 8160u, 8161u, 16320u, 65536u, 100003u}) {
    const std::string all(length, '\n');
    EXPECT_EQ(detail::count_lines(all), length + 1);
    std::string mixed(length, '\x0b');
    for (std::size_t i = 0; i < length; i += 3) mixed[i] = '\n';
    for (std::size_t i = 1; i < length; i += 7) mixed[i] = '\x09';
    EXPECT_EQ(detail::count_lines(mixed), reference(mixed)) << length;
  }
}

}  // namespace
}  // namespace fraglab
