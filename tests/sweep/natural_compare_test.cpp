// natural_compare reads numbers without strtod for plain digits with an optional point (Clinger's
// fast path, rows.cpp): it must order them exactly as their strtod values, on values where a
// wrong rounding would show (adjacent decimals, 15 digits, leading zeros, a bare point).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

int by_strtod(const std::string& a, const std::string& b) {
  const double x = std::strtod(a.c_str(), nullptr), y = std::strtod(b.c_str(), nullptr);
  return x < y ? -1 : (x > y ? 1 : 0);
}

TEST(NaturalCompare, PlainDecimalsOrderAsTheirStrtodValues) {
  std::mt19937_64 rng(18);
  auto number = [&rng] {
    const int digits = 1 + static_cast<int>(rng() % 15);
    std::string s;
    for (int i = 0; i < digits; ++i) s += static_cast<char>('0' + rng() % 10);
    const std::size_t point = rng() % (s.size() + 2);
    if (point <= s.size()) s.insert(point, ".");
    return s;
  };
  for (int i = 0; i < 200000; ++i) {
    const std::string a = number();
    std::string b = rng() % 2 ? number() : a;
    if (b == a && b.back() != '.') b.back() = static_cast<char>(b.back() == '9' ? '8' : b.back() + 1);  // a neighbour
    const int expected = by_strtod(a, b);
    if (expected == 0) continue;  // equal values fall back to the text, tested elsewhere
    ASSERT_EQ(natural_compare(a, b), expected) << a << " vs " << b;
  }
  EXPECT_LT(natural_compare("0.1", "0.10000000000001"), 0);
  EXPECT_GT(natural_compare("999999999999999", "99999999999999.9"), 0);
  EXPECT_LT(natural_compare("0.30", "0.35"), 0);
  EXPECT_LT(natural_compare("64", "128"), 0);
  EXPECT_GT(natural_compare("5.", ".5"), 0);
}

}  // namespace
}  // namespace fraglab
