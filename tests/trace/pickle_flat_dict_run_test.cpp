// Runs of flat dicts (trace entries) as Machine::take_flat_dicts (pickle_fast_paths.cpp) takes
// them: it checks once per run that the memo is dense (no slot left unset by a sparse PUT) and
// works out once where the last pair may start, before the input's end. These pickles put a run
// after a sparse PUT, refuse a dict in the middle of a run, and cut the input at every byte of a
// run's last dicts. The reference is the checked switch alone (PickleOptions::fast_paths = false),
// as in the fuzz harness: the same document (skipped frames lists aside), or the same error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "fraglab/types.hpp"
#include "fuzz/pickle_tree.hpp"
#include "trace/pickle.hpp"
#include "trace/pickle_checked_path.hpp"
#include "trace/pickle_memo_writer.hpp"

namespace fraglab::pickle {
namespace {

// Protocol 4, as CPython writes a snapshot's trace: a list (slot 0), then in one MARK ... APPENDS
// dicts {'action': 'alloc', 'addr': A, 'size': S, 'frames': []}, keys and 'alloc' memoized on
// first use and fetched by BINGET after.
class Writer : MemoWriter {
 public:
  // `gap`: a sparse BINPUT 200 of a str before the list's items (memo slots left unset).
  explicit Writer(bool gap) {
    out_ = "\x80\x04]\x94(";
    next_slot_ = 1;
    if (gap) out_ += std::string("\x8c\x03gapq\xc8", 7) + '0';  // SHORT_BINUNICODE 'gap' BINPUT 200 POP
  }
  void entry(std::uint64_t addr, std::uint16_t size) {
    out_ += "}\x94(";
    ++next_slot_;
    key("action", action_slot_);
    MemoWriter::key("alloc", alloc_slot_);  // the value, memoized like a key
    key("addr", addr_slot_);
    out_ += "\x8a\x06";  // LONG1, 6 bytes
    for (int i = 0; i < 6; ++i) out_ += static_cast<char>((addr >> (8 * i)) & 0xff);
    key("size", size_slot_);
    out_ += 'M';  // BININT2
    out_ += static_cast<char>(size & 0xff);
    out_ += static_cast<char>(size >> 8);
    key("frames", frames_slot_);
    out_ += "]\x94u";  // EMPTY_LIST MEMOIZE SETITEMS
    ++next_slot_;
  }
  // A dict the fast path refuses: its one key is a tuple (the checked path builds it).
  void tuple_key_entry() {
    out_ += "}\x94(K\x01K\x02\x86K\x03u";  // {(1, 2): 3}
    ++next_slot_;
  }
  // {'action': GET 150}: after a gap (slots 1..199 mostly unset) a GET of a slot never stored,
  // which the checked path refuses; with a dense memo, 150 is beyond the memo and refused too.
  void unset_slot_entry() {
    out_ += "}\x94(";
    ++next_slot_;
    key("action", action_slot_);
    out_ += "h\x96u";  // BINGET 150, SETITEMS
  }
  std::string finish() const { return out_ + "e."; }  // APPENDS, STOP

 private:
  std::uint32_t action_slot_ = 0, alloc_slot_ = 0, addr_slot_ = 0, size_slot_ = 0, frames_slot_ = 0;
};

std::string entries(bool gap, int n, int tuple_key_at = -1, int unset_slot_at = -1) {
  Writer w(gap);
  for (int i = 0; i < n; ++i) {
    if (i == tuple_key_at) w.tuple_key_entry();
    if (i == unset_slot_at) w.unset_slot_entry();
    w.entry(0x7f0000000000ull + 512u * static_cast<unsigned>(i), static_cast<std::uint16_t>(1000 + i));
  }
  return w.finish();
}

TEST(PickleFlatDictRun, DenseMemoAsTheCheckedPath) { expect_as_checked_path(entries(false, 12), "dense"); }

TEST(PickleFlatDictRun, MemoWithUnsetSlotsAsTheCheckedPath) {
  // The memo is not dense from the first dict on: no dict of the run is taken by the fast path.
  expect_as_checked_path(entries(true, 12), "after a sparse PUT");
}

TEST(PickleFlatDictRun, ADictRefusedInTheMiddleOfARunAsTheCheckedPath) {
  for (bool gap : {false, true})
    for (int at : {0, 1, 5, 11}) expect_as_checked_path(entries(gap, 12, at), "tuple key at " + std::to_string(at));
}

TEST(PickleFlatDictRun, AGetOfAnUnsetSlotInARunIsRefusedAsByTheCheckedPath) {
  for (bool gap : {false, true})
    for (int at : {1, 6}) expect_as_checked_path(entries(gap, 8, -1, at), "unset slot at " + std::to_string(at));
}

TEST(PickleFlatDictRun, CutAtEveryByteOfTheLastDictsAsTheCheckedPath) {
  // The last dicts' pairs come within the 24 bytes a pair may need before the input's end.
  for (bool gap : {false, true}) {
    const std::string whole = entries(gap, 6);
    for (std::size_t cut = whole.size() > 120 ? whole.size() - 120 : 0; cut <= whole.size(); ++cut)
      expect_as_checked_path(whole.substr(0, cut),
                             std::string(gap ? "gap" : "dense") + ", cut at byte " + std::to_string(cut));
  }
}

TEST(PickleFlatDictRun, TheWriterWritesTheEntriesItIsGiven) {
  // The hand-written bytes themselves, checked against values derived by hand: two entries.
  const std::string bytes = entries(false, 2);
  PickleDocument doc(bytes, "r.pickle");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 2u);
  ASSERT_TRUE(items[1].is_dict());
  EXPECT_EQ(items[1].find("action")->str(), "alloc");
  EXPECT_EQ(items[1].find("addr")->integer, 0x7f0000000200);
  EXPECT_EQ(items[1].find("size")->integer, 1001);
  EXPECT_EQ(items[1].find("frames")->items().size(), 0u);
}

}  // namespace
}  // namespace fraglab::pickle
