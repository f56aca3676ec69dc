// A test-only Python value and pickle writer: hand-built PyTorch snapshots in the two styles
// PyTorch writes them (allocator-model §11.1): protocol 2 (BINPUT/BINGET, BINUNICODE, as TorchScript's
// pickler writes) and protocol 4/5 (FRAME, MEMOIZE, SHORT_BINUNICODE, as Python's pickle.dump
// writes). Shared by the snapshot suites.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fraglab::testing {

struct Py;
using PyList = std::vector<Py>;
using PyDict = std::vector<std::pair<Py, Py>>;
struct PyTuple {
  std::vector<Py> items;
};
struct Py {
  std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string, PyList, PyTuple, PyDict> v;
  Py() = default;
  Py(std::nullptr_t) {}
  Py(bool b) : v(b) {}
  Py(int i) : v(std::int64_t{i}) {}
  Py(std::int64_t i) : v(i) {}
  Py(std::uint64_t u) : v(u) {}
  Py(double d) : v(d) {}
  Py(const char* s) : v(std::string(s)) {}
  Py(std::string s) : v(std::move(s)) {}
  Py(PyList l) : v(std::move(l)) {}
  Py(PyTuple t) : v(std::move(t)) {}
  Py(PyDict d) : v(std::move(d)) {}
};

class PickleWriter {
 public:
  explicit PickleWriter(int protocol) : protocol_(protocol) {}

  std::string encode(const Py& root) {
    body_.clear();
    write(root);
    body_.push_back('.');
    std::string out;
    out.push_back('\x80');
    out.push_back(static_cast<char>(protocol_));
    if (protocol_ >= 4) {  // one FRAME around everything, as pickle.dump does for small data
      out.push_back('\x95');
      put_le(out, body_.size(), 8);
    }
    return out + body_;
  }

 private:
  static void put_le(std::string& s, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void op(char c) { body_.push_back(c); }
  void memoize() {
    std::uint32_t index = next_memo_++;
    if (protocol_ >= 4) {
      op('\x94');  // MEMOIZE
    } else if (index < 256) {
      op('q');
      put_le(body_, index, 1);
    } else {
      op('r');
      put_le(body_, index, 4);
    }
  }
  void get(std::uint32_t index) {
    if (index < 256) {
      op('h');
      put_le(body_, index, 1);
    } else {
      op('j');
      put_le(body_, index, 4);
    }
  }
  void write_int(std::int64_t i) {
    if (i >= 0 && i < 256) {
      op('K');
      put_le(body_, static_cast<std::uint64_t>(i), 1);
    } else if (i >= 0 && i < 65536) {
      op('M');
      put_le(body_, static_cast<std::uint64_t>(i), 2);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      op('J');
      put_le(body_, static_cast<std::uint64_t>(i), 4);
    } else {
      // LONG1: shortest little-endian two's complement.
      std::string bytes;
      std::int64_t v = i;
      for (;;) {
        bytes.push_back(static_cast<char>(v & 0xff));
        std::int64_t rest = v >> 8;
        bool sign = bytes.back() & 0x80;
        if ((rest == 0 && !sign) || (rest == -1 && sign)) break;
        v = rest;
      }
      op('\x8a');
      put_le(body_, bytes.size(), 1);
      body_ += bytes;
    }
  }
  void write(const Py& value) {
    std::visit([this](const auto& x) { write_alt(x); }, value.v);
  }
  void write_alt(std::monostate) { op('N'); }
  void write_alt(bool b) { op(b ? '\x88' : '\x89'); }
  void write_alt(std::int64_t i) { write_int(i); }
  void write_alt(std::uint64_t u) {
    if (u <= static_cast<std::uint64_t>(INT64_MAX)) return write_int(static_cast<std::int64_t>(u));
    op('\x8a');
    put_le(body_, 9, 1);
    put_le(body_, u, 8);
    body_.push_back('\0');
  }
  void write_alt(double d) {
    op('G');
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    for (int i = 7; i >= 0; --i) body_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  void write_alt(const std::string& s) {
    // Equal strings are written once and fetched from the memo after, as CPython does for
    // interned keys.
    if (auto it = strings_.find(s); it != strings_.end()) return get(it->second);
    if (protocol_ >= 4 && s.size() < 256) {
      op('\x8c');
      put_le(body_, s.size(), 1);
    } else {
      op('X');
      put_le(body_, s.size(), 4);
    }
    body_ += s;
    strings_[s] = next_memo_;
    memoize();
  }
  void write_alt(const PyList& l) {
    op(']');
    memoize();
    if (l.size() == 1) {
      write(l[0]);
      op('a');
    } else if (!l.empty()) {
      op('(');
      for (const Py& x : l) write(x);
      op('e');
    }
  }
  void write_alt(const PyTuple& t) {
    if (t.items.empty()) return op(')');
    if (t.items.size() <= 3) {
      for (const Py& x : t.items) write(x);
      op(static_cast<char>(0x85 + t.items.size() - 1));
    } else {
      op('(');
      for (const Py& x : t.items) write(x);
      op('t');
    }
    memoize();
  }
  void write_alt(const PyDict& d) {
    op('}');
    memoize();
    if (d.empty()) return;
    op('(');
    for (const auto& [k, v] : d) {
      write(k);
      write(v);
    }
    op('u');
  }

  int protocol_;
  std::string body_;
  std::uint32_t next_memo_ = 0;
  std::map<std::string, std::uint32_t> strings_;
};

}  // namespace fraglab::testing
