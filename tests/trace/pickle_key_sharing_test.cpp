// Flat dicts with the same keys share one key array (pickle.hpp DictObject, PEP 412-like), and
// take_flat_dict matches a dict's keys against the last dict's by the bytes that fetched them
// (its key template). These pickles are assembled by hand so that each case pins one rule:
// sharing only when the keys are the same, a memo slot overwritten by PUT ends the template,
// a LONG_BINGET is matched on all four index bytes, and a SETITEM into a dict whose keys are
// shared gives it keys of its own without touching the others. Sharing is visible only through
// the fast path, so each input ends with padding after STOP (ignored, as by pickle.loads) to
// keep every dict far enough from the input's end for it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/pickle_bytes.hpp"
#include "trace/pickle.hpp"

namespace fraglab::pickle {
namespace {

using testing::B;

const std::string kPadding(32, '.');

std::string binget(int slot) { return std::string("h") + static_cast<char>(slot); }
std::string long_binget(std::uint32_t slot) {
  std::string s = "j";
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((slot >> (8 * i)) & 0xff));
  return s;
}
std::string new_str(char c) { return std::string("\x8c\x01") + c + "\x94"; }  // memoized
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }
// EMPTY_DICT MEMOIZE MARK <pairs> SETITEMS, as CPython writes a dict.
std::string dict(const std::string& pairs) { return "}\x94(" + pairs + "u"; }

// The dicts of the list at the root, as key -> int maps in key order.
std::vector<std::vector<std::pair<std::string, std::int64_t>>> contents(const Value& root) {
  std::vector<std::vector<std::pair<std::string, std::int64_t>>> out;
  for (const Value& d : root.items()) {
    out.emplace_back();
    for (std::uint32_t i = 0; i < d.dict_size(); ++i)
      out.back().emplace_back(std::string(d.dict_key(i).str()), d.dict_value(i).integer);
  }
  return out;
}

using Dicts = std::vector<std::vector<std::pair<std::string, std::int64_t>>>;

TEST(PickleKeySharing, SameKeysFetchedTheSameWayShareOneArray) {
  // Memo: 0 list, 1 d0, 2 'a', 3 'b', 4 d1, 5 d2, 6 'a' again (BINGET 2 MEMOIZE), 7 d3.
  const std::string bytes = B("\x80\x04]\x94(") + dict(new_str('a') + int1(1) + new_str('b') + int1(2)) +  // d0
                            dict(binget(2) + int1(3) + binget(3) + int1(4)) +                              // d1
                            dict(binget(2) + "\x94" + int1(5) + binget(3) + int1(6)) +                     // d2
                            dict(binget(6) + int1(7) + binget(3) + int1(8)) +                              // d3
                            "e." + kPadding;
  PickleDocument doc(bytes, "share.pickle");
  EXPECT_EQ(contents(doc.root()),
            (Dicts{{{"a", 1}, {"b", 2}}, {{"a", 3}, {"b", 4}}, {{"a", 5}, {"b", 6}}, {{"a", 7}, {"b", 8}}}));
  const auto d = doc.root().items();
  // d0's keys were new strings; d1 fetched them by GET, so d1 records the template d2 matches.
  EXPECT_NE(d[1].dict->keys, d[0].dict->keys);
  EXPECT_EQ(d[2].dict->keys, d[1].dict->keys);
  // d3 fetches the same 'a' from another slot: other bytes, so keys of its own (still equal).
  EXPECT_NE(d[3].dict->keys, d[2].dict->keys);
}

TEST(PickleKeySharing, AMemoSlotOverwrittenByPutIsNoLongerTheTemplateKey) {
  // Memo: 0 list, 1 d1, 2 'a', 3 d2, 4 d3; then 'z' is PUT into slot 2, and d4's BINGET 2 is 'z'.
  const std::string bytes = B("\x80\x04]\x94(") + dict(new_str('a') + int1(1)) + dict(binget(2) + int1(2)) +
                            dict(binget(2) + int1(3)) + B("\x8c\x01zq\x02") +
                            "0" +  // SHORT_BINUNICODE 'z', BINPUT 2, POP
                            dict(binget(2) + int1(4)) + "e." + kPadding;
  PickleDocument doc(bytes, "overwrite.pickle");
  EXPECT_EQ(contents(doc.root()), (Dicts{{{"a", 1}}, {{"a", 2}}, {{"a", 3}}, {{"z", 4}}}));
  const auto d = doc.root().items();
  EXPECT_EQ(d[2].dict->keys, d[1].dict->keys);
  EXPECT_NE(d[3].dict->keys, d[2].dict->keys);
}

TEST(PickleKeySharing, LongBingetKeysMatchOnAllFourIndexBytes) {
  // Slots 1..0x204 hold ints except 0x105 = 'p'; 0x205 = 'q'. The keys of d1 and d2 are
  // LONG_BINGET 0x105; d3's is LONG_BINGET 0x205, which differs from it in the second index byte
  // only.
  std::string bytes = B("\x80\x04]\x94(");
  for (std::uint32_t slot = 1; slot <= 0x205; ++slot)
    bytes += (slot == 0x105 ? new_str('p') : slot == 0x205 ? new_str('q') : int1(0) + "\x94") + "0";
  bytes += dict(long_binget(0x105) + int1(1)) + dict(long_binget(0x105) + int1(2)) +
           dict(long_binget(0x205) + int1(3)) + "e." + kPadding;
  PickleDocument doc(bytes, "long.pickle");
  EXPECT_EQ(contents(doc.root()), (Dicts{{{"p", 1}}, {{"p", 2}}, {{"q", 3}}}));
  const auto d = doc.root().items();
  EXPECT_EQ(d[1].dict->keys, d[0].dict->keys);
  EXPECT_NE(d[2].dict->keys, d[1].dict->keys);
}

TEST(PickleKeySharing, KeysThatLeaveTheTemplateMidwayAreAllKept) {
  // Memo: 0 list, 1 d1, 2 'a', 3 'b', 4 'c', 5 d2, 6 d3, 7 'd', 8 d4, 9 d5.
  const std::string bytes = B("\x80\x04]\x94(") +
                            dict(new_str('a') + int1(1) + new_str('b') + int1(2) + new_str('c') + int1(3)) +
                            dict(binget(2) + int1(4) + binget(3) + int1(5) + binget(4) + int1(6)) +
                            dict(binget(2) + int1(7) + binget(3) + int1(8) + new_str('d') + int1(9)) +  // d3
                            dict(binget(2) + int1(10) + binget(3) + int1(11) + binget(7) + int1(12)) +
                            dict(binget(2) + int1(13) + binget(3) + int1(14) + binget(7) + int1(15)) + "e." + kPadding;
  PickleDocument doc(bytes, "diverge.pickle");
  EXPECT_EQ(contents(doc.root()), (Dicts{{{"a", 1}, {"b", 2}, {"c", 3}},
                                         {{"a", 4}, {"b", 5}, {"c", 6}},
                                         {{"a", 7}, {"b", 8}, {"d", 9}},
                                         {{"a", 10}, {"b", 11}, {"d", 12}},
                                         {{"a", 13}, {"b", 14}, {"d", 15}}}));
  const auto d = doc.root().items();
  EXPECT_NE(d[2].dict->keys, d[1].dict->keys);
  EXPECT_NE(d[3].dict->keys, d[2].dict->keys);  // d3's 'd' was a new string, not a GET
  EXPECT_EQ(d[4].dict->keys, d[3].dict->keys);
}

TEST(PickleKeySharing, SetitemIntoADictWithSharedKeysLeavesTheOthersAlone) {
  // Memo: 0 list, 1 d1, 2 'a', 3 d2, 4 d3, 5 d4. d2 and d3 share keys; then d2['b'] = 9 (BINGET 3,
  // 'b', 9, SETITEM), then d4 still matches the template d2 recorded.
  const std::string bytes = B("\x80\x04]\x94(") + dict(new_str('a') + int1(1)) + dict(binget(2) + int1(2)) +
                            dict(binget(2) + int1(3)) + binget(3) +
                            B("\x8c\x01"
                              "b") +
                            int1(9) + "s" + "0" + dict(binget(2) + int1(4)) + "e." + kPadding;
  PickleDocument doc(bytes, "setitem.pickle");
  EXPECT_EQ(contents(doc.root()), (Dicts{{{"a", 1}}, {{"a", 2}, {"b", 9}}, {{"a", 3}}, {{"a", 4}}}));
  const auto d = doc.root().items();
  EXPECT_EQ(d[3].dict->keys, d[2].dict->keys);
  EXPECT_NE(d[1].dict->keys, d[2].dict->keys);
  EXPECT_EQ(d[2].find("b"), nullptr);
}

TEST(PickleKeySharing, DictsOfSixteenPairsAndOneOfSeventeen) {
  // Sixteen pairs is the most a dict is taken with: d3 shares d2's keys (d1's were new strings,
  // so d2 gets its own). d4 repeats those sixteen keys and adds a seventeenth: it goes the checked
  // way, whole. Memo: 0 list, 1 d1, 2..17 the keys 'a'..'p', 18 d2, 19 d3, 20 d4.
  std::string d1, same16;
  for (int k = 0; k < 16; ++k) {
    d1 += new_str(static_cast<char>('a' + k)) + int1(k);
    same16 += binget(2 + k) + int1(k);
  }
  const std::string bytes = B("\x80\x04]\x94(") + dict(d1) + dict(same16) + dict(same16) +
                            dict(same16 + B("\x8c\x01q") + int1(16)) + "e." + kPadding;
  PickleDocument doc(bytes, "sixteen.pickle");
  const auto d = doc.root().items();
  ASSERT_EQ(d.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(d[i].dict_size(), i < 3 ? 16u : 17u);
    for (int k = 0; k < 16; ++k) EXPECT_EQ(d[i].find(std::string(1, static_cast<char>('a' + k)))->integer, k);
  }
  EXPECT_EQ(d[3].find("q")->integer, 16);
  EXPECT_EQ(d[2].dict->keys, d[1].dict->keys);
  EXPECT_NE(d[3].dict->keys, d[2].dict->keys);
}

}  // namespace
}  // namespace fraglab::pickle
