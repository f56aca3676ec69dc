// Test helper: the protocol-4 pieces CPython writes for a snapshot, for tests that hand-build
// pickles byte by byte. A string is memoized on first use (MEMOIZE) and fetched by BINGET, or by
// LONG_BINGET from slot 256 on, after.
#pragma once

#include <cstdint>
#include <string>

namespace fraglab::pickle {

class MemoWriter {
 protected:
  // SHORT_BINUNICODE `s` MEMOIZE: takes the next memo slot.
  void str(const std::string& s) {
    out_ += '\x8c';
    out_ += static_cast<char>(s.size());
    out_ += s;
    out_ += '\x94';
    ++next_slot_;
  }
  // BINGET `slot`, or LONG_BINGET when it does not fit a byte.
  void get(std::uint32_t slot) {
    if (slot < 256) {
      out_ += 'h';
      out_ += static_cast<char>(slot);
    } else {
      out_ += 'j';
      for (int i = 0; i < 4; ++i) out_ += static_cast<char>((slot >> (8 * i)) & 0xff);
    }
  }
  // A dict key: the string the first time (remembering its slot in `slot`), a GET after.
  void key(const std::string& name, std::uint32_t& slot) {
    if (slot == 0) {
      slot = next_slot_;
      str(name);
    } else {
      get(slot);
    }
  }

  std::string out_;
  std::uint32_t next_slot_ = 0;
};

}  // namespace fraglab::pickle
