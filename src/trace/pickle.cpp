// The pickle virtual machine, restricted to plain data (see pickle.hpp for the invariants).
//
// How it stays safe: every read goes through need()/line(), which check the remaining length
// before touching a byte; every pop checks the depth above the innermost MARK (Python keeps the
// items after a MARK in a separate list, so a pop may never reach below it); memo indices are
// bounded by the input size; container sizes are bounded by 2^32 - 1. Opcodes that would touch
// Python objects other than plain data are rejected before anything else is read.
//
// How it stays fast (a snapshot trace entry is ~18 opcodes plus one memo GET per stack frame, as
// the frame dicts are shared): values are 16-byte PODs copied with memcpy, strings are views into
// the input, containers come from one bump arena (pickle.hpp), the read position lives in a
// register, the dispatch is a single switch, long runs of memo GETs are checked by a tight loop
// and remembered by their bytes (take_get_run), flat dicts are built without the stack and share
// their key arrays, matched by the bytes that fetch them (take_flat_dict), and with
// PickleOptions::skip_key the stack frames are checked but not built.
#include "trace/pickle.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without ASan
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#include "fraglab/types.hpp"

namespace fraglab::pickle {

namespace {

// Opcode bytes (Python's Lib/pickle.py and pickletools.py name them; values are the format).
enum Opcode : std::uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  BININT = 'J',
  BININT1 = 'K',
  LONG = 'L',
  BININT2 = 'M',
  NONE = 'N',
  PERSID = 'P',
  BINPERSID = 'Q',
  REDUCE = 'R',
  STRING = 'S',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  UNICODE = 'V',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  GET = 'g',
  BINGET = 'h',
  INST = 'i',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  OBJ = 'o',
  PUT = 'p',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  // protocol 2
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  // protocol 4
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

constexpr int kHighestProtocol = 5;

// Bytes of a memo GET by its opcode (0: not a BINGET / LONG_BINGET).
constexpr std::array<std::uint8_t, 256> kGetLength = [] {
  std::array<std::uint8_t, 256> n{};
  n[BINGET] = 2;
  n[LONG_BINGET] = 5;
  return n;
}();
// The bytes of a memo GET (opcode and index) within 8 little-endian bytes read from it.
constexpr std::array<std::uint64_t, 256> kGetMask = [] {
  std::array<std::uint64_t, 256> m{};
  for (int op = 0; op < 256; ++op) {
    const unsigned length = kGetLength[static_cast<std::size_t>(op)];
    m[static_cast<std::size_t>(op)] = length ? (std::uint64_t{1} << (8 * length)) - 1 : 0;
  }
  return m;
}();
// A flat-dict key fetched other than by a GET (take_flat_dict's key templates).
constexpr std::uint64_t kNoKeyBytes = std::uint64_t{1} << 63;

constexpr std::array<const char*, 256> make_opcode_names() {
  std::array<const char*, 256> n{};
  n[MARK] = "MARK";
  n[STOP] = "STOP";
  n[POP] = "POP";
  n[POP_MARK] = "POP_MARK";
  n[DUP] = "DUP";
  n[FLOAT] = "FLOAT";
  n[INT] = "INT";
  n[BININT] = "BININT";
  n[BININT1] = "BININT1";
  n[LONG] = "LONG";
  n[BININT2] = "BININT2";
  n[NONE] = "NONE";
  n[PERSID] = "PERSID";
  n[BINPERSID] = "BINPERSID";
  n[REDUCE] = "REDUCE";
  n[STRING] = "STRING";
  n[BINSTRING] = "BINSTRING";
  n[SHORT_BINSTRING] = "SHORT_BINSTRING";
  n[UNICODE] = "UNICODE";
  n[BINUNICODE] = "BINUNICODE";
  n[APPEND] = "APPEND";
  n[BUILD] = "BUILD";
  n[GLOBAL] = "GLOBAL";
  n[DICT] = "DICT";
  n[EMPTY_DICT] = "EMPTY_DICT";
  n[APPENDS] = "APPENDS";
  n[GET] = "GET";
  n[BINGET] = "BINGET";
  n[INST] = "INST";
  n[LONG_BINGET] = "LONG_BINGET";
  n[LIST] = "LIST";
  n[EMPTY_LIST] = "EMPTY_LIST";
  n[OBJ] = "OBJ";
  n[PUT] = "PUT";
  n[BINPUT] = "BINPUT";
  n[LONG_BINPUT] = "LONG_BINPUT";
  n[SETITEM] = "SETITEM";
  n[TUPLE] = "TUPLE";
  n[EMPTY_TUPLE] = "EMPTY_TUPLE";
  n[SETITEMS] = "SETITEMS";
  n[BINFLOAT] = "BINFLOAT";
  n[PROTO] = "PROTO";
  n[NEWOBJ] = "NEWOBJ";
  n[EXT1] = "EXT1";
  n[EXT2] = "EXT2";
  n[EXT4] = "EXT4";
  n[TUPLE1] = "TUPLE1";
  n[TUPLE2] = "TUPLE2";
  n[TUPLE3] = "TUPLE3";
  n[NEWTRUE] = "NEWTRUE";
  n[NEWFALSE] = "NEWFALSE";
  n[LONG1] = "LONG1";
  n[LONG4] = "LONG4";
  n[BINBYTES] = "BINBYTES";
  n[SHORT_BINBYTES] = "SHORT_BINBYTES";
  n[SHORT_BINUNICODE] = "SHORT_BINUNICODE";
  n[BINUNICODE8] = "BINUNICODE8";
  n[BINBYTES8] = "BINBYTES8";
  n[EMPTY_SET] = "EMPTY_SET";
  n[ADDITEMS] = "ADDITEMS";
  n[FROZENSET] = "FROZENSET";
  n[NEWOBJ_EX] = "NEWOBJ_EX";
  n[STACK_GLOBAL] = "STACK_GLOBAL";
  n[MEMOIZE] = "MEMOIZE";
  n[FRAME] = "FRAME";
  n[BYTEARRAY8] = "BYTEARRAY8";
  n[NEXT_BUFFER] = "NEXT_BUFFER";
  n[READONLY_BUFFER] = "READONLY_BUFFER";
  return n;
}
constexpr std::array<const char*, 256> kOpcodeNames = make_opcode_names();

// Little-endian loads through memcpy: the input has no alignment.
template <typename T>
T load_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) {
    T r = 0;
    for (std::size_t i = 0; i < sizeof v; ++i) r |= T(p[i]) << (8 * i);
    v = r;
  }
  return v;
}

Value make_int(std::int64_t v) {
  Value x;
  x.kind = Kind::Int;
  x.integer = v;
  return x;
}

Value make_uint(std::uint64_t v) {
  if (v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return make_int(static_cast<std::int64_t>(v));
  Value x;
  x.kind = Kind::UInt;
  x.unsigned_integer = v;
  return x;
}

Value make_text(Kind kind, const char* p, std::uint32_t n) {
  Value x;
  x.kind = kind;
  x.length = n;
  x.text = p;
  return x;
}

// UTF-8 as CPython's decoder with errors="surrogatepass" accepts it: shortest forms only, code
// points up to U+10FFFF, surrogates (ED A0..BF xx) allowed. Returns the offset of the first bad
// byte, or n when all is well.
std::size_t utf8_error_offset(const unsigned char* s, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time: nearly every snapshot string is ASCII.
    while (i + 8 <= n) {
      std::uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms; 0xed keeps 80..bf (surrogatepass)
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((s[i + k] & 0xc0) != 0x80) return i;
    i += len;
  }
  return n;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// A stack of values whose push is inlined (std::vector::push_back stayed an out-of-line call and
// was the top symbol in profiles) and whose spare capacity is never written (a vector's resize
// would touch every page of a generous reservation). Used for the pickle stack and the memo.
class ValueStack {
 public:
  explicit ValueStack(std::size_t capacity) { grow(std::max<std::size_t>(capacity, 16)); }
  ~ValueStack() { ::operator delete(base_); }
  ValueStack(const ValueStack&) = delete;
  ValueStack& operator=(const ValueStack&) = delete;
  std::size_t size() const { return static_cast<std::size_t>(top_ - base_); }
  Value& back() { return top_[-1]; }
  Value& operator[](std::size_t i) { return base_[i]; }
  const Value& operator[](std::size_t i) const { return base_[i]; }
  void pop_back() { --top_; }
  // For bulk pushes: make room for n more, write them from top(), then set_top().
  void reserve_more(std::size_t n) {
    if (n > static_cast<std::size_t>(end_ - top_)) grow(std::max(size() + n, 2 * size()));
  }
  Value* top() { return top_; }
  void set_top(Value* top) { top_ = top; }
  void shrink_to(std::size_t n) { top_ = base_ + n; }  // n <= size()
  [[gnu::always_inline]] void push_back(const Value& v) {
    if (top_ == end_) [[unlikely]]
      grow(2 * size());
    *top_++ = v;
  }
  // Grows to n values, the new ones set to `fill`.
  void grow_to(std::size_t n, const Value& fill) {
    if (n > static_cast<std::size_t>(end_ - base_)) grow(std::max(n, 2 * size()));
    while (size() < n) *top_++ = fill;
  }

 private:
  // Values are trivially copyable: raw memory from operator new holds them (C++20 implicit object
  // creation), and moving them is a memcpy.
  [[gnu::noinline]] void grow(std::size_t capacity) {
    std::size_t n = size();
    auto* fresh = static_cast<Value*>(::operator new(capacity * sizeof(Value)));
    if (n) std::memcpy(static_cast<void*>(fresh), base_, n * sizeof(Value));
    ::operator delete(base_);
    base_ = fresh;
    top_ = base_ + n;
    end_ = base_ + capacity;
  }
  Value* base_ = nullptr;
  Value* top_ = nullptr;
  Value* end_ = nullptr;
};

// Values into arena storage (trivially copyable: a memcpy).
inline void copy_values(Value* to, const Value* from, std::size_t n) {
  if (n) std::memcpy(static_cast<void*>(to), from, n * sizeof(Value));
}

// Thrown when a container built as Kind::Skipped turns out to be reachable other than as a
// skip_key value: PickleDocument then parses again without skipping.
struct SkippedValueEscapes {};

class Machine {
 public:
  Machine(std::string_view bytes, std::string_view origin, Arena& arena, std::string_view skip_key)
      : begin_(reinterpret_cast<const unsigned char*>(bytes.data())),
        end_(begin_ + bytes.size()),
        origin_(origin),
        skip_key_(skip_key),
        arena_(arena),
        stack_(256),
        // Snapshots memoize one value per 20-90 input bytes: reserving for the densest case
        // saves regrowth copies, and untouched reserve costs no memory.
        memo_(bytes.size() / 16 + 16) {}

  Value run(int& protocol);

 private:
  // ---- errors ----------------------------------------------------------------------------------
  // The opcode being run is the byte at op_at_ (set before each opcode).
  [[noreturn, gnu::cold, gnu::noinline]] void fail(std::string_view what) const {
    const unsigned op = *op_at_;
    const auto offset = static_cast<std::size_t>(op_at_ - begin_);
    const char* name = kOpcodeNames[op];
    if (name)
      throw InputError(fmt::format("{}: pickle byte {}: opcode {} (0x{:02x}): {}", origin_, offset, name, op, what));
    throw InputError(fmt::format("{}: pickle byte {}: opcode 0x{:02x}: {}", origin_, offset, op, what));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_truncated(std::uint64_t wanted, const unsigned char* at) const {
    fail(fmt::format("truncated: needs {} more bytes at byte {}, the input has {} left", wanted, at - begin_,
                     end_ - at));
  }

  // ---- input: `p` is run()'s read position, passed by reference so that it stays in a register
  const unsigned char* need(const unsigned char*& p, std::uint64_t n) const {
    if (n > static_cast<std::uint64_t>(end_ - p)) [[unlikely]]
      fail_truncated(n, p);
    const unsigned char* at = p;
    p += n;
    return at;
  }
  // A text argument up to (not including) its '\n'.
  std::string_view line(const unsigned char*& p) const {
    const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end_ - p));
    if (!nl) fail("truncated: text argument has no terminating newline");
    std::string_view s(reinterpret_cast<const char*>(p), static_cast<const unsigned char*>(nl) - p);
    p = static_cast<const unsigned char*>(nl) + 1;
    return s;
  }
  std::uint32_t checked_length(std::uint64_t n, const char* what) const {
    if (n > std::numeric_limits<std::uint32_t>::max())
      fail(fmt::format("{} of {} bytes is longer than this reader supports (4 GiB)", what, n));
    return static_cast<std::uint32_t>(n);
  }

  // ---- stack -----------------------------------------------------------------------------------
  // Items above the innermost MARK: the only ones an opcode may pop.
  std::size_t depth() const { return stack_.size() - floor_; }
  void require(std::size_t n) const {
    if (depth() < n) fail(fmt::format("stack underflow: needs {} item(s), {} above the last MARK", n, depth()));
  }
  Value pop() {
    require(1);
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  [[gnu::always_inline]] void push(const Value& v) { stack_.push_back(v); }
  void mark() {
    marks_.push_back(stack_.size());
    floor_ = stack_.size();
  }
  // Ends the innermost MARK; returns the stack index of its first item.
  std::size_t pop_mark() {
    if (marks_.empty()) fail("no MARK to pop (MARK missing)");
    std::size_t start = marks_.back();
    marks_.pop_back();
    floor_ = marks_.empty() ? 0 : marks_.back();
    return start;
  }

  // ---- memo ------------------------------------------------------------------------------------
  void memo_put(std::uint64_t index) {
    require(1);
    // Pickler indices are dense and each PUT costs input bytes, so a valid pickle never needs an
    // index beyond its size; a bigger one is hostile (it would make us allocate gigabytes).
    if (index == memo_.size()) {  // the usual case: the next dense index
      memo_.push_back(stack_.back());
      ++memo_count_;
      return;
    }
    if (index > memo_.size()) {
      if (index > static_cast<std::uint64_t>(end_ - begin_))
        fail(fmt::format("memo index {} is beyond any index a {}-byte pickle can use", index, end_ - begin_));
      Value missing;
      missing.kind = Kind::Missing;
      memo_.grow_to(index + 1, missing);
    }
    if (memo_[index].kind == Kind::Missing)
      ++memo_count_;
    else
      ++memo_overwrites_;  // a slot a key template may name now holds something else
    memo_[index] = stack_.back();
  }
  [[gnu::always_inline]] void memo_get(std::uint64_t index) {
    if (index >= memo_.size() || memo_[index].kind == Kind::Missing) [[unlikely]]
      fail(fmt::format("memo index {} was never stored (bad memo index)", index));
    push(memo_[index]);
  }
  const unsigned char* take_get_run(const unsigned char* at);
  const unsigned char* valid_get_run_end(const unsigned char* at);
  const unsigned char* take_flat_dicts(const unsigned char* at);
  const unsigned char* take_flat_dict(const unsigned char* at);
  const unsigned char* flat_dict_refused_ = nullptr;  // where take_flat_dicts() last gave up
  // GET runs already decoded, by a hash of their bytes (see take_get_run).
  struct RunMemo {
    std::uint64_t hash = 0;
    const unsigned char* start = nullptr;  // in the input
    std::size_t length = 0;                // 0: an empty slot
  };
  static constexpr unsigned kRunMemoBits = 11;
  std::array<RunMemo, std::size_t{1} << kRunMemoBits> run_memo_{};
  std::uint64_t text_index(std::string_view s) const {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty())
      fail(fmt::format("expected a decimal memo index, got '{}'", s.substr(0, 32)));
    return v;
  }

  // ---- arena -----------------------------------------------------------------------------------
  Value* alloc_values(std::size_t n) { return static_cast<Value*>(arena_.allocate(n * sizeof(Value))); }
  Value new_list(std::size_t first, std::size_t n);
  Value new_dict(std::size_t first, std::size_t n_items);
  Value new_tuple(std::size_t first, std::size_t n);
  void list_extend(Value& target, std::size_t first, std::size_t n);
  void dict_update(Value& target, std::size_t first, std::size_t n_items);
  void check_key(const Value& key) const {
    const Kind k = kind_of(key);
    if (k == Kind::List || k == Kind::Dict) fail(fmt::format("dict key of type {} is unhashable", kind_name(k)));
  }

  // ---- skipping (PickleOptions::skip_key) ------------------------------------------------------
  // The kind a value has, or would have had when it was not built: every check and message
  // uses this, so skipping never changes which input is refused or how.
  static Kind kind_of(const Value& v) { return v.kind == Kind::Skipped ? static_cast<Kind>(v.length) : v.kind; }
  static Value skipped(Kind kind) {
    Value v;
    v.kind = Kind::Skipped;
    v.length = static_cast<std::uint32_t>(kind);
    return v;
  }
  bool is_skip_key(const Value& v) const {
    if (skip_key_.empty() || v.kind != Kind::Str || v.length != skip_key_.size()) return false;
    if (v.text == skip_key_seen_) return true;  // the memoized key: one view, used again
    if (std::memcmp(v.text, skip_key_.data(), skip_key_.size()) != 0) return false;
    skip_key_seen_ = v.text;
    return true;
  }
  // Whether a container about to be pushed on a stack of `size` items should be skipped: it
  // follows the skip key (a dict value), or sits on or above a skipped container (its item).
  // Only a guess about where the container will go: check_built() and dict_update() verify it.
  bool skip_at(std::size_t size) const {
    if (skip_key_.empty()) return false;
    if (size > 0 && (stack_[size - 1].kind == Kind::Skipped || is_skip_key(stack_[size - 1]))) return true;
    return floor_ > 0 && floor_ <= size && stack_[floor_ - 1].kind == Kind::Skipped;
  }
  // Items entering a built list or tuple must be built themselves.
  void check_built(std::size_t first, std::size_t n) const {
    if (skip_key_.empty()) return;
    for (std::size_t i = 0; i < n; ++i)
      if (stack_[first + i].kind == Kind::Skipped) [[unlikely]]
        throw SkippedValueEscapes{};
  }

  // ---- opcode bodies ---------------------------------------------------------------------------
  Value read_long(const unsigned char* p, std::size_t n);
  Value read_text_int(std::string_view s, bool long_form);
  Value read_text_float(std::string_view s);
  Value read_raw_unicode_escape(std::string_view s);
  Value read_str(const unsigned char* p, std::uint64_t n);
  Value read_ascii_str(const unsigned char* p, std::uint64_t n);
  [[noreturn, gnu::cold]] void refuse();

  const unsigned char* begin_;
  const unsigned char* end_;
  const unsigned char* op_at_ = nullptr;  // the opcode being run (for error messages)
  std::string_view origin_;
  std::string_view skip_key_;                    // empty: build everything
  mutable const char* skip_key_seen_ = nullptr;  // where the skip key last appeared in the input
  Arena& arena_;
  ValueStack stack_;
  std::vector<std::size_t> marks_;  // stack index of each open MARK
  std::size_t floor_ = 0;           // stack index of the innermost MARK (0 when none)
  ValueStack memo_;
  std::size_t memo_count_ = 0;       // set memo slots: Python's len(memo), which MEMOIZE uses
  std::size_t memo_overwrites_ = 0;  // memo_put()s over a set slot
  // The last dict take_flat_dict built with a key array of its own (DictObject), and how each
  // key was fetched: a GET's bytes, or kNoKeyBytes. While no memo slot is overwritten, the same
  // bytes fetch the same key, so the next dict's keys are matched by their bytes.
  static constexpr std::size_t kMaxFlatPairs = 16;
  struct KeyTemplate {
    const Value* keys = nullptr;
    std::size_t size = 0;
    std::size_t memo_overwrites = 0;  // memo_overwrites_ when recorded
    // A key's GET opcode and index bytes (read as 8 little-endian bytes, masked), and how many.
    // Positions without a GET, and those from `size` on (one past the last pair included):
    // bytes kNoKeyBytes with mask 0, which nothing matches.
    std::array<std::uint64_t, kMaxFlatPairs + 1> bytes;
    std::array<std::uint64_t, kMaxFlatPairs + 1> masks;
    std::array<std::uint8_t, kMaxFlatPairs + 1> lengths;
    KeyTemplate() {
      bytes.fill(kNoKeyBytes);
      masks.fill(0);
      lengths.fill(0);
    }
  };
  KeyTemplate key_template_;
  static const KeyTemplate kNoKeyTemplate;  // matches no key
};

const Machine::KeyTemplate Machine::kNoKeyTemplate{};

Value Machine::new_list(std::size_t first, std::size_t n) {
  Value v;
  v.kind = Kind::List;
  v.list = static_cast<ListObject*>(arena_.allocate(sizeof(ListObject)));
  *v.list = ListObject{};
  if (n) list_extend(v, first, n);
  return v;
}

Value Machine::new_dict(std::size_t first, std::size_t n_items) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = static_cast<DictObject*>(arena_.allocate(sizeof(DictObject)));
  *v.dict = DictObject{};
  if (n_items) dict_update(v, first, n_items);
  return v;
}

Value Machine::new_tuple(std::size_t first, std::size_t n) {
  Value v;
  v.kind = Kind::Tuple;
  v.length = checked_length(n, "tuple");
  check_built(first, n);
  Value* items = n ? alloc_values(n) : nullptr;
  copy_values(items, &stack_[first], n);
  v.tuple_items = items;
  return v;
}

// Appends stack_[first, first+n) to a list. Growth doubles, except that the first batch gets
// exactly its size: most lists arrive in one APPENDS and never grow again.
void Machine::list_extend(Value& target, std::size_t first, std::size_t n) {
  if (kind_of(target) != Kind::List)
    fail(fmt::format("appending to a {}, expected a list", kind_name(kind_of(target))));
  if (n == 0 || target.kind == Kind::Skipped) return;
  check_built(first, n);
  ListObject& l = *target.list;
  std::size_t want = std::size_t{l.size} + n;
  if (want > std::numeric_limits<std::uint32_t>::max()) fail("list longer than 2^32-1 items");
  if (want > l.capacity) {
    std::size_t cap = l.capacity ? std::max<std::size_t>(want, 2 * std::size_t{l.capacity}) : want;
    cap = std::min<std::size_t>(cap, std::numeric_limits<std::uint32_t>::max());
    Value* fresh = alloc_values(cap);
    if (l.size) std::memcpy(static_cast<void*>(fresh), l.items, l.size * sizeof(Value));
    l.items = fresh;
    l.capacity = static_cast<std::uint32_t>(cap);
  }
  copy_values(l.items + l.size, &stack_[first], n);
  l.size = static_cast<std::uint32_t>(want);
}

void Machine::dict_update(Value& target, std::size_t first, std::size_t n_items) {
  if (kind_of(target) != Kind::Dict)
    fail(fmt::format("setting items of a {}, expected a dict", kind_name(kind_of(target))));
  if (n_items % 2) fail(fmt::format("odd number of items ({}) for key/value pairs", n_items));
  if (n_items == 0) return;
  const bool built = target.kind != Kind::Skipped;
  // One test per pair for the usual str or int key and built value; the rest is looked at closely.
  constexpr unsigned kLookCloser = 1u << static_cast<unsigned>(Kind::List) | 1u << static_cast<unsigned>(Kind::Dict) |
                                   1u << static_cast<unsigned>(Kind::Skipped);
  for (std::size_t i = 0; i < n_items; i += 2) {
    const Value& key = stack_[first + i];
    const Value& value = stack_[first + i + 1];
    if (((1u << static_cast<unsigned>(key.kind)) & kLookCloser) == 0 && value.kind != Kind::Skipped) [[likely]]
      continue;
    check_key(key);
    // Into a built dict, a skipped value may stand only under the skip key; a skipped key never.
    if (built && (key.kind == Kind::Skipped || (value.kind == Kind::Skipped && !is_skip_key(key))))
      throw SkippedValueEscapes{};
  }
  if (!built) return;
  DictObject& d = *target.dict;
  std::size_t pairs = n_items / 2;
  std::size_t want = std::size_t{d.size} + pairs;
  if (want > std::numeric_limits<std::uint32_t>::max() / 2) fail("dict larger than 2^31-1 pairs");
  if (want > d.capacity) {
    // Also when the keys are shared (capacity 0): this dict gets a key array of its own.
    std::size_t cap = d.capacity ? std::max<std::size_t>(want, 2 * std::size_t{d.capacity}) : want;
    cap = std::min<std::size_t>(cap, std::numeric_limits<std::uint32_t>::max() / 2);
    Value* keys = alloc_values(cap);
    Value* values = alloc_values(cap);
    copy_values(keys, d.keys, d.size);
    copy_values(values, d.values, d.size);
    d.keys = keys;
    d.values = values;
    d.capacity = static_cast<std::uint32_t>(cap);
  }
  // Owned room (capacity > 0): the key array is this dict's own.
  Value* keys = const_cast<Value*>(d.keys);
  for (std::size_t i = 0; i < pairs; ++i) {
    keys[d.size + i] = stack_[first + 2 * i];
    d.values[d.size + i] = stack_[first + 2 * i + 1];
  }
  d.size = static_cast<std::uint32_t>(want);
}

// A list of stack frames is a run of memo GETs (frame dicts are shared between entries), most of
// every snapshot: the run is taken here in two passes. The first (valid_get_run_end) checks each
// GET (whole, and naming a set slot) and stops before the first that is not, which the caller then
// runs on the checked path, so errors are those of one GET at a time. The second pushes the
// values, unless an APPENDS into a skipped list follows and would drop them at once.
// Returns the end of the checked run (`at` when its first GET is not valid).
const unsigned char* Machine::take_get_run(const unsigned char* at) {
  const unsigned char* q = valid_get_run_end(at);
  if (q == at) return at;
  if (q < end_ && *q == APPENDS && floor_ > 0 && stack_[floor_ - 1].kind == Kind::Skipped &&
      static_cast<Kind>(stack_[floor_ - 1].length) == Kind::List)
    return q;  // APPENDS drops everything above its MARK (or fails without looking at it)
  const Value* const memo = &memo_[0];
  stack_.reserve_more(static_cast<std::size_t>(q - at) / 2);
  Value* top = stack_.top();
  for (const unsigned char* r = at; r < q;) {
    if (*r == BINGET) {
      *top++ = memo[r[1]];
      r += 2;
    } else {
      *top++ = memo[load_le<std::uint32_t>(r + 1)];
      r += 5;
    }
  }
  stack_.set_top(top);
  return q;
}

// The end of the run of whole GETs naming set slots that starts at `at`.
const unsigned char* Machine::valid_get_run_end(const unsigned char* at) {
  const Value* const memo = &memo_[0];
  const std::size_t memo_size = memo_.size();
  const bool dense = memo_count_ == memo_size;  // no unset slots
  const unsigned char* const end = end_;
  const unsigned char* q = at;
  // The same stack gives the same GETs, byte for byte: a run seen before is not decoded again.
  // It is looked up by its bytes up to the next APPENDS byte followed by SETITEMS or with no GET
  // opcode byte in the four after it, which is where a list of frames ends (it is the last value
  // of its dict, and a new dict or list follows). An
  // APPENDS byte inside a LONG_BINGET index has the next GET within four bytes: stopping there
  // gave every run through that frame the same key, and those runs evicted each other. A byte
  // taken for the end wrongly only changes the key's length. A hit is confirmed by comparing the
  // whole run and seeing a non-GET opcode after it. The same bytes from the same start decode the
  // same way; their indices were below the memo size of that time, and set slots stay set.
  RunMemo* memo_slot = nullptr;
  std::uint64_t run_hash = 0;
  if (end - q >= 16) {
    const unsigned char* const limit = q + std::min<std::ptrdiff_t>(end - q, 4096);
    const unsigned char* key_end = q;
    for (;;) {
      key_end =
          static_cast<const unsigned char*>(std::memchr(key_end, APPENDS, static_cast<std::size_t>(limit - key_end)));
      if (!key_end || limit - key_end < 5) {
        key_end = nullptr;
        break;
      }
      if (key_end[1] == SETITEMS ||
          (kGetLength[key_end[1]] | kGetLength[key_end[2]] | kGetLength[key_end[3]] | kGetLength[key_end[4]]) == 0)
        break;
      ++key_end;
    }
    if (key_end && key_end - q >= 16) {
      // Every byte counts: runs of one program share long prefixes and suffixes. Four lanes of
      // 8 bytes each, as one lane is a chain of multiplies whose latency bounds the loop. No
      // rotate in the chain: each step is a bijection of the state, so runs of one length that
      // differ in one word never collide, and the final multiply carries every lane's bits up
      // into the top bits the slot is taken from (hits are confirmed by their bytes anyway).
      const auto n = static_cast<std::uint64_t>(key_end - q);
      constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
      auto mix = [](std::uint64_t h, std::uint64_t w) { return (h ^ w) * kMul; };
      std::uint64_t h0 = n, h1 = n + 1, h2 = n + 2, h3 = n + 3;
      const unsigned char* w = q;
      for (; key_end - w >= 32; w += 32) {
        h0 = mix(h0, load_le<std::uint64_t>(w));
        h1 = mix(h1, load_le<std::uint64_t>(w + 8));
        h2 = mix(h2, load_le<std::uint64_t>(w + 16));
        h3 = mix(h3, load_le<std::uint64_t>(w + 24));
      }
      for (; key_end - w >= 8; w += 8) h0 = mix(h0, load_le<std::uint64_t>(w));
      const std::uint64_t h = h0 ^ std::rotl(h1, 16) ^ std::rotl(h2, 32) ^ std::rotl(h3, 48);
      run_hash = (h ^ load_le<std::uint64_t>(key_end - 8)) * 0xC2B2AE3D27D4EB4Full;
      // Two ways per set: a program's few hundred distinct stacks in one way each collided
      // often enough that a third of the runs decoded again were evicted ones, not new ones.
      memo_slot = &run_memo_[(run_hash >> (64 - kRunMemoBits)) & ~std::size_t{1}];
      for (int way = 0; way < 2; ++way) {
        const RunMemo& m = memo_slot[way];
        const std::size_t length = m.length;
        if (m.hash == run_hash && length != 0 && static_cast<std::size_t>(end - q) > length &&
            kGetLength[q[length]] == 0 && std::memcmp(q, m.start, length) == 0) {
          if (way == 1) std::swap(memo_slot[0], memo_slot[1]);  // the last used comes first
          q += length;
          goto decoded;
        }
      }
    }
  }
  if (dense) {
    // While 5 bytes are readable, no branch on which GET it is (the two mix irregularly).
    while (end - q >= 5) {
      const unsigned length = kGetLength[*q];
      const std::uint32_t raw = load_le<std::uint32_t>(q + 1);
      const std::size_t index = length == 2 ? (raw & 0xffu) : raw;
      if (length == 0 || index >= memo_size) break;
      q += length;
    }
  }
  // The checked way: near the end, or with unset slots.
  while (q < end) {
    const unsigned length = kGetLength[*q];
    if (length == 0 || static_cast<std::size_t>(end - q) < length) break;
    const std::size_t index = length == 2 ? q[1] : load_le<std::uint32_t>(q + 1);
    if (index >= memo_size || memo[index].kind == Kind::Missing) break;
    q += length;
  }
  if (q == at) return at;
  // Remembered when it ended at another opcode (not at a bad GET or the input's end).
  if (memo_slot && q < end && kGetLength[*q] == 0) {
    memo_slot[1] = memo_slot[0];  // the least recently used way goes
    memo_slot[0] = RunMemo{run_hash, at, static_cast<std::size_t>(q - at)};
  }
decoded:
  return q;
}

// A snapshot trace entry as CPython pickles it: EMPTY_DICT MEMOIZE MARK, then key/value pairs
// (a key is a memo GET or a short str; a value a memo GET, short str, small int, None or bool, or
// the frames value: a skipped list of GETs, or a GET of a shared one), each maybe memoized, then
// SETITEMS. Taken here a pair at a time, building the dict in place in the arena instead of
// through the stack. Entries list the same keys, fetched by the same GET bytes: while a key's
// bytes are those of the last dict's key at its position (key_template_), it is that key, with
// one compare instead of a decode and a check; a dict whose keys all matched shares the last
// one's key array (DictObject). Only the value goes through a switch. Anything else, or anything
// the checked path would look at closer (an error, a key that is not plain, a skipped value under
// another key, the input's last bytes), returns `at` with nothing changed: the checked path then
// runs the same bytes. Returns the byte after SETITEMS on success, with the dict pushed.
[[gnu::always_inline]] inline const unsigned char* Machine::take_flat_dict(const unsigned char* at) {
  constexpr std::size_t kMaxPairs = kMaxFlatPairs;
  // Readable bytes at the start of a pair: a key (5) and a value (10, LONG1 of 8 bytes), each
  // maybe followed by MEMOIZE, and the opcode after. A str checks its own length.
  constexpr std::ptrdiff_t kPairBytes = 24;
  const unsigned char* const end = end_;
  if (end - at < 3 || at[1] != MEMOIZE || at[2] != MARK || memo_count_ != memo_.size()) return at;
  // A pair may start at or before this with kPairBytes readable.
  const unsigned char* const last_pair_start = end - begin_ >= kPairBytes ? end - kPairBytes : begin_;
  // New memo slots are written past the memo's top and kept only on success; at most one per
  // opcode read below (the dict, and each key, value and frames list).
  const std::size_t memo_before = memo_.size();
  memo_.reserve_more(2 * kMaxPairs + 2);
  Value* const memo = &memo_[0];
  Value* memo_top = memo + memo_before;
  auto give_up = [&] {
    memo_.shrink_to(memo_before);
    memo_count_ = memo_before;
    return at;
  };
  constexpr unsigned kNotPlainKey = 1u << static_cast<unsigned>(Kind::List) | 1u << static_cast<unsigned>(Kind::Dict) |
                                    1u << static_cast<unsigned>(Kind::Skipped);
  // The dict and its values go to the arena in one block, written in place and taken at the end
  // (nothing else allocates from the arena meanwhile); the keys gather here until it is known
  // whether they are the last dict's keys.
  constexpr std::size_t kHeader = (sizeof(DictObject) + 15) & ~std::size_t{15};
  auto* const block = static_cast<unsigned char*>(arena_.peek(kHeader + kMaxPairs * sizeof(Value)));
  Value dict;
  dict.kind = Kind::Dict;
  dict.dict = reinterpret_cast<DictObject*>(block);
  *memo_top++ = dict;
  Value* const values = reinterpret_cast<Value*>(block + kHeader);
  // While the keys are the template's (tmpl, below), they are not copied; from the first that is
  // not, the keys and their bytes gather here. Uninitialised: only keys[0, n) are ever read.
  union Keys {
    Keys() {}
    Value values[kMaxPairs];
  } keys;
  std::array<std::uint64_t, kMaxPairs> key_bytes;  // as KeyTemplate::bytes
  const KeyTemplate* tmpl = key_template_.memo_overwrites == memo_overwrites_ ? &key_template_ : &kNoKeyTemplate;
  bool own_keys = false;  // keys[] and key_bytes[] hold keys [0, n)
  std::size_t n = 0;      // pairs read
  const unsigned char* q = at + 3;
  for (;;) {
    if (q > last_pair_start) [[unlikely]] {
      if (q < end && *q == SETITEMS) break;
      return give_up();
    }
    // The key: the template's, by the same bytes, or read and checked. (A template matches only
    // below its size, so n stays below kMaxPairs on that path.)
    const Value* key;
    const std::uint64_t eight_bytes = load_le<std::uint64_t>(q);
    if ((eight_bytes & tmpl->masks[n]) == tmpl->bytes[n]) [[likely]] {
      key = &tmpl->keys[n];
      q += tmpl->lengths[n];
    } else {
      if (*q == SETITEMS) break;
      if (n == kMaxPairs) return give_up();
      if (!own_keys) {  // the keys so far were the template's
        copy_values(keys.values, tmpl->keys, n);
        std::copy_n(tmpl->bytes.begin(), n, key_bytes.begin());
        own_keys = true;
        tmpl = &kNoKeyTemplate;
      }
      Value& k = keys.values[n];
      key_bytes[n] = kNoKeyBytes;
      if (*q == BINGET || *q == LONG_BINGET) {
        const std::size_t index = *q == BINGET ? q[1] : load_le<std::uint32_t>(q + 1);
        if (index >= static_cast<std::size_t>(memo_top - memo)) return give_up();
        k = memo[index];
        key_bytes[n] = eight_bytes & kGetMask[*q];
        q += kGetLength[*q];
      } else if (*q == SHORT_BINUNICODE) {
        const std::size_t length = q[1];
        if (static_cast<std::size_t>(end - q) < 2 + length + kPairBytes || utf8_error_offset(q + 2, length) != length)
          return give_up();
        k = make_text(Kind::Str, reinterpret_cast<const char*>(q + 2), static_cast<std::uint32_t>(length));
        q += 2 + length;
      } else {
        return give_up();
      }
      if (((1u << static_cast<unsigned>(k.kind)) & kNotPlainKey) != 0) return give_up();
      key = &k;
    }
    if (*q == MEMOIZE) {
      *memo_top++ = *key;
      ++q;
    }
    // The value.
    Value& v = values[n];
    switch (*q) {
      case BINGET:
      case LONG_BINGET: {
        const std::size_t index = *q == BINGET ? q[1] : load_le<std::uint32_t>(q + 1);
        if (index >= static_cast<std::size_t>(memo_top - memo)) return give_up();
        v = memo[index];
        // A shared frames list: skipped, so only under the skip key.
        if (v.kind == Kind::Skipped && !is_skip_key(*key)) return give_up();
        q += kGetLength[*q];
        break;
      }
      case SHORT_BINUNICODE: {
        const std::size_t length = q[1];
        if (static_cast<std::size_t>(end - q) < 2 + length + 1 || utf8_error_offset(q + 2, length) != length)
          return give_up();
        v = make_text(Kind::Str, reinterpret_cast<const char*>(q + 2), static_cast<std::uint32_t>(length));
        q += 2 + length;
        break;
      }
      case BININT1:
        v = make_int(q[1]);
        q += 2;
        break;
      case BININT2:
        v = make_int(load_le<std::uint16_t>(q + 1));
        q += 3;
        break;
      case BININT:
        v = make_int(load_le<std::int32_t>(q + 1));
        q += 5;
        break;
      case LONG1: {
        const std::size_t length = q[1];
        if (length - 1 >= 8) return give_up();
        const unsigned shift = static_cast<unsigned>(64 - 8 * length);
        v = make_int(static_cast<std::int64_t>(load_le<std::uint64_t>(q + 2) << shift) >> shift);
        q += 2 + length;
        break;
      }
      case NONE:
        v = Value{};
        ++q;
        break;
      case NEWTRUE:
      case NEWFALSE:
        v = Value{};
        v.kind = Kind::Bool;
        v.boolean = *q == NEWTRUE;
        ++q;
        break;
      case EMPTY_LIST:
        // Only the skip key's value: a list of frames, skipped.
        if (!is_skip_key(*key)) return give_up();
        v = skipped(Kind::List);
        ++q;
        if (*q == MEMOIZE) {
          *memo_top++ = v;
          ++q;
        }
        if (*q == MARK) {
          memo_.set_top(memo_top);  // the GETs may name the slots added here
          memo_count_ = memo_.size();
          const unsigned char* run_end = valid_get_run_end(q + 1);
          if (run_end == end || *run_end != APPENDS) return give_up();
          q = run_end + 1;
        }
        ++n;
        continue;
      default:
        return give_up();
    }
    if (*q == MEMOIZE) {
      *memo_top++ = v;
      ++q;
    }
    ++n;
  }
  // SETITEMS: every pair is already checked.
  arena_.take(kHeader + n * sizeof(Value));
  DictObject& d = *dict.dict;
  d.values = values;
  d.size = static_cast<std::uint32_t>(n);
  d.capacity = 0;  // the next update copies both arrays (the keys may be shared)
  if (!own_keys && n == tmpl->size && n > 0) {
    d.keys = tmpl->keys;
  } else {
    if (!own_keys) {
      copy_values(keys.values, tmpl->keys, n);
      std::copy_n(tmpl->bytes.begin(), n, key_bytes.begin());
    }
    Value* own = n ? alloc_values(n) : nullptr;
    copy_values(own, keys.values, n);
    d.keys = own;
    key_template_.keys = own;
    key_template_.size = n;
    key_template_.memo_overwrites = memo_overwrites_;
    for (std::size_t i = 0; i <= kMaxPairs; ++i) {
      const std::uint64_t bytes = i < n ? key_bytes[i] : kNoKeyBytes;
      key_template_.bytes[i] = bytes;
      key_template_.lengths[i] = kGetLength[bytes & 0xff];
      key_template_.masks[i] = bytes == kNoKeyBytes ? 0 : kGetMask[bytes & 0xff];
    }
  }
  memo_.set_top(memo_top);
  memo_count_ = memo_.size();
  push(dict);
  return q + 1;
}

// Consecutive flat dicts (a list of trace entries) in one call, so the per-call work is paid once
// per run of them: returns past the last one taken (`at` when none). A dict it gave up on is
// remembered, so that the checked path, which the caller runs next, does not try it again.
const unsigned char* Machine::take_flat_dicts(const unsigned char* at) {
  if (at == flat_dict_refused_) return at;
  const unsigned char* q = at;
  for (;;) {
    const unsigned char* after = take_flat_dict(q);
    if (after == q) {
      flat_dict_refused_ = q;
      return q;
    }
    q = after;
    if (q == end_ || *q != EMPTY_DICT) return q;
  }
}

// LONG1/LONG4 payload: little-endian two's complement of n bytes (pickle.encode_long).
Value Machine::read_long(const unsigned char* p, std::size_t n) {
  if (n == 0) return make_int(0);
  bool negative = p[n - 1] & 0x80;
  unsigned char fill = negative ? 0xff : 0x00;
  // Bytes beyond the eighth must only repeat the sign; then the low eight bytes are the value.
  for (std::size_t i = 8; i < n; ++i)
    if (p[i] != fill) fail(fmt::format("integer of {} bytes does not fit in 64 bits", n));
  const std::size_t low = std::min<std::size_t>(n, 8);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < low; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  if (negative && low < 8) v |= ~std::uint64_t{0} << (8 * low);  // sign-extend
  if (negative) {
    // With more than 8 bytes the value is below -2^63 unless bit 63 is set.
    if (n > 8 && !(v >> 63)) fail(fmt::format("integer of {} bytes is below -2^63", n));
    return make_int(static_cast<std::int64_t>(v));
  }
  return make_uint(v);
}

// INT ("I123\n", "I01\n" = True, "I00\n" = False) and LONG ("L123L\n").
Value Machine::read_text_int(std::string_view s, bool long_form) {
  if (!long_form && (s == "00" || s == "01")) {
    Value b;
    b.kind = Kind::Bool;
    b.boolean = s == "01";
    return b;
  }
  if (long_form && !s.empty() && s.back() == 'L') s.remove_suffix(1);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (!digits.empty() && digits.front() != '-') {
    std::uint64_t u = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u);
    if (ec == std::errc() && p == digits.data() + digits.size()) return make_uint(u);
  } else {
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
    if (ec == std::errc() && p == digits.data() + digits.size() && !digits.empty()) return make_int(i);
  }
  fail(fmt::format("expected a decimal integer within 64 bits, got '{}'", s.substr(0, 40)));
}

Value Machine::read_text_float(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double d = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty())
    fail(fmt::format("expected a decimal float, got '{}'", s.substr(0, 40)));
  Value v;
  v.kind = Kind::Float;
  v.real = d;
  return v;
}

// UNICODE's argument is "raw-unicode-escape": bytes are Latin-1 code points, except that a
// \uXXXX or \UXXXXXXXX preceded by an odd number of backslashes is an escape (CPython's codec).
// The decoded UTF-8 lives in the arena.
Value Machine::read_raw_unicode_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c != '\\') {
      append_utf8(out, c);
      ++i;
      continue;
    }
    std::size_t run = 0;
    while (i < s.size() && s[i] == '\\') {
      out.push_back('\\');
      ++run;
      ++i;
    }
    if (run % 2 == 0 || i >= s.size() || (s[i] != 'u' && s[i] != 'U')) continue;
    out.pop_back();  // the escaping backslash
    std::size_t count = s[i] == 'u' ? 4 : 8;
    ++i;
    if (s.size() - i < count) fail("truncated \\uXXXX escape in UNICODE argument");
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < count; ++k) {
      char h = s[i + k];
      std::uint32_t d;
      if (h >= '0' && h <= '9')
        d = h - '0';
      else if (h >= 'a' && h <= 'f')
        d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        d = h - 'A' + 10;
      else
        fail("bad hex digit in \\uXXXX escape of UNICODE argument");
      cp = cp * 16 + d;
    }
    if (cp > 0x10ffff) fail("\\U escape beyond U+10FFFF in UNICODE argument");
    append_utf8(out, cp);
    i += count;
  }
  std::uint32_t n = checked_length(out.size(), "str");
  char* p = static_cast<char*>(arena_.allocate(n ? n : 1));
  if (n) std::memcpy(p, out.data(), n);
  return make_text(Kind::Str, p, n);
}

Value Machine::read_str(const unsigned char* p, std::uint64_t n) {
  std::uint32_t len = checked_length(n, "str");
  std::size_t bad = utf8_error_offset(p, len);
  if (bad != len) fail(fmt::format("str is not valid UTF-8 (byte {} of the string)", bad));
  return make_text(Kind::Str, reinterpret_cast<const char*>(p), len);
}

// Python 2 str (BINSTRING, SHORT_BINSTRING): Python 3 decodes it as ASCII by default.
Value Machine::read_ascii_str(const unsigned char* p, std::uint64_t n) {
  std::uint32_t len = checked_length(n, "str");
  for (std::uint32_t i = 0; i < len; ++i)
    if (p[i] & 0x80) fail("Python 2 str with non-ASCII bytes (expected ASCII)");
  return make_text(Kind::Str, reinterpret_cast<const char*>(p), len);
}

void Machine::refuse() {
  switch (*op_at_) {
    case GLOBAL:
    case STACK_GLOBAL:
    case REDUCE:
    case BUILD:
    case INST:
    case OBJ:
    case NEWOBJ:
    case NEWOBJ_EX:
    case PERSID:
    case BINPERSID:
    case EXT1:
    case EXT2:
    case EXT4:
      fail(
          "refused: it imports, builds or calls a Python object; only plain data "
          "(dict, list, tuple, str, bytes, int, float, bool, None) is read");
    case STRING:
    case EMPTY_SET:
    case ADDITEMS:
    case FROZENSET:
    case NEXT_BUFFER:
    case READONLY_BUFFER:
      fail(
          "not supported: snapshots hold only dict, list, tuple, str, bytes, int, float, bool "
          "and None");
    default:
      fail("unknown opcode (expected a pickle opcode of protocol 0-5)");
  }
}

Value Machine::run(int& protocol) {
  const unsigned char* p = begin_;
  for (;;) {
    if (p >= end_) [[unlikely]]
      throw InputError(
          fmt::format("{}: pickle byte {}: input ends before STOP (truncated pickle)", origin_, p - begin_));
    op_at_ = p;
    const unsigned char op = *p++;
    switch (op) {
      // ---- framing and control ----
      case PROTO: {
        int v = *need(p, 1);
        if (v > kHighestProtocol)
          fail(fmt::format("unsupported pickle protocol {} (expected 0-{})", v, kHighestProtocol));
        protocol = v;
        break;
      }
      case FRAME: {
        // Frames only group opcodes for buffered reading; the whole input is in memory, so
        // just check that the announced frame exists.
        std::uint64_t n = load_le<std::uint64_t>(need(p, 8));
        if (n > static_cast<std::uint64_t>(end_ - p)) fail_truncated(n, p);
        break;
      }
      case STOP: {
        Value result = pop();
        if (result.kind == Kind::Skipped) throw SkippedValueEscapes{};
        return result;
      }
      case MARK:
        mark();
        break;
      case POP:
        // Python pops the innermost MARK when nothing is above it.
        if (depth() > 0)
          stack_.pop_back();
        else
          stack_.shrink_to(pop_mark());
        break;
      case POP_MARK:
        stack_.shrink_to(pop_mark());
        break;
      case DUP: {
        require(1);
        Value top = stack_.back();
        push(top);
        break;
      }

      // ---- memo ----
      case BINGET:
      case LONG_BINGET:
        // Keys and shared values come as lone GETs or short runs, taken one by one here; a long
        // run (a stack's frames) goes to the tight loop of take_get_run().
        for (int taken = 0;; ++taken) {
          if (taken == 3) {
            const unsigned char* after = take_get_run(op_at_);
            if (after != op_at_) {
              p = after;
              break;
            }
          }
          if (*op_at_ == BINGET)
            memo_get(*need(p, 1));
          else
            memo_get(load_le<std::uint32_t>(need(p, 4)));
          if (p == end_ || kGetLength[*p] == 0) break;
          op_at_ = p++;
        }
        break;
      case GET:
        memo_get(text_index(line(p)));
        break;
      case BINPUT:
        memo_put(*need(p, 1));
        break;
      case LONG_BINPUT:
        memo_put(load_le<std::uint32_t>(need(p, 4)));
        break;
      case PUT:
        memo_put(text_index(line(p)));
        break;
      case MEMOIZE:
        // Without sparse PUTs the memo is dense and MEMOIZE appends: the common case, inline.
        if (memo_count_ == memo_.size() && depth() > 0) [[likely]] {
          memo_.push_back(stack_.back());
          ++memo_count_;
        } else {
          memo_put(memo_count_);
        }
        break;

      // ---- scalars ----
      case NONE:
        push(Value{});
        break;
      case NEWTRUE:
      case NEWFALSE: {
        Value b;
        b.kind = Kind::Bool;
        b.boolean = op == NEWTRUE;
        push(b);
        break;
      }
      case BININT1:
        push(make_int(*need(p, 1)));
        break;
      case BININT2:
        push(make_int(load_le<std::uint16_t>(need(p, 2))));
        break;
      case BININT:
        push(make_int(load_le<std::int32_t>(need(p, 4))));
        break;
      case LONG1: {
        const std::size_t n = *need(p, 1);
        const unsigned char* at = need(p, n);
        // Up to 8 bytes (every address, size and time in a snapshot): one little-endian load
        // when 8 bytes are readable, then sign extension by shifts.
        if (n - 1 < 8 && end_ - at >= 8) [[likely]] {
          const unsigned shift = static_cast<unsigned>(64 - 8 * n);
          const std::uint64_t raw = load_le<std::uint64_t>(at) << shift;
          push(make_int(static_cast<std::int64_t>(raw) >> shift));
        } else {
          push(read_long(at, n));
        }
        break;
      }
      case LONG4: {
        std::int32_t n = load_le<std::int32_t>(need(p, 4));
        if (n < 0) fail("negative LONG4 byte count");
        push(read_long(need(p, static_cast<std::uint64_t>(n)), static_cast<std::size_t>(n)));
        break;
      }
      case INT:
        push(read_text_int(line(p), false));
        break;
      case LONG:
        push(read_text_int(line(p), true));
        break;
      case BINFLOAT: {
        // Big-endian IEEE 754 double.
        const unsigned char* at = need(p, 8);
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | at[i];
        Value v;
        v.kind = Kind::Float;
        v.real = std::bit_cast<double>(bits);
        push(v);
        break;
      }
      case FLOAT:
        push(read_text_float(line(p)));
        break;

      // ---- str and bytes ----
      case SHORT_BINUNICODE: {
        std::size_t n = *need(p, 1);
        push(read_str(need(p, n), n));
        break;
      }
      case BINUNICODE: {
        std::uint64_t n = load_le<std::uint32_t>(need(p, 4));
        push(read_str(need(p, n), n));
        break;
      }
      case BINUNICODE8: {
        std::uint64_t n = load_le<std::uint64_t>(need(p, 8));
        push(read_str(need(p, n), n));
        break;
      }
      case UNICODE:
        push(read_raw_unicode_escape(line(p)));
        break;
      case SHORT_BINSTRING: {
        std::size_t n = *need(p, 1);
        push(read_ascii_str(need(p, n), n));
        break;
      }
      case BINSTRING: {
        std::int32_t n = load_le<std::int32_t>(need(p, 4));
        if (n < 0) fail("negative BINSTRING length");
        push(read_ascii_str(need(p, static_cast<std::uint64_t>(n)), static_cast<std::uint64_t>(n)));
        break;
      }
      case SHORT_BINBYTES: {
        std::size_t n = *need(p, 1);
        push(make_text(Kind::Bytes, reinterpret_cast<const char*>(need(p, n)), static_cast<std::uint32_t>(n)));
        break;
      }
      case BINBYTES: {
        std::uint64_t n = load_le<std::uint32_t>(need(p, 4));
        const unsigned char* at = need(p, n);
        push(make_text(Kind::Bytes, reinterpret_cast<const char*>(at), checked_length(n, "bytes")));
        break;
      }
      case BINBYTES8:
      case BYTEARRAY8: {
        std::uint64_t n = load_le<std::uint64_t>(need(p, 8));
        const unsigned char* at = need(p, n);
        push(make_text(Kind::Bytes, reinterpret_cast<const char*>(at), checked_length(n, "bytes")));
        break;
      }

      // ---- containers ----
      case EMPTY_LIST:
        push(skip_at(stack_.size()) ? skipped(Kind::List) : new_list(0, 0));
        break;
      case EMPTY_DICT:
        if (skip_at(stack_.size())) {
          push(skipped(Kind::Dict));
          break;
        }
        if (const unsigned char* after = take_flat_dicts(op_at_); after != op_at_) {
          p = after;
          break;
        }
        push(new_dict(0, 0));
        break;
      case EMPTY_TUPLE:
        push(skip_at(stack_.size()) ? skipped(Kind::Tuple) : new_tuple(0, 0));
        break;
      case LIST: {
        std::size_t start = pop_mark();
        Value v = skip_at(start) ? skipped(Kind::List) : new_list(start, stack_.size() - start);
        stack_.shrink_to(start);
        push(v);
        break;
      }
      case DICT: {
        std::size_t start = pop_mark();
        const std::size_t n = stack_.size() - start;
        Value v;
        if (skip_at(start)) {
          // Still checked as new_dict would: pairs, and hashable keys.
          v = skipped(Kind::Dict);
          dict_update(v, start, n);
        } else {
          v = new_dict(start, n);
        }
        stack_.shrink_to(start);
        push(v);
        break;
      }
      case TUPLE: {
        std::size_t start = pop_mark();
        Value v = skip_at(start) ? skipped(Kind::Tuple) : new_tuple(start, stack_.size() - start);
        stack_.shrink_to(start);
        push(v);
        break;
      }
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        std::size_t n = static_cast<std::size_t>(op - TUPLE1 + 1);
        require(n);
        std::size_t start = stack_.size() - n;
        Value v = skip_at(start) ? skipped(Kind::Tuple) : new_tuple(start, n);
        stack_.shrink_to(start);
        push(v);
        break;
      }
      case APPEND: {
        require(2);
        list_extend(stack_[stack_.size() - 2], stack_.size() - 1, 1);
        stack_.pop_back();
        break;
      }
      case APPENDS: {
        std::size_t start = pop_mark();
        if (start <= floor_) fail("stack underflow: no list below the MARK");
        list_extend(stack_[start - 1], start, stack_.size() - start);
        stack_.shrink_to(start);
        break;
      }
      case SETITEM: {
        require(3);
        dict_update(stack_[stack_.size() - 3], stack_.size() - 2, 2);
        stack_.shrink_to(stack_.size() - 2);
        break;
      }
      case SETITEMS: {
        std::size_t start = pop_mark();
        if (start <= floor_) fail("stack underflow: no dict below the MARK");
        dict_update(stack_[start - 1], start, stack_.size() - start);
        stack_.shrink_to(start);
        break;
      }

      default:
        refuse();
    }
  }
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
    case Kind::UInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Missing:
      return "missing";
    case Kind::Skipped:
      return "skipped";
  }
  return "?";
}

std::span<const Value> Value::items() const {
  if (kind == Kind::List) return {list->items, list->size};
  if (kind == Kind::Tuple) return {tuple_items, length};
  return {};
}

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  // From the back: the last SETITEM of a key wins, as in Python.
  for (std::uint32_t i = dict->size; i-- > 0;) {
    const Value& k = dict->keys[i];
    if (k.kind == Kind::Str && k.length == key.size() && std::memcmp(k.text, key.data(), key.size()) == 0)
      return &dict->values[i];
  }
  return nullptr;
}

namespace {

void free_chunk(const Arena::Chunk& chunk) { ::operator delete(chunk.data, chunk.align); }

// This thread's kept chunk (Arena::kMaxSpareChunk), freed when the thread ends. Under
// AddressSanitizer a kept chunk is poisoned, so a value read from a destroyed document is still
// reported as a use after free until the chunk serves another document.
class SpareChunk {
 public:
  SpareChunk() = default;
  SpareChunk(const SpareChunk&) = delete;
  SpareChunk& operator=(const SpareChunk&) = delete;
  ~SpareChunk() { release(); }

  std::size_t size() const { return chunk_.size; }
  void keep(const Arena::Chunk& chunk) {
    release();
    ASAN_POISON_MEMORY_REGION(chunk.data, chunk.size);
    chunk_ = chunk;
  }
  // The kept chunk if it has at least `size` bytes, else an empty Chunk.
  Arena::Chunk take(std::size_t size) {
    if (!chunk_.data || chunk_.size < size) return {};
    const Arena::Chunk taken = chunk_;
    chunk_ = {};
    ASAN_UNPOISON_MEMORY_REGION(taken.data, taken.size);
    return taken;
  }
  void release() {
    if (!chunk_.data) return;
    ASAN_UNPOISON_MEMORY_REGION(chunk_.data, chunk_.size);
    free_chunk(chunk_);
    chunk_ = {};
  }

 private:
  Arena::Chunk chunk_;
};
thread_local SpareChunk spare;

}  // namespace

void Arena::release_spare_chunk() { spare.release(); }

Arena::~Arena() {
  for (const Chunk& chunk : chunks_) {
    // Keep the biggest chunk that is not too big; a chunk is aligned to what its size asked for,
    // so any chunk at least as big fits any later request (see refill).
    if (chunk.size <= kMaxSpareChunk && chunk.size > spare.size()) {
      spare.keep(chunk);
    } else {
      free_chunk(chunk);
    }
  }
}

void Arena::refill(std::size_t bytes) {
  // Chunks double, so a document of any size needs only a few dozen of them. Big chunks are
  // aligned to and sized in 2 MiB and offered to the kernel as huge pages: a snapshot's values
  // fill hundreds of MiB, and 4 KiB page faults were a fifth of the ingest time.
  constexpr std::size_t kHuge = 2 * 1024 * 1024;
  chunks_.reserve(chunks_.size() + 1);  // first: push_back below must not throw and leak a chunk
  std::size_t size = std::max(bytes, next_chunk_);
  next_chunk_ = std::max(next_chunk_, size) * 2;
  const bool huge = size >= kHuge;
  if (huge) size = (size + kHuge - 1) / kHuge * kHuge;
  // The kept chunk's pages are most likely still mapped: no faults, no zeroing.
  Chunk chunk = spare.take(size);
  if (!chunk.data) {
    chunk.size = size;
    chunk.align = std::align_val_t{huge ? kHuge : alignof(std::max_align_t)};
    chunk.data = static_cast<std::byte*>(::operator new(size, chunk.align));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) ::madvise(chunk.data, size, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  }
  cur_ = chunk.data;
  end_ = cur_ + chunk.size;
  chunks_.push_back(chunk);
}

PickleDocument::PickleDocument(std::string_view bytes, std::string_view origin, const PickleOptions& options)
    // Containers take 4-6 bytes per pickle byte (16-byte values from 1-5 byte opcodes). A first
    // chunk of 4x is only address space until it is written, and saves most chained chunks.
    : arena_(std::max<std::size_t>(4 * bytes.size(), 64 * 1024)) {
  if (!options.skip_key.empty()) {
    try {
      Machine machine(bytes, origin, arena_, options.skip_key);
      root_ = machine.run(protocol_);
      skipped_ = true;
      return;
    } catch (const SkippedValueEscapes&) {
      // Build everything: what was built so far stays in the arena, unused.
    }
  }
  Machine machine(bytes, origin, arena_, {});
  root_ = machine.run(protocol_);
}

}  // namespace fraglab::pickle
