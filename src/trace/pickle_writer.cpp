// PickleWriter: see fraglab/pickle_writer.hpp. Opcodes as in CPython's Lib/pickletools.py.
#include "fraglab/pickle_writer.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>

namespace fraglab {
namespace {

constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kTuple = 't';
constexpr char kNone = 'N';
constexpr char kTrue = '\x88';
constexpr char kFalse = '\x89';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kBinUnicode = 'X';

// Python batches container items in runs of this many (pickle.py _BATCHSIZE).
constexpr std::uint64_t kBatch = 1000;

}  // namespace

PickleWriter::PickleWriter() {
  op(kProto);
  op('\x02');
}

void PickleWriter::put_le(std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A dict or list gets a MARK after its EMPTY_* opcode; every kBatch items (pairs count as two)
// are closed with SETITEMS / APPENDS and a new MARK opened. Tuples are one MARK ... TUPLE.
void PickleWriter::item() {
  if (open_.empty()) return;
  Open& o = open_.back();
  // Called before the item is written: a full batch is closed before the next key (a dict's
  // batch holds whole pairs) or the next list item.
  const std::uint64_t per_batch = o.kind == Kind::Dict ? 2 * kBatch : kBatch;
  if (o.kind != Kind::Tuple && o.items == per_batch) {
    op(o.kind == Kind::Dict ? kSetItems : kAppends);
    op(kMark);
    o.items = 0;
  }
  ++o.items;
}

void PickleWriter::begin_dict() {
  item();
  op(kEmptyDict);
  op(kMark);
  open_.push_back({Kind::Dict});
}

void PickleWriter::end_dict() {
  if (open_.empty() || open_.back().kind != Kind::Dict) throw std::logic_error("PickleWriter: end_dict without dict");
  open_.pop_back();
  op(kSetItems);  // an empty MARK ... SETITEMS is valid and adds nothing
}

void PickleWriter::begin_list() {
  item();
  op(kEmptyList);
  op(kMark);
  open_.push_back({Kind::List});
}

void PickleWriter::end_list() {
  if (open_.empty() || open_.back().kind != Kind::List) throw std::logic_error("PickleWriter: end_list without list");
  open_.pop_back();
  op(kAppends);
}

void PickleWriter::begin_tuple() {
  item();
  op(kMark);
  open_.push_back({Kind::Tuple});
}

void PickleWriter::end_tuple() {
  if (open_.empty() || open_.back().kind != Kind::Tuple)
    throw std::logic_error("PickleWriter: end_tuple without tuple");
  open_.pop_back();
  op(kTuple);
}

void PickleWriter::none() {
  item();
  op(kNone);
}

void PickleWriter::boolean(bool b) {
  item();
  op(b ? kTrue : kFalse);
}

void PickleWriter::integer(std::int64_t i) {
  item();
  if (i >= 0 && i < 256) {
    op(kBinInt1);
    put_le(static_cast<std::uint64_t>(i), 1);
  } else if (i >= 0 && i < 65536) {
    op(kBinInt2);
    put_le(static_cast<std::uint64_t>(i), 2);
  } else if (i >= std::numeric_limits<std::int32_t>::min() && i <= std::numeric_limits<std::int32_t>::max()) {
    op(kBinInt);
    put_le(static_cast<std::uint64_t>(i), 4);  // two's complement, little-endian
  } else {
    // LONG1: the shortest little-endian two's complement that keeps the sign.
    std::string bytes;
    std::int64_t v = i;
    for (;;) {
      bytes.push_back(static_cast<char>(v & 0xff));
      const std::int64_t rest = v >> 8;  // arithmetic shift (C++20)
      const bool sign = (bytes.back() & 0x80) != 0;
      if ((rest == 0 && !sign) || (rest == -1 && sign)) break;
      v = rest;
    }
    op(kLong1);
    put_le(bytes.size(), 1);
    out_ += bytes;
  }
}

void PickleWriter::unsigned_integer(std::uint64_t u) {
  if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    integer(static_cast<std::int64_t>(u));
    return;
  }
  item();
  op(kLong1);  // 8 value bytes and a zero byte so the sign stays positive
  put_le(9, 1);
  put_le(u, 8);
  out_.push_back('\0');
}

void PickleWriter::real(double d) {
  item();
  op(kBinFloat);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big-endian
}

void PickleWriter::str(std::string_view s) {
  item();
  op(kBinUnicode);
  put_le(s.size(), 4);
  out_.append(s.data(), s.size());
}

std::string PickleWriter::finish() {
  if (!open_.empty()) throw std::logic_error("PickleWriter: finish with an open container");
  op(kStop);
  return std::move(out_);
}

}  // namespace fraglab
