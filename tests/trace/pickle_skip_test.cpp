// PickleOptions::skip_key (src/trace/pickle.hpp): with it, containers stored under that dict key
// (and containers built only to go into them) come back as Kind::Skipped instead of being built.
// The promise is that skipping changes nothing else: the document equals a full parse except at
// those values, bad input fails with the very same InputError, and where a skipped container would
// be reachable some other way (memo GET into a built container, a dict key, the root, a skipped
// value under another key) the reader parses again without skipping (skipped() false).
//
// The reference here is the full parse of the same bytes: without skip_key none of the skipping
// paths run, and pickle_test.cpp checks that parse against CPython's own pickles. Every
// expectation below is either derived by hand from the pickle format (the hand-assembled pickles,
// annotated opcode by opcode) or is "the same as the full parse", checked by
// same_except_skipped(). The main safety net is the truncation/mutation sweep over snapshot-like
// pickles: every prefix, many single-byte changes and every memo GET sent to every slot must give
// the same error or the same document both ways. Run under ASan+UBSan.
#include "trace/pickle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "fraglab/types.hpp"
#include "support/pickle_bytes.hpp"
#include "support/real_traces.hpp"

namespace fraglab::pickle {
namespace {

using testing::B;
using testing::from_hex;

std::string to_hex(std::string_view bytes) {
  static const char* const digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

PickleOptions skip(std::string_view key) { return PickleOptions{.skip_key = key}; }

// ---- comparing a full parse with a skipping one ----------------------------------------------

// Walks the full and the skipping ("skim") documents side by side. Containers are compared by
// structure and by identity: each full container must correspond to one skim container and the
// other way round (memo aliasing is part of the document). A pair seen before is taken as equal
// (it is being compared further up, or was already), which also ends cycles through the memo;
// recursion additionally stops at depth kMaxDepth (nothing tested nests that deep).
class TreeCompare {
 public:
  static constexpr int kMaxDepth = 64;

  explicit TreeCompare(std::string_view skip_key) : skip_key_(skip_key) {}

  bool same(const Value& full, const Value& skim, bool under_skip_key, int depth) {
    if (depth > kMaxDepth) return true;
    if (full.kind == Kind::Skipped || full.kind == Kind::Missing)
      return differ("the full parse holds a " + std::string(kind_name(full.kind)) + " value");
    if (skim.kind == Kind::Skipped) {
      const auto would_be = static_cast<Kind>(skim.length);
      if (skip_key_.empty()) return differ("skipped although skipping was not used");
      if (!under_skip_key) return differ("skipped but not a dict value under the skip key");
      if (would_be != Kind::List && would_be != Kind::Tuple && would_be != Kind::Dict)
        return differ("skipped value records kind " + std::string(kind_name(would_be)));
      if (full.kind != would_be)
        return differ("skipped as a " + std::string(kind_name(would_be)) + " but the full parse has a " +
                      std::string(kind_name(full.kind)));
      if (!skim.items().empty() || skim.dict_size() != 0) return differ("skipped value has items");
      return true;
    }
    if (full.kind != skim.kind)
      return differ("kind " + std::string(kind_name(full.kind)) + " vs " + std::string(kind_name(skim.kind)));
    switch (full.kind) {
      case Kind::None:
        return true;
      case Kind::Bool:
        return full.boolean == skim.boolean || differ("bool differs");
      case Kind::Int:
      case Kind::UInt:
        return full.unsigned_integer == skim.unsigned_integer || differ("int differs");
      case Kind::Float:
        return std::bit_cast<std::uint64_t>(full.real) == std::bit_cast<std::uint64_t>(skim.real) ||
               differ("float differs");
      case Kind::Str:
      case Kind::Bytes:
        return full.str() == skim.str() ||
               differ("'" + std::string(full.str()) + "' vs '" + std::string(skim.str()) + "'");
      case Kind::List:
      case Kind::Tuple: {
        const void* fid =
            full.kind == Kind::List ? static_cast<const void*>(full.list) : static_cast<const void*>(full.tuple_items);
        const void* sid =
            skim.kind == Kind::List ? static_cast<const void*>(skim.list) : static_cast<const void*>(skim.tuple_items);
        const int seen = pair_seen(fid, sid);
        if (seen != 0) return seen > 0;
        auto f = full.items(), s = skim.items();
        if (f.size() != s.size())
          return differ("sizes " + std::to_string(f.size()) + " vs " + std::to_string(s.size()));
        for (std::size_t i = 0; i < f.size(); ++i) {
          path_.push_back({nullptr, i});
          if (!same(f[i], s[i], false, depth + 1)) return false;
          path_.pop_back();
        }
        return true;
      }
      case Kind::Dict: {
        const int seen = pair_seen(full.dict, skim.dict);
        if (seen != 0) return seen > 0;
        if (full.dict_size() != skim.dict_size())
          return differ("dict sizes " + std::to_string(full.dict_size()) + " vs " + std::to_string(skim.dict_size()));
        for (std::uint32_t i = 0; i < full.dict_size(); ++i) {
          const Value& key = skim.dict_key(i);
          path_.push_back({nullptr, i, true});
          if (!same(full.dict_key(i), key, false, depth + 1)) return false;
          path_.back() = {&key, i};
          const bool under = !skip_key_.empty() && key.is_str() && key.str() == skip_key_;
          if (!same(full.dict_value(i), skim.dict_value(i), under, depth + 1)) return false;
          path_.pop_back();
        }
        return true;
      }
      case Kind::Missing:
      case Kind::Skipped:
        break;
    }
    return differ("unexpected kind");
  }

  std::string why;

 private:
  // One step down from the root: a list/tuple item, a dict value (by its str key, else its
  // position), or a dict key. Formatted only when something differs.
  struct Step {
    const Value* key;
    std::size_t index;
    bool is_key = false;
  };

  bool differ(const std::string& what) {
    why = "at root";
    for (const Step& s : path_) {
      if (s.is_key)
        why += "{key " + std::to_string(s.index) + "}";
      else if (s.key && s.key->is_str())
        why += "['" + std::string(s.key->str()) + "']";
      else if (s.key)
        why += "[value " + std::to_string(s.index) + "]";
      else
        why += "[" + std::to_string(s.index) + "]";
    }
    why += ": " + what;
    return false;
  }
  // 1: this pair was met before (equal as far as this walk goes); 0: new, now recorded;
  // -1: one side was met before paired with something else (aliasing differs).
  int pair_seen(const void* fid, const void* sid) {
    if (fid == nullptr && sid == nullptr) return 0;  // empty tuples own no storage
    auto f = full_to_skim_.find(fid);
    auto s = skim_to_full_.find(sid);
    if (f != full_to_skim_.end() || s != skim_to_full_.end()) {
      if (f != full_to_skim_.end() && s != skim_to_full_.end() && f->second == sid && s->second == fid) return 1;
      differ("containers alias differently in the two documents");
      return -1;
    }
    full_to_skim_.emplace(fid, sid);
    skim_to_full_.emplace(sid, fid);
    return 0;
  }

  std::string_view skip_key_;
  std::vector<Step> path_;
  std::unordered_map<const void*, const void*> full_to_skim_, skim_to_full_;
};

// True when `skim` is `full` except that some containers stored as dict values under `skip_key`
// are Kind::Skipped there (with the kind of the full parse's container in `length`). An empty
// skip_key asks for identical documents. `why` gets the first difference.
bool same_except_skipped(const Value& full, const Value& skim, std::string_view skip_key, std::string* why = nullptr) {
  TreeCompare compare(skip_key);
  const bool same = compare.same(full, skim, false, 0);
  if (why) *why = compare.why;
  return same;
}

// Kind::Skipped values reachable from `v` (each container visited once).
std::size_t count_skipped(const Value& v, std::set<const void*>& seen, int depth = 0) {
  if (depth > TreeCompare::kMaxDepth) return 0;
  if (v.kind == Kind::Skipped) return 1;
  std::size_t n = 0;
  if (v.kind == Kind::List || v.kind == Kind::Tuple) {
    const void* id = v.kind == Kind::List ? static_cast<const void*>(v.list) : static_cast<const void*>(v.tuple_items);
    if (id && !seen.insert(id).second) return 0;
    for (const Value& item : v.items()) n += count_skipped(item, seen, depth + 1);
  } else if (v.kind == Kind::Dict) {
    if (!seen.insert(v.dict).second) return 0;
    for (std::uint32_t i = 0; i < v.dict_size(); ++i) {
      n += count_skipped(v.dict_key(i), seen, depth + 1);
      n += count_skipped(v.dict_value(i), seen, depth + 1);
    }
  }
  return n;
}

std::size_t count_skipped(const Value& v) {
  std::set<const void*> seen;
  return count_skipped(v, seen);
}

// Full parse and skipping parse of the same bytes: whether each threw, and with what.
struct Outcome {
  std::unique_ptr<PickleDocument> full, skim;
  std::string full_error, skim_error;  // InputError messages ("" when it parsed)
};

Outcome parse_both(std::string_view bytes, std::string_view skip_key) {
  Outcome o;
  try {
    o.full = std::make_unique<PickleDocument>(bytes, "m.pickle");
  } catch (const InputError& e) {
    o.full_error = e.what();
    if (o.full_error.empty()) o.full_error = "(empty InputError message)";
  }
  try {
    o.skim = std::make_unique<PickleDocument>(bytes, "m.pickle", skip(skip_key));
  } catch (const InputError& e) {
    o.skim_error = e.what();
    if (o.skim_error.empty()) o.skim_error = "(empty InputError message)";
  }
  // Anything other than InputError escapes to GoogleTest, which reports it as a failure.
  return o;
}

// "" when the two parses agree as promised, else what differs.
std::string disagreement(const Outcome& o, std::string_view skip_key) {
  if (!o.full_error.empty() || !o.skim_error.empty()) {
    if (o.full_error == o.skim_error) return "";
    return "full parse: " + (o.full_error.empty() ? "parsed" : "\"" + o.full_error + "\"") +
           "; skipping parse: " + (o.skim_error.empty() ? "parsed" : "\"" + o.skim_error + "\"");
  }
  if (o.full->protocol() != o.skim->protocol()) return "protocols differ";
  std::string why;
  // Without skipping (it fell back) the documents must be identical.
  if (!same_except_skipped(o.full->root(), o.skim->root(), o.skim->skipped() ? skip_key : "", &why))
    return std::string("documents differ (skipped() ") + (o.skim->skipped() ? "true" : "false") + ") " + why;
  return "";
}

// What a sweep saw: inputs refused (the same way by both), parsed with skipping, parsed after a
// fallback; and failures reported so far.
struct Tally {
  std::size_t refused = 0, skimmed = 0, fell_back = 0, failures = 0;
};

// Parses `bytes` both ways from a buffer of exactly its size (so that ASan sees any read past its
// end) and checks that they agree. `what` names the input in a failure (called only then).
template <typename Describe>
void expect_same_both_ways(std::string_view bytes, std::string_view skip_key, Tally& tally, const Describe& what) {
  std::unique_ptr<char[]> buf(new char[bytes.empty() ? 1 : bytes.size()]);
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  const std::string_view exact(buf.get(), bytes.size());
  Outcome o = parse_both(exact, skip_key);
  const std::string d = disagreement(o, skip_key);
  if (!d.empty()) {
    // Enough to reproduce, without flooding the log when something is badly wrong.
    if (++tally.failures <= 10) ADD_FAILURE() << what() << ": " << d << "\n  input hex: " << to_hex(bytes);
    return;
  }
  if (!o.full_error.empty())
    ++tally.refused;
  else if (o.skim->skipped())
    ++tally.skimmed;
  else
    ++tally.fell_back;
}

// ---- hand-assembled pickles: what skipping gives -----------------------------------------------

const Value& get(const Value& dict, std::string_view key) {
  const Value* v = dict.find(key);
  if (!v) throw std::runtime_error("missing key " + std::string(key));
  return *v;
}

TEST(PickleSkip, FramesListIsSkippedAndTheRestIsBuilt) {
  // {'frames': [{'name': 'f'}], 'size': 5}
  const std::string bytes =
      B("\x80\x04"  // PROTO 4
        "}\x94"     // EMPTY_DICT, MEMOIZE 0
        "("         // MARK
        "\x8c\x06"
        "frames"  // SHORT_BINUNICODE 'frames'
        "\x94"    // MEMOIZE 1
        "]\x94"   // EMPTY_LIST, MEMOIZE 2
        "}\x94"   // EMPTY_DICT, MEMOIZE 3 (the frame)
        "\x8c\x04"
        "name"  // SHORT_BINUNICODE 'name'
        "\x94"  // MEMOIZE 4
        "\x8c\x01"
        "f"     // SHORT_BINUNICODE 'f'
        "\x94"  // MEMOIZE 5
        "s"     // SETITEM: frame['name'] = 'f'
        "a"     // APPEND: frames.append(frame)
        "\x8c\x04"
        "size"   // SHORT_BINUNICODE 'size'
        "\x94"   // MEMOIZE 6
        "K\x05"  // BININT1 5
        "u"      // SETITEMS
        ".");    // STOP
  PickleDocument skim(bytes, "a.pickle", skip("frames"));
  EXPECT_TRUE(skim.skipped());
  EXPECT_EQ(skim.protocol(), 4);
  const Value& root = skim.root();
  ASSERT_TRUE(root.is_dict());
  ASSERT_EQ(root.dict_size(), 2u);
  EXPECT_EQ(root.dict_key(0).str(), "frames");
  EXPECT_EQ(root.dict_key(1).str(), "size");
  const Value& frames = get(root, "frames");
  EXPECT_EQ(frames.kind, Kind::Skipped);
  EXPECT_EQ(static_cast<Kind>(frames.length), Kind::List);
  EXPECT_TRUE(frames.items().empty());
  EXPECT_EQ(get(root, "size").kind, Kind::Int);
  EXPECT_EQ(get(root, "size").integer, 5);

  // The full parse holds the list, and agrees elsewhere.
  PickleDocument full(bytes, "a.pickle");
  EXPECT_FALSE(full.skipped());
  const Value& list = get(full.root(), "frames");
  ASSERT_EQ(list.kind, Kind::List);
  ASSERT_EQ(list.items().size(), 1u);
  EXPECT_EQ(get(list.items()[0], "name").str(), "f");
  std::string why;
  EXPECT_TRUE(same_except_skipped(full.root(), root, "frames", &why)) << why;
  EXPECT_EQ(count_skipped(root), 1u);
}

TEST(PickleSkip, FramesListSharedByTwoEntriesIsSkippedInBoth) {
  // L = [{'name': 'f'}]; [{'frames': L, 'addr': 1}, {'frames': L, 'addr': 2}]
  const std::string bytes =
      B("\x80\x04"  // PROTO 4
        "]\x94"     // EMPTY_LIST, MEMOIZE 0 (the root)
        "("         // MARK
        // entry 0
        "}\x94"  // EMPTY_DICT, MEMOIZE 1
        "("      // MARK
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 2
        "]\x94"   // EMPTY_LIST, MEMOIZE 3 (L)
        "}\x94"   // EMPTY_DICT, MEMOIZE 4 (the frame)
        "\x8c\x04"
        "name"  // 'name'
        "\x94"  // MEMOIZE 5
        "\x8c\x01"
        "f"     // 'f'
        "\x94"  // MEMOIZE 6
        "s"     // SETITEM
        "a"     // APPEND: L.append(frame)
        "\x8c\x04"
        "addr"   // 'addr'
        "\x94"   // MEMOIZE 7
        "K\x01"  // BININT1 1
        "u"      // SETITEMS
        // entry 1
        "}\x94"  // EMPTY_DICT, MEMOIZE 8
        "("      // MARK
        "h\x02"  // BINGET 2 ('frames')
        "h\x03"  // BINGET 3 (L)
        "h\x07"  // BINGET 7 ('addr')
        "K\x02"  // BININT1 2
        "u"      // SETITEMS
        "e"      // APPENDS
        ".");    // STOP
  PickleDocument skim(bytes, "b.pickle", skip("frames"));
  EXPECT_TRUE(skim.skipped());
  auto entries = skim.root().items();
  ASSERT_EQ(entries.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(entries[i].is_dict());
    ASSERT_EQ(entries[i].dict_size(), 2u);
    EXPECT_EQ(get(entries[i], "frames").kind, Kind::Skipped);
    EXPECT_EQ(static_cast<Kind>(get(entries[i], "frames").length), Kind::List);
    EXPECT_EQ(get(entries[i], "addr").integer, static_cast<std::int64_t>(i + 1));
  }
  PickleDocument full(bytes, "b.pickle");
  auto fe = full.root().items();
  ASSERT_EQ(fe.size(), 2u);
  ASSERT_EQ(get(fe[0], "frames").kind, Kind::List);
  EXPECT_EQ(get(fe[0], "frames").list, get(fe[1], "frames").list);  // one list, two references
  std::string why;
  EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "frames", &why)) << why;
  EXPECT_EQ(count_skipped(skim.root()), 2u);
}

TEST(PickleSkip, EveryContainerOpcodeUnderTheKeyIsSkipped) {
  // {'frames': X} for X built by each container opcode; the kind recorded is X's.
  struct Case {
    std::string bytes;
    Kind kind;
  };
  const Case cases[] = {
      // EMPTY_DICT 'frames' EMPTY_TUPLE SETITEM STOP: {'frames': ()}
      {B("\x80\x04}\x8c\x06"
         "frames"
         ")s."),
       Kind::Tuple},
      // ... BININT1 1 BININT1 2 TUPLE2 SETITEM: {'frames': (1, 2)}
      {B("\x80\x04}\x8c\x06"
         "frames"
         "K\x01"
         "K\x02"
         "\x86s."),
       Kind::Tuple},
      // ... MARK BININT1 1 TUPLE SETITEM: {'frames': (1,)}
      {B("\x80\x04}\x8c\x06"
         "frames"
         "(K\x01"
         "ts."),
       Kind::Tuple},
      // ... MARK 'a' BININT1 1 DICT SETITEM: {'frames': {'a': 1}}
      {B("\x80\x04}\x8c\x06"
         "frames"
         "(\x8c\x01"
         "a"
         "K\x01"
         "ds."),
       Kind::Dict},
      // ... MARK BININT1 1 LIST SETITEM: {'frames': [1]}
      {B("\x80\x04}\x8c\x06"
         "frames"
         "(K\x01"
         "ls."),
       Kind::List},
      // protocol 0, text opcodes: MARK DICT PUT 0, UNICODE 'frames' PUT 1, MARK LIST PUT 2,
      // INT 1 APPEND SETITEM STOP: {'frames': [1]} (the key is decoded into the arena)
      {"(dp0\nVframes\np1\n(lp2\nI1\nas.", Kind::List},
      // protocol 2 str key (SHORT_BINSTRING): Python 3 reads it as the str 'frames'
      {B("\x80\x02}U\x06"
         "frames"
         "]K\x01"
         "as."),
       Kind::List},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(to_hex(c.bytes));
    PickleDocument skim(c.bytes, "c.pickle", skip("frames"));
    EXPECT_TRUE(skim.skipped());
    ASSERT_EQ(skim.root().dict_size(), 1u);
    const Value& v = get(skim.root(), "frames");
    EXPECT_EQ(v.kind, Kind::Skipped);
    EXPECT_EQ(static_cast<Kind>(v.length), c.kind);
    PickleDocument full(c.bytes, "c.pickle");
    EXPECT_EQ(get(full.root(), "frames").kind, c.kind);
    std::string why;
    EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "frames", &why)) << why;
  }
}

TEST(PickleSkip, OnlyTheStrKeyCounts) {
  // {b'frames': [1], 'framez': [2], 'frames': 3}: a bytes key is not the str 'frames', a
  // near miss is not it, and a scalar under the key stays a scalar. Nothing to skip.
  const std::string bytes =
      B("\x80\x04}("
        "C\x06"
        "frames"
        "]K\x01"
        "a"  // SHORT_BINBYTES b'frames' [1]
        "\x8c\x06"
        "framez"
        "]K\x02"
        "a"  // 'framez' [2]
        "\x8c\x06"
        "frames"
        "K\x03"  // 'frames' 3
        "u.");
  PickleDocument skim(bytes, "k.pickle", skip("frames"));
  EXPECT_TRUE(skim.skipped());  // skipping ran (and found nothing to skip)
  ASSERT_EQ(skim.root().dict_size(), 3u);
  ASSERT_EQ(skim.root().dict_value(0).kind, Kind::List);
  ASSERT_EQ(skim.root().dict_value(0).items().size(), 1u);
  ASSERT_EQ(skim.root().dict_value(1).kind, Kind::List);
  EXPECT_EQ(get(skim.root(), "frames").integer, 3);
  PickleDocument full(bytes, "k.pickle");
  std::string why;
  EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "", &why)) << why;  // identical
}

// A skipped container reachable another way: the reader must start again without skipping.
void expect_fallback(const std::string& bytes) {
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  EXPECT_FALSE(skim.skipped());
  EXPECT_EQ(count_skipped(skim.root()), 0u);
  PickleDocument full(bytes, "e.pickle");
  std::string why;
  EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "", &why)) << why;
}

TEST(PickleSkipEscapes, FramesListFetchedIntoAPlainList) {
  // L = [7]; {'frames': L, 'list': [L]}
  const std::string bytes =
      B("\x80\x04"
        "}\x94("  // EMPTY_DICT MEMOIZE 0, MARK
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 1
        "]\x94"   // EMPTY_LIST MEMOIZE 2 (L)
        "K\x07"
        "a"  // BININT1 7, APPEND
        "\x8c\x04"
        "list"   // 'list'
        "\x94"   // MEMOIZE 3
        "]\x94"  // EMPTY_LIST MEMOIZE 4
        "h\x02"
        "a"     // BINGET 2 (L), APPEND
        "u.");  // SETITEMS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  const Value& frames = get(skim.root(), "frames");
  ASSERT_EQ(frames.kind, Kind::List);
  ASSERT_EQ(frames.items().size(), 1u);
  EXPECT_EQ(frames.items()[0].integer, 7);
  const Value& list = get(skim.root(), "list");
  ASSERT_EQ(list.items().size(), 1u);
  EXPECT_EQ(list.items()[0].list, frames.list);
}

TEST(PickleSkipEscapes, FrameDictFetchedIntoAnotherKey) {
  // F = {'name': 'f'}; {'frames': [F], 'other': F}
  const std::string bytes =
      B("\x80\x04"
        "}\x94("  // EMPTY_DICT MEMOIZE 0, MARK
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 1
        "]\x94"   // EMPTY_LIST MEMOIZE 2
        "}\x94"   // EMPTY_DICT MEMOIZE 3 (F)
        "\x8c\x04"
        "name"  // 'name'
        "\x94"  // MEMOIZE 4
        "\x8c\x01"
        "f"     // 'f'
        "\x94"  // MEMOIZE 5
        "s"
        "a"  // SETITEM, APPEND
        "\x8c\x05"
        "other"  // 'other'
        "\x94"   // MEMOIZE 6
        "h\x03"  // BINGET 3 (F)
        "u.");   // SETITEMS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  const Value& frames = get(skim.root(), "frames");
  ASSERT_EQ(frames.kind, Kind::List);
  ASSERT_EQ(frames.items().size(), 1u);
  const Value& other = get(skim.root(), "other");
  ASSERT_TRUE(other.is_dict());
  EXPECT_EQ(get(other, "name").str(), "f");
  EXPECT_EQ(other.dict, frames.items()[0].dict);
}

TEST(PickleSkipEscapes, SkippedListUnderAnotherKeyOfARememberedKeyArray) {
  // L = []; [{'a': 1, 'b': 2, 'c': 3, 'frames': L}, {'a': 4, 'b': L, 'c': 6, 'frames': []}]: the
  // second dict's keys are the first one's key array (its values alone are tested), and L under
  // 'b' is a skipped value reachable under another key.
  const std::string bytes =
      B("\x80\x04"
        "]\x94("  // EMPTY_LIST MEMOIZE 0, MARK
        "}("      // EMPTY_DICT, MARK (no MEMOIZE: the checked path's SETITEMS)
        "\x8c\x01"
        "a\x94K\x01"  // 'a' MEMOIZE 1, BININT1 1
        "\x8c\x01"
        "b\x94K\x02"  // 'b' MEMOIZE 2, BININT1 2
        "\x8c\x01"
        "c\x94K\x03"  // 'c' MEMOIZE 3, BININT1 3
        "\x8c\x06"
        "frames\x94"  // 'frames' MEMOIZE 4
        "]\x94u"      // EMPTY_LIST MEMOIZE 5 (L), SETITEMS
        "}("          // EMPTY_DICT, MARK
        "h\x01K\x04"  // 'a' 4
        "h\x02h\x05"  // 'b' L
        "h\x03K\x06"  // 'c' 6
        "h\x04]u"     // 'frames' [], SETITEMS
        "e.");        // APPENDS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  const auto dicts = skim.root().items();
  ASSERT_EQ(dicts.size(), 2u);
  EXPECT_EQ(get(dicts[1], "b").list, get(dicts[0], "frames").list);
  EXPECT_EQ(get(dicts[1], "c").integer, 6);
}

TEST(PickleSkipEscapes, FramesListAsTheRoot) {
  // d = {'frames': L}; L.append(1); the pickle's result is L itself: [1]
  const std::string bytes =
      B("\x80\x04"
        "}\x94"  // EMPTY_DICT MEMOIZE 0
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 1
        "]\x94"   // EMPTY_LIST MEMOIZE 2 (L)
        "K\x01"
        "a"      // BININT1 1, APPEND
        "s"      // SETITEM: d['frames'] = L
        "0"      // POP d
        "h\x02"  // BINGET 2 (L)
        ".");    // STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  ASSERT_EQ(skim.root().kind, Kind::List);
  ASSERT_EQ(skim.root().items().size(), 1u);
  EXPECT_EQ(skim.root().items()[0].integer, 1);
}

TEST(PickleSkipEscapes, SkippedTupleAsADictKey) {
  // T = (); {'frames': T, T: 1}
  const std::string bytes =
      B("\x80\x04"
        "}\x94("  // EMPTY_DICT MEMOIZE 0, MARK
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 1
        ")\x94"   // EMPTY_TUPLE MEMOIZE 2 (T)
        "h\x02"   // BINGET 2 (T), as a key
        "K\x01"   // BININT1 1
        "u.");    // SETITEMS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  ASSERT_EQ(skim.root().dict_size(), 2u);
  EXPECT_EQ(get(skim.root(), "frames").kind, Kind::Tuple);
  EXPECT_EQ(skim.root().dict_key(1).kind, Kind::Tuple);
  EXPECT_TRUE(skim.root().dict_key(1).items().empty());
  EXPECT_EQ(skim.root().dict_value(1).integer, 1);
}

TEST(PickleSkipEscapes, TupleBuiltOnTopOfASkippedOneUsedAsAKey) {
  // {'frames': (), (): 2} with the second () pushed right above the skipped first one (no memo):
  // the reader's guess that it belongs in the skipped tuple is wrong.
  const std::string bytes =
      B("\x80\x04"
        "}("  // EMPTY_DICT MARK
        "\x8c\x06"
        "frames"  // 'frames'
        ")"       // EMPTY_TUPLE (under 'frames')
        ")"       // EMPTY_TUPLE (a key)
        "K\x02"   // BININT1 2
        "u.");    // SETITEMS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  ASSERT_EQ(skim.root().dict_size(), 2u);
  EXPECT_EQ(skim.root().dict_key(1).kind, Kind::Tuple);
  EXPECT_EQ(skim.root().dict_value(1).integer, 2);
}

TEST(PickleSkipEscapes, ListMadeInsideAFramesMarkAppendedToABuiltList) {
  // K = []; {'keep': K, 'frames': [K]}, where, while the frames list's APPENDS is open, a new
  // list is appended to K: K = [[]]. The new list sits above the MARK of a skipped list, so the
  // reader may guess it is a frame; it goes into K, which is built.
  const std::string bytes =
      B("\x80\x04"
        "}\x94("  // EMPTY_DICT MEMOIZE 0, MARK
        "\x8c\x04"
        "keep"   // 'keep'
        "\x94"   // MEMOIZE 1
        "]\x94"  // EMPTY_LIST MEMOIZE 2 (K)
        "\x8c\x06"
        "frames"  // 'frames'
        "\x94"    // MEMOIZE 3
        "]\x94"   // EMPTY_LIST MEMOIZE 4 (the frames list)
        "("       // MARK
        "h\x02"   // BINGET 2 (K)
        "]\x94"   // EMPTY_LIST MEMOIZE 5
        "a"       // APPEND: K.append([])
        "e"       // APPENDS: frames.extend([K])
        "u.");    // SETITEMS STOP
  expect_fallback(bytes);
  PickleDocument skim(bytes, "e.pickle", skip("frames"));
  const Value& keep = get(skim.root(), "keep");
  ASSERT_EQ(keep.kind, Kind::List);
  ASSERT_EQ(keep.items().size(), 1u);
  EXPECT_EQ(keep.items()[0].kind, Kind::List);
  const Value& frames = get(skim.root(), "frames");
  ASSERT_EQ(frames.kind, Kind::List);
  ASSERT_EQ(frames.items().size(), 1u);
  EXPECT_EQ(frames.items()[0].list, keep.list);
}

// ---- snapshot-like pickles: the same both ways, whatever the damage --------------------------

// CPython 3: pickle.dumps(snap, 4), byte for byte, annotated from pickletools.dis (memo slots in
// brackets), with
//   F1 = {'filename': 'a.py', 'line': 10, 'name': 'f'}, F2 = {'filename': 'b.py', 'line': 20,
//   'name': 'g'}, F3 = {'filename': 'a.py', 'line': 11, 'name': 'h'}, F4 = {'filename': 'c.py',
//   'line': 30, 'name': 'k'}, A = 0x7f0000000000,
//   snap = {'device_traces': [[
//             {'action': 'alloc', 'addr': A, 'size': 512, 'frames': [F1, F2]},
//             {'action': 'free_requested', 'addr': A, 'size': 512, 'frames': [F1, F2]},
//             {'action': 'alloc', 'addr': A + 512, 'size': 1024, 'frames': [F2, F3, F1]},
//             {'action': 'free_completed', 'addr': A, 'size': 512, 'frames': [F4]},
//             {'action': 'segment_alloc', 'addr': A, 'size': 2097152, 'frames': []}]],
//           'segments': [{'address': A, 'total_size': 2097152, 'blocks': [
//             {'size': 1024, 'state': 'active_allocated', 'frames': [F2, F3, F1]},
//             {'size': 512, 'state': 'inactive', 'frames': []}]}]}
// It has what real snapshots have: frame dicts built inline inside a frames list (with MARK and
// without), frames lists that are runs of BINGETs closed by APPENDS, a single APPEND, empty
// frames lists, and frame dicts first built under one entry and fetched under later ones.
const std::string kSnapshot4 =
    B("\x80\x04"                              // PROTO 4
      "\x95\xf5\x01\x00\x00\x00\x00\x00\x00"  // FRAME 501
      "}\x94("                                // EMPTY_DICT [0] MARK
      "\x8c\x0d"
      "device_traces"
      "\x94"  // 'device_traces' [1]
      "]\x94"
      "]\x94"
      "("  // EMPTY_LIST [2] EMPTY_LIST [3] MARK
      // entry 0
      "}\x94("  // EMPTY_DICT [4] MARK
      "\x8c\x06"
      "action"
      "\x94"  // 'action' [5]
      "\x8c\x05"
      "alloc"
      "\x94"  // 'alloc' [6]
      "\x8c\x04"
      "addr"
      "\x94"                              // 'addr' [7]
      "\x8a\x06\x00\x00\x00\x00\x00\x7f"  // LONG1 A
      "\x8c\x04"
      "size"
      "\x94"       // 'size' [8]
      "M\x00\x02"  // BININT2 512
      "\x8c\x06"
      "frames"
      "\x94"    // 'frames' [9]
      "]\x94("  // EMPTY_LIST [10] MARK
      "}\x94("  //   F1: EMPTY_DICT [11] MARK
      "\x8c\x08"
      "filename"
      "\x94"  //   'filename' [12]
      "\x8c\x04"
      "a.py"
      "\x94"  //   'a.py' [13]
      "\x8c\x04"
      "line"
      "\x94"   //   'line' [14]
      "K\x0a"  //   BININT1 10
      "\x8c\x04"
      "name"
      "\x94"  //   'name' [15]
      "\x8c\x01"
      "f"
      "\x94"    //   'f' [16]
      "u"       //   SETITEMS
      "}\x94("  //   F2: EMPTY_DICT [17] MARK
      "h\x0c"   //   BINGET 12 'filename'
      "\x8c\x04"
      "b.py"
      "\x94"  //   'b.py' [18]
      "h\x0e"
      "K\x14"  //   BINGET 14 'line', BININT1 20
      "h\x0f"  //   BINGET 15 'name'
      "\x8c\x01"
      "g"
      "\x94"  //   'g' [19]
      "u"     //   SETITEMS
      "e"     // APPENDS (frames)
      "u"     // SETITEMS (entry 0)
      // entry 1
      "}\x94("  // EMPTY_DICT [20] MARK
      "h\x05"   // BINGET 5 'action'
      "\x8c\x0e"
      "free_requested"
      "\x94"                              // 'free_requested' [21]
      "h\x07"                             // BINGET 7 'addr'
      "\x8a\x06\x00\x00\x00\x00\x00\x7f"  // LONG1 A
      "h\x08"
      "M\x00\x02"  // BINGET 8 'size', BININT2 512
      "h\x09"      // BINGET 9 'frames'
      "]\x94("     // EMPTY_LIST [22] MARK
      "h\x0b"
      "h\x11"  //   BINGET 11 (F1), BINGET 17 (F2)
      "e"      // APPENDS
      "u"      // SETITEMS
      // entry 2
      "}\x94("  // EMPTY_DICT [23] MARK
      "h\x05"
      "h\x06"
      "h\x07"                             // 'action' 'alloc' 'addr'
      "\x8a\x06\x00\x02\x00\x00\x00\x7f"  // LONG1 A + 512
      "h\x08"
      "M\x00\x04"  // 'size', BININT2 1024
      "h\x09"      // 'frames'
      "]\x94("     // EMPTY_LIST [24] MARK
      "h\x11"      //   BINGET 17 (F2)
      "}\x94("     //   F3: EMPTY_DICT [25] MARK
      "h\x0c"
      "h\x0d"
      "h\x0e"  //   'filename' 'a.py' 'line'
      "K\x0b"  //   BININT1 11
      "h\x0f"  //   'name'
      "\x8c\x01"
      "h"
      "\x94"   //   'h' [26]
      "u"      //   SETITEMS
      "h\x0b"  //   BINGET 11 (F1)
      "e"      // APPENDS
      "u"      // SETITEMS
      // entry 3
      "}\x94("  // EMPTY_DICT [27] MARK
      "h\x05"   // 'action'
      "\x8c\x0e"
      "free_completed"
      "\x94"                              // 'free_completed' [28]
      "h\x07"                             // 'addr'
      "\x8a\x06\x00\x00\x00\x00\x00\x7f"  // LONG1 A
      "h\x08"
      "M\x00\x02"  // 'size', BININT2 512
      "h\x09"      // 'frames'
      "]\x94"      // EMPTY_LIST [29]
      "}\x94("     //   F4: EMPTY_DICT [30] MARK
      "h\x0c"      //   'filename'
      "\x8c\x04"
      "c.py"
      "\x94"  //   'c.py' [31]
      "h\x0e"
      "K\x1e"  //   'line', BININT1 30
      "h\x0f"  //   'name'
      "\x8c\x01"
      "k"
      "\x94"  //   'k' [32]
      "u"     //   SETITEMS
      "a"     // APPEND (frames)
      "u"     // SETITEMS
      // entry 4
      "}\x94("  // EMPTY_DICT [33] MARK
      "h\x05"   // 'action'
      "\x8c\x0d"
      "segment_alloc"
      "\x94"                              // 'segment_alloc' [34]
      "h\x07"                             // 'addr'
      "\x8a\x06\x00\x00\x00\x00\x00\x7f"  // LONG1 A
      "h\x08"
      "J\x00\x00\x20\x00"  // 'size', BININT 2097152
      "h\x09"
      "]\x94"  // 'frames', EMPTY_LIST [35]
      "u"      // SETITEMS
      "e"      // APPENDS (device 0's entries)
      "a"      // APPEND (device_traces)
      "\x8c\x08"
      "segments"
      "\x94"    // 'segments' [36]
      "]\x94"   // EMPTY_LIST [37]
      "}\x94("  // EMPTY_DICT [38] MARK
      "\x8c\x07"
      "address"
      "\x94"                              // 'address' [39]
      "\x8a\x06\x00\x00\x00\x00\x00\x7f"  // LONG1 A
      "\x8c\x0a"
      "total_size"
      "\x94"               // 'total_size' [40]
      "J\x00\x00\x20\x00"  // BININT 2097152
      "\x8c\x06"
      "blocks"
      "\x94"    // 'blocks' [41]
      "]\x94("  // EMPTY_LIST [42] MARK
      "}\x94("  //   EMPTY_DICT [43] MARK
      "h\x08"
      "M\x00\x04"  //   'size', BININT2 1024
      "\x8c\x05"
      "state"
      "\x94"  //   'state' [44]
      "\x8c\x10"
      "active_allocated"
      "\x94"    //   'active_allocated' [45]
      "h\x09"   //   'frames'
      "]\x94("  //   EMPTY_LIST [46] MARK
      "h\x11"
      "h\x19"
      "h\x0b"   //     BINGET 17, 25, 11 (F2 F3 F1)
      "e"       //   APPENDS
      "u"       //   SETITEMS
      "}\x94("  //   EMPTY_DICT [47] MARK
      "h\x08"
      "M\x00\x02"  //   'size', BININT2 512
      "h\x2c"      //   BINGET 44 'state'
      "\x8c\x08"
      "inactive"
      "\x94"  //   'inactive' [48]
      "h\x09"
      "]\x94"  //   'frames', EMPTY_LIST [49]
      "u"      //   SETITEMS
      "e"      // APPENDS (blocks)
      "u"      // SETITEMS (segment)
      "a"      // APPEND (segments)
      "u"      // SETITEMS (root)
      ".");    // STOP

// The same snapshot with the BINGET run of the first block's frames (byte 473) written with
// LONG_BINGETs mixed in, as a pickler with more than 256 memo slots would: j 17, h 25, j 11.
// FRAME grows by the 6 added bytes.
std::string snapshot4_long_binget() {
  std::string s = kSnapshot4;
  if (s.compare(473, 6,
                B("h\x11"
                  "h\x19"
                  "h\x0b")) != 0)
    throw std::logic_error("kSnapshot4 moved");
  s.replace(473, 6,
            B("j\x11\x00\x00\x00"
              "h\x19"
              "j\x0b\x00\x00\x00"));
  s[3] = static_cast<char>(0xf5 + 6);  // FRAME 507
  return s;
}

// CPython 3: pickle.dumps(snap, 2) of the same value: BINUNICODE and BINPUT instead of
// SHORT_BINUNICODE and MEMOIZE, no FRAME (TorchScript's pickler writes this style).
const char* const kSnapshot2Hex =
    "80027d710028580d0000006465766963655f74726163657371015d71025d7103287d7104285806000000616374"
    "696f6e71055805000000616c6c6f63710658040000006164647271078a0600000000007f580400000073697a65"
    "71084d000258060000006672616d657371095d710a287d710b28580800000066696c656e616d65710c58040000"
    "00612e7079710d58040000006c696e65710e4b0a58040000006e616d65710f5801000000667110757d71112868"
    "0c5804000000622e70797112680e4b14680f58010000006771137565757d7114286805580e000000667265655f"
    "726571756573746564711568078a0600000000007f68084d000268095d711628680b681165757d711728680568"
    "0668078a0600020000007f68084d000468095d71182868117d711928680c680d680e4b0b680f58010000006871"
    "1a75680b65757d711b286805580e000000667265655f636f6d706c65746564711c68078a0600000000007f6808"
    "4d000268095d711d7d711e28680c5804000000632e7079711f680e4b1e680f58010000006b71207561757d7121"
    "286805580d0000007365676d656e745f616c6c6f63712268078a0600000000007f68084a0000200068095d7123"
    "75656158080000007365676d656e747371245d71257d71262858070000006164647265737371278a0600000000"
    "007f580a000000746f74616c5f73697a6571284a000020005806000000626c6f636b7371295d712a287d712b28"
    "68084d000458050000007374617465712c58100000006163746976655f616c6c6f6361746564712d68095d712e"
    "2868116819680b65757d712f2868084d0002682c5808000000696e616374697665713068095d71317565756175"
    "2e";

// What both styles hold, by hand from the value above.
void expect_snapshot_value(const Value& root) {
  constexpr std::int64_t A = 0x7f0000000000;
  ASSERT_TRUE(root.is_dict());
  ASSERT_EQ(root.dict_size(), 2u);
  auto devices = get(root, "device_traces").items();
  ASSERT_EQ(devices.size(), 1u);
  auto entries = devices[0].items();
  ASSERT_EQ(entries.size(), 5u);
  const char* actions[] = {"alloc", "free_requested", "alloc", "free_completed", "segment_alloc"};
  const std::int64_t addrs[] = {A, A, A + 512, A, A};
  const std::int64_t sizes[] = {512, 512, 1024, 512, 2097152};
  const std::size_t frames[] = {2, 2, 3, 1, 0};
  for (std::size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(get(entries[i], "action").str(), actions[i]);
    EXPECT_EQ(get(entries[i], "addr").integer, addrs[i]);
    EXPECT_EQ(get(entries[i], "size").integer, sizes[i]);
    ASSERT_EQ(get(entries[i], "frames").kind, Kind::List);
    ASSERT_EQ(get(entries[i], "frames").items().size(), frames[i]);
  }
  auto e0 = get(entries[0], "frames").items();
  auto e1 = get(entries[1], "frames").items();
  auto e2 = get(entries[2], "frames").items();
  const Value& f1 = e0[0];
  const Value& f2 = e0[1];
  EXPECT_EQ(get(f1, "filename").str(), "a.py");
  EXPECT_EQ(get(f1, "line").integer, 10);
  EXPECT_EQ(get(f2, "name").str(), "g");
  EXPECT_EQ(e1[0].dict, f1.dict);
  EXPECT_EQ(e1[1].dict, f2.dict);
  EXPECT_EQ(e2[0].dict, f2.dict);
  EXPECT_EQ(get(e2[1], "name").str(), "h");
  EXPECT_EQ(e2[2].dict, f1.dict);
  EXPECT_EQ(get(get(entries[3], "frames").items()[0], "filename").str(), "c.py");
  auto segments = get(root, "segments").items();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(get(segments[0], "address").integer, A);
  EXPECT_EQ(get(segments[0], "total_size").integer, 2097152);
  auto blocks = get(segments[0], "blocks").items();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(get(blocks[0], "state").str(), "active_allocated");
  auto b0 = get(blocks[0], "frames").items();
  ASSERT_EQ(b0.size(), 3u);
  EXPECT_EQ(b0[0].dict, f2.dict);
  EXPECT_EQ(b0[1].dict, e2[1].dict);
  EXPECT_EQ(b0[2].dict, f1.dict);
  EXPECT_EQ(get(blocks[1], "state").str(), "inactive");
  EXPECT_TRUE(get(blocks[1], "frames").items().empty());
}

std::vector<std::pair<std::string, std::string>> snapshot_pickles() {
  return {{"protocol 4", kSnapshot4},
          {"protocol 4, LONG_BINGET", snapshot4_long_binget()},
          {"protocol 2", from_hex(kSnapshot2Hex)}};
}

TEST(PickleSkipSnapshot, HandBuiltSnapshotParsesBothWays) {
  ASSERT_EQ(kSnapshot4.size(), 512u);  // 11 bytes of header + FRAME 501
  for (const auto& [name, bytes] : snapshot_pickles()) {
    SCOPED_TRACE(name);
    PickleDocument full(bytes, "s.pickle");
    expect_snapshot_value(full.root());
    PickleDocument skim(bytes, "s.pickle", skip("frames"));
    EXPECT_TRUE(skim.skipped());
    std::string why;
    EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "frames", &why)) << why;
    // Every frames value (5 entries, 2 blocks) is skipped, and it was a list.
    EXPECT_EQ(count_skipped(skim.root()), 7u);
    auto entries = get(skim.root(), "device_traces").items()[0].items();
    for (const Value& e : entries) {
      EXPECT_EQ(get(e, "frames").kind, Kind::Skipped);
      EXPECT_EQ(static_cast<Kind>(get(e, "frames").length), Kind::List);
    }
  }
  // The three encodings hold the same value.
  auto pickles = snapshot_pickles();
  PickleDocument a(pickles[0].second, "s.pickle");
  for (std::size_t i = 1; i < pickles.size(); ++i) {
    PickleDocument b(pickles[i].second, "s.pickle");
    std::string why;
    EXPECT_TRUE(same_except_skipped(a.root(), b.root(), "", &why)) << pickles[i].first << why;
  }
}

TEST(PickleSkipSnapshot, EveryTruncationFailsTheSameWay) {
  for (const auto& [name, bytes] : snapshot_pickles()) {
    SCOPED_TRACE(name);
    Tally tally;
    for (std::size_t n = 0; n < bytes.size(); ++n)
      expect_same_both_ways(std::string_view(bytes).substr(0, n), "frames", tally,
                            [&] { return "prefix of " + std::to_string(n) + " bytes"; });
    // No proper prefix has its STOP: each one fails.
    EXPECT_EQ(tally.refused, bytes.size());
  }
}

// Replacement bytes for byte `i`, whose value is `b`: a bit flip, the extremes, and the opcodes
// that move values between the stack, the memo and containers (where skipping could go wrong);
// then 2 more opcodes taken in turn from a longer list, so that each of those is tried at 2 in 15
// of the offsets (all of them everywhere would take too long under ASan).
std::vector<unsigned char> replacements(std::size_t i, unsigned char b) {
  std::vector<unsigned char> r = {
      static_cast<unsigned char>(b ^ 0x01), 0x00, 0xff, 'e', 'u', ']', '}', 'h', 'j', '(', 0x94};
  static const unsigned char more[] = {')', 'a', 's', '0', '.', 't', 'd', 'l', '1', '2', 0x85, 0x86, 'q', 'N', 0x80};
  constexpr std::size_t n = sizeof more;
  for (std::size_t k = 0; k < 2; ++k) r.push_back(more[(2 * i + k) % n]);
  return r;
}

TEST(PickleSkipSnapshot, EverySingleByteMutationFailsOrParsesTheSameWay) {
  // The LONG_BINGET variant differs from protocol 4 only in one run; the sweep's 'j' covers it.
  const std::pair<std::string, std::string> pickles[] = {{"protocol 4", kSnapshot4},
                                                         {"protocol 2", from_hex(kSnapshot2Hex)}};
  for (const auto& [name, good] : pickles) {
    SCOPED_TRACE(name);
    Tally tally;
    for (std::size_t i = 0; i < good.size(); ++i) {
      for (unsigned char b : replacements(i, static_cast<unsigned char>(good[i]))) {
        if (b == static_cast<unsigned char>(good[i])) continue;
        std::string bad = good;
        bad[i] = static_cast<char>(b);
        expect_same_both_ways(bad, "frames", tally,
                              [&] { return "byte " + std::to_string(i) + " set to " + std::to_string(b); });
      }
    }
    // Not vacuous: the sweep saw refusals, documents with skipping, and fallbacks.
    EXPECT_GT(tally.refused, 0u);
    EXPECT_GT(tally.skimmed, 0u);
    EXPECT_GT(tally.fell_back, 0u);
    std::cout << "[ info     ] " << name << ": " << tally.refused << " refused, " << tally.skimmed
              << " parsed with skipping, " << tally.fell_back << " fell back\n";
  }
}

TEST(PickleSkipSnapshot, EveryMemoGetRedirectedToEverySlot) {
  // Random bytes rarely make a valid memo index; here each BINGET of the protocol 4 snapshot
  // fetches each memo slot in turn (0..49 are set, 50..55 are not): frame dicts and frames lists
  // land under other keys, in built lists, as keys, as the root, which is where a skipped value
  // could escape. (A 'h' inside a string is changed too: harmless, it is just another input.)
  const std::string& good = kSnapshot4;
  Tally tally;
  for (std::size_t i = 0; i + 1 < good.size(); ++i) {
    if (good[i] != 'h') continue;
    for (int slot = 0; slot < 56; ++slot) {
      if (static_cast<unsigned char>(good[i + 1]) == slot) continue;
      std::string bad = good;
      bad[i + 1] = static_cast<char>(slot);
      expect_same_both_ways(bad, "frames", tally,
                            [&] { return "BINGET at byte " + std::to_string(i) + " of slot " + std::to_string(slot); });
    }
  }
  EXPECT_GT(tally.refused, 0u);
  EXPECT_GT(tally.skimmed, 0u);
  EXPECT_GT(tally.fell_back, 0u);
  std::cout << "[ info     ] " << tally.refused << " refused, " << tally.skimmed << " parsed with skipping, "
            << tally.fell_back << " fell back\n";
}

// ---- real snapshots ---------------------------------------------------------------------------

TEST(PickleSkipReal, EveryRealSnapshotSkipsFramesAndOnlyFrames) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".pickle") files.push_back(entry.path());
  if (files.empty()) GTEST_SKIP() << "no *.pickle in " << dir;
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    const std::string bytes = read_file_bytes(path.string());
    PickleDocument full(bytes, path.string());
    PickleDocument skim(bytes, path.string(), skip("frames"));
    EXPECT_TRUE(skim.skipped());
    EXPECT_EQ(full.protocol(), skim.protocol());
    std::string why;
    EXPECT_TRUE(same_except_skipped(full.root(), skim.root(), "frames", &why)) << why;
    EXPECT_GT(count_skipped(skim.root()), 0u) << "a snapshot with no frames lists";
  }
}

}  // namespace
}  // namespace fraglab::pickle
