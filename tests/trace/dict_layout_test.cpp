// DictLayout (src/trace/dict_layout.hpp) remembers where the last dict kept the wanted keys and
// checks the next dict's keys by pointer. Whatever it remembers, get() must give what
// Value::find() gives (tested on its own in pickle_test.cpp): the oracle below. The dicts come in
// an order that exercises each way of matching or missing: the same keys, other keys, fewer keys,
// a non-str key, a non-dict, duplicate keys and more keys than it remembers.
#include "trace/dict_layout.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "support/pickle_bytes.hpp"
#include "trace/pickle.hpp"

namespace fraglab {
namespace {

using pickle::PickleDocument;
using pickle::Value;
using testing::B;
using testing::from_hex;

constexpr std::array<std::string_view, 4> kNames{"a", "b", "c", "d"};

// CPython 3.11, pickle.dumps(v, protocol=4) for
//   [{'a': 1, 'b': 2, 'c': 3}, {'a': 4, 'b': 5, 'c': 6}, {'c': 7, 'b': 17, 'a': 8},
//    {'c': 7, 'a': 8}, {'a': 9, 'b': 10, 'c': 11, 'd': 12}, {1: 'x', 'a': 13}, [],
//    {'a': 14, 'b': 15, 'c': 16}]
// The third has the first two's number of keys in another order.
constexpr std::string_view kLayoutsHex =
    "8004957d000000000000005d94287d94288c0161944b018c0162944b028c0163944b03757d942868024b046803"
    "4b0568044b06757d942868044b0768034b1168024b08757d942868044b0768024b08757d942868024b0968034b"
    "0a68044b0b8c0164944b0c757d94284b018c01789468024b0d755d947d942868024b0e68034b0f68044b107565"
    "2e";

// get() for every name equals find(), after look_at(); has_all() says a name is there exactly
// when find() finds it, and present() then gives the same value.
void expect_like_find(DictLayout<4>& layout, const Value& dict, const std::string& what) {
  layout.look_at(dict);
  std::uint32_t found = 0;
  for (std::size_t f = 0; f < kNames.size(); ++f) {
    const Value* v = dict.find(kNames[f]);
    EXPECT_EQ(layout.get(dict, f), v) << what << ", key " << kNames[f];
    EXPECT_EQ(layout.has_all(1u << f), v != nullptr) << what << ", key " << kNames[f];
    if (v) {
      EXPECT_EQ(&layout.present(dict, f), v) << what << ", key " << kNames[f];
      found |= 1u << f;
    }
  }
  EXPECT_TRUE(layout.has_all(found)) << what;
}

TEST(DictLayout, FindsWhatFindFindsWhateverTheLastDictWas) {
  const std::string bytes = from_hex(kLayoutsHex);  // the values point into it
  PickleDocument doc(bytes, "layouts.pickle");
  const auto dicts = doc.root().items();
  ASSERT_EQ(dicts.size(), 8u);
  DictLayout<4> layout(kNames);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass starts from the last dict's layout
    for (std::size_t i = 0; i < dicts.size(); ++i)
      expect_like_find(layout, dicts[i], "pass " + std::to_string(pass) + ", value " + std::to_string(i));
  }
  // Values by hand, so that a find() and get() that agree on a wrong answer still fail.
  layout.look_at(dicts[1]);
  layout.look_at(dicts[2]);
  EXPECT_EQ(layout.get(dicts[2], 0)->integer, 8);
  EXPECT_EQ(layout.get(dicts[2], 1)->integer, 17);
  EXPECT_EQ(layout.get(dicts[2], 2)->integer, 7);
  layout.look_at(dicts[3]);
  EXPECT_EQ(layout.get(dicts[3], 0)->integer, 8);
  EXPECT_EQ(layout.get(dicts[3], 1), nullptr);
  layout.look_at(dicts[7]);
  EXPECT_EQ(layout.get(dicts[7], 1)->integer, 15);
  EXPECT_EQ(layout.get(dicts[7], 3), nullptr);
  layout.look_at(dicts[5]);  // a non-str key: read every time
  EXPECT_EQ(layout.get(dicts[5], 0)->integer, 13);
  layout.look_at(dicts[6]);  // a list has no keys
  for (std::size_t f = 0; f < kNames.size(); ++f) EXPECT_EQ(layout.get(dicts[6], f), nullptr);
}

TEST(DictLayout, AlternatingLayoutsReadLikeFindAndChargeLikeOne) {
  // Two orders of the same keys in turn (as PyTorch's segments list 'frames' and 'blocks'): the
  // second layout is remembered, yet look_at() reports each change as one layout would.
  const std::string bytes = from_hex(kLayoutsHex);  // the values point into it
  PickleDocument doc(bytes, "layouts.pickle");
  const auto dicts = doc.root().items();
  DictLayout<4> layout(kNames);
  EXPECT_EQ(layout.look_at(dicts[1]), 3u);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(layout.look_at(dicts[2]), 3u) << "round " << round;  // a change of layout
    EXPECT_EQ(layout.look_at(dicts[2]), 0u) << "round " << round;
    EXPECT_EQ(layout.get(dicts[2], 0)->integer, 8);
    EXPECT_EQ(layout.get(dicts[2], 1)->integer, 17);
    EXPECT_EQ(layout.get(dicts[2], 2)->integer, 7);
    EXPECT_EQ(layout.look_at(dicts[0]), 3u) << "round " << round;
    EXPECT_EQ(layout.get(dicts[0], 0)->integer, 1);
    EXPECT_EQ(layout.get(dicts[0], 2)->integer, 3);
    EXPECT_EQ(layout.look_at(dicts[1]), 0u) << "round " << round;  // the same keys as dicts[0]
    expect_like_find(layout, dicts[1], "round " + std::to_string(round));
  }
}

TEST(DictLayout, TheLastOfDuplicateKeysWins) {
  // {'a': 1, 'a': 2, 'b': 3} as SETITEMS writes it (no pickler makes this; a dict loaded from it
  // holds a = 2), then the same pairs again with the key strings from the memo.
  const std::string bytes =
      B("\x80\x04]\x94(}\x94(\x8c\x01"
        "a\x94K\x01h\x02K\x02\x8c\x01"
        "b\x94K\x03u"
        "}\x94(h\x02K\x04h\x02K\x05h\x03K\x06ue.");
  PickleDocument doc(bytes, "dup.pickle");
  const auto dicts = doc.root().items();
  ASSERT_EQ(dicts.size(), 2u);
  DictLayout<4> layout(kNames);
  layout.look_at(dicts[0]);
  EXPECT_EQ(layout.get(dicts[0], 0)->integer, 2);
  EXPECT_EQ(layout.get(dicts[0], 1)->integer, 3);
  layout.look_at(dicts[1]);  // the same key strings: matched by pointer
  EXPECT_EQ(layout.get(dicts[1], 0)->integer, 5);
  EXPECT_EQ(layout.get(dicts[1], 1)->integer, 6);
  expect_like_find(layout, dicts[0], "first");
  expect_like_find(layout, dicts[1], "second");
}

TEST(DictLayout, DictsWithMoreKeysThanItRemembersAreReadEachTime) {
  // Two dicts of 40 keys k00..k39, the wanted ones among them, the second with other values and
  // its keys in reverse order (protocol 2: BINUNICODE keys, BININT1 values).
  auto dict = [](bool reverse, int add) {
    std::string s = "}(";
    for (int n = 0; n < 40; ++n) {
      const int i = reverse ? 39 - n : n;
      std::string key = i == 7 ? "a" : i == 30 ? "d" : "k";
      if (key == "k") key += std::to_string(100 + i);
      s += 'X';
      s += static_cast<char>(key.size());
      s += std::string(3, '\0');
      s += key;
      s += 'K';
      s += static_cast<char>(i + add);
    }
    return s + "u";
  };
  std::string bytes = "\x80\x02](";
  bytes += dict(false, 0);
  bytes += dict(true, 50);
  bytes += "e.";
  PickleDocument doc(bytes, "wide.pickle");
  const auto dicts = doc.root().items();
  ASSERT_EQ(dicts.size(), 2u);
  ASSERT_EQ(dicts[0].dict_size(), 40u);
  DictLayout<4> layout(kNames);
  layout.look_at(dicts[0]);
  EXPECT_EQ(layout.get(dicts[0], 0)->integer, 7);
  EXPECT_EQ(layout.get(dicts[0], 3)->integer, 30);
  EXPECT_EQ(layout.get(dicts[0], 1), nullptr);
  layout.look_at(dicts[1]);
  EXPECT_EQ(layout.get(dicts[1], 0)->integer, 57);
  EXPECT_EQ(layout.get(dicts[1], 3)->integer, 80);
  expect_like_find(layout, dicts[0], "first again");
}

}  // namespace
}  // namespace fraglab
