// Flat dicts that Machine::take_flat_dict (pickle_fast_paths.cpp) starts and then hands over to
// the checked path in their middle: at a frame dict not seen before inside a frames list (after
// GETs, or first), at a FRAME opcode inside one, at an int key, after a tuple it made of a value
// and a small int (a segment's (0, 0)), at a tuple under the skip key, at a list of dicts (a
// segment's blocks), at a value it does not take (a float) and at a MEMOIZE after a value that is
// not a str. The checked path goes on from the stack and MARKs it is
// handed, so the document must be the one the checked switch alone builds, or the error the same: also with the input
// cut at every byte, and with each byte of the dicts replaced by an opcode that breaks them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trace/pickle_checked_path.hpp"
#include "trace/pickle_memo_writer.hpp"

namespace fraglab::pickle {
namespace {

// Protocol 4, as CPython writes a snapshot: a list (slot 0) of dicts in one MARK ... APPENDS.
class Writer : MemoWriter {
 public:
  Writer() {
    out_ = "\x80\x04]\x94(";
    next_slot_ = 1;
  }
  // {'action': 'alloc', 'addr': `addr`, 'frames': [...]}: the frames list holds `known` GETs of
  // frames seen before, then a new frame dict when `new_frame` (a FRAME opcode first when
  // `frame_opcode`), then the known GETs again.
  void entry(std::uint8_t addr, bool new_frame, bool frame_opcode = false) {
    open_dict();
    key("action", action_slot_);
    MemoWriter::key("alloc", alloc_slot_);
    key("addr", addr_slot_);
    out_ += 'K';  // BININT1
    out_ += static_cast<char>(addr);
    key("frames", frames_slot_);
    out_ += "]\x94(";  // EMPTY_LIST MEMOIZE MARK
    ++next_slot_;
    for (std::uint32_t slot : frame_slots_) get(slot);
    if (frame_opcode) out_ += std::string("\x95\0\0\0\0\0\0\0\0", 9);  // FRAME of 0 bytes
    if (new_frame) {
      open_dict();
      frame_slots_.push_back(next_slot_ - 1);
      key("name", name_slot_);
      str("f" + std::to_string(frame_slots_.size()));
      key("line", line_slot_);
      out_ += "K\x07u";  // BININT1 7, SETITEMS
    }
    for (std::uint32_t slot : frame_slots_) get(slot);
    out_ += "eu";  // APPENDS, SETITEMS
  }
  // A segment as CPython writes one: {'device': 0, 'address': A, 'pair': (0, 0), 'flag': False,
  // 'blocks': [{'size': 1, 'state': 'x'}, {'size': 2, 'state': 'x'}], 'ratio': 0.5, 7: None}.
  void segment() {
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);  // BININT1 0 (a literal stops at its NUL)
    key("address", address_slot_);
    out_ += std::string("J\0\0\x10\0", 5);  // BININT
    key("pair", pair_slot_);
    out_ += std::string("K\0K\0\x86\x94", 6);  // BININT1 0, BININT1 0, TUPLE2, MEMOIZE
    ++next_slot_;
    key("flag", flag_slot_);
    out_ += '\x89';  // NEWFALSE
    key("blocks", blocks_slot_);
    out_ += "]\x94(";
    ++next_slot_;
    for (int b = 1; b <= 2; ++b) {
      open_dict();
      key("size", size_slot_);
      out_ += 'K';
      out_ += static_cast<char>(b);
      key("state", state_slot_);
      MemoWriter::key("x", x_slot_);
      out_ += 'u';
    }
    out_ += 'e';
    key("ratio", ratio_slot_);
    out_ += std::string("G\x3f\xe0\0\0\0\0\0\0", 9);  // BINFLOAT 0.5
    out_ += "K\x07N";                                 // 7: None
    out_ += 'u';
  }
  // Dicts that start as the last segment did (its first key, then maybe others): {'device': 0,
  // 'pair': (0, 0)}, handed over at a key the segment does not have there; {'device': 0,
  // 'address': A, 'flag': False}, taken whole on the segment's keys (a key array of its own).
  void segment_other_keys() {
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);  // BININT1 0 (a literal stops at its NUL)
    key("pair", pair_slot_);
    out_ += std::string("K\0K\0\x86\x94u", 7);  // BININT1 0, BININT1 0, TUPLE2, MEMOIZE, SETITEMS
    ++next_slot_;
  }
  void dict_on_segment_keys() {
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);  // BININT1 0 (a literal stops at its NUL)
    key("address", address_slot_);
    out_ += std::string("J\0\0\x20\0", 5);
    key("flag", flag_slot_);
    out_ += "\x89u";  // NEWFALSE, SETITEMS
  }
  // Tuples the fast path makes: {'device': 0, 'pair': (3, 4)} with no MEMOIZE; {'device': 0,
  // 'pair': (1, 2)} with its first item and the tuple memoized; {'frames': (5, 6)}, under the skip
  // key when frames are skipped; {'device': 0, 'pair': <a GET of the memoized (1, 2)>}.
  void tuples() {
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);
    key("pair", pair_slot_);
    out_ += std::string("K\x03K\x04\x86u", 6);  // BININT1 3, BININT1 4, TUPLE2, SETITEMS
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);
    key("pair", pair_slot_);
    out_ += std::string("K\x01\x94K\x02\x86\x94u", 8);  // 1 MEMOIZE, 2, TUPLE2, MEMOIZE, SETITEMS
    ++next_slot_;
    const std::uint32_t tuple_slot = next_slot_++;
    open_dict();
    key("frames", frames_slot_);
    out_ += std::string("K\x05K\x06\x86u", 6);
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\0", 2);
    key("pair", pair_slot_);
    get(tuple_slot);
    out_ += 'u';
  }
  // Memoized values, which the fast path hands over at their MEMOIZE but for a str: an int, a bool
  // and a GET; a key fetched by a GET and memoized, once and then twice. Then a dict of GETs of
  // each of those memo slots. (After a segment: its keys' slots are set.)
  void memoized_values() {
    open_dict();
    key("device", device_slot_);
    out_ += std::string("K\x09\x94", 3);  // BININT1 9, MEMOIZE
    const std::uint32_t int_slot = next_slot_++;
    key("flag", flag_slot_);
    out_ += "\x88\x94";  // NEWTRUE, MEMOIZE
    const std::uint32_t bool_slot = next_slot_++;
    key("state", state_slot_);
    get(x_slot_);
    out_ += '\x94';
    const std::uint32_t got_slot = next_slot_++;
    get(size_slot_);
    out_ += "\x94K\x01";  // the key memoized, BININT1 1
    const std::uint32_t key_slot = next_slot_++;
    get(address_slot_);
    out_ += "\x94\x94K\x02u";  // the key memoized twice, BININT1 2, SETITEMS
    const std::uint32_t twice_slot = next_slot_ + 1;
    next_slot_ += 2;
    open_dict();
    for (std::uint32_t slot : {int_slot, bool_slot, got_slot, key_slot, twice_slot}) {
      out_ += 'K';
      out_ += static_cast<char>(slot);  // an int key per slot
      get(slot);
    }
    out_ += 'u';
  }
  // The slot of 'device' now holds the int 5 (BININT1 5, BINPUT, POP): the same GET bytes fetch
  // another key from here on.
  void overwrite_device_key() {
    out_ += "K\x05q";
    out_ += static_cast<char>(device_slot_);
    out_ += '0';
  }
  std::string finish() const { return out_ + "e."; }  // APPENDS, STOP

 private:
  void open_dict() {
    out_ += "}\x94(";  // EMPTY_DICT MEMOIZE MARK
    ++next_slot_;
  }
  std::vector<std::uint32_t> frame_slots_;
  std::uint32_t action_slot_ = 0, alloc_slot_ = 0, addr_slot_ = 0, frames_slot_ = 0, name_slot_ = 0, line_slot_ = 0;
  std::uint32_t device_slot_ = 0, address_slot_ = 0, pair_slot_ = 0, flag_slot_ = 0, blocks_slot_ = 0, size_slot_ = 0,
                state_slot_ = 0, x_slot_ = 0, ratio_slot_ = 0;
};

// Entries with a new frame first, after known ones, after a FRAME opcode, and entries between
// them that the fast path takes whole; then segments.
std::string snapshot_like() {
  Writer w;
  w.entry(1, true);
  w.entry(2, false);
  w.entry(3, true);
  w.entry(4, false);
  w.entry(5, true, true);
  w.entry(6, false, true);
  w.entry(7, false);
  w.segment();
  w.segment();
  w.entry(8, false);
  return w.finish();
}

// Segments one after the other (the second and third read on the first's keys, by their bytes),
// then dicts that start with the same key and go on otherwise, a dict taken whole on them, and
// memoized values and keys, and segments after a memo slot holding one of their keys was
// overwritten.
std::string segments_like() {
  Writer w;
  w.entry(1, true);
  w.segment();
  w.segment();
  w.segment();
  w.segment_other_keys();
  w.segment();
  w.dict_on_segment_keys();
  w.dict_on_segment_keys();
  w.tuples();
  w.memoized_values();
  w.segment();
  w.overwrite_device_key();
  w.segment();
  w.segment();
  w.entry(2, false);
  return w.finish();
}

TEST(PickleHandOver, AsTheCheckedPath) {
  expect_as_checked_path(snapshot_like(), "whole", true);
  expect_as_checked_path(segments_like(), "segments", true);
}

TEST(PickleHandOver, CutAtEveryByteAsTheCheckedPath) {
  for (const std::string& bytes : {snapshot_like(), segments_like()})
    for (std::size_t n = 0; n < bytes.size(); ++n)
      expect_as_checked_path(bytes.substr(0, n), "cut at " + std::to_string(n));
}

TEST(PickleHandOver, EachByteBrokenAsTheCheckedPath) {
  // MARK, SETITEMS, APPENDS, POP, EMPTY_DICT, EMPTY_LIST, a BINGET of a slot never stored, STOP.
  const std::string breakers("(ue0}]h\xf0.", 9);
  for (const std::string& bytes : {snapshot_like(), segments_like()})
    for (std::size_t at = 6; at < bytes.size(); ++at)
      for (char b : breakers) {
        if (bytes[at] == b) continue;
        std::string broken = bytes;
        broken[at] = b;
        expect_as_checked_path(broken,
                               "byte " + std::to_string(at) + " = " + std::to_string(static_cast<unsigned char>(b)));
      }
}

}  // namespace
}  // namespace fraglab::pickle
