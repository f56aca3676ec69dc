// The pickle reader's private parts, shared by its files (not part of any API):
//  - pickle.cpp            the machine: the one dispatch switch and the container opcodes;
//  - pickle_fast_paths.cpp runs of memo GETs and flat dicts taken without the switch;
//  - pickle_decoders.cpp   text-protocol ints and floats, raw-unicode-escape, LONG payloads;
//  - pickle_arena.cpp      the bump arena's chunks and the per-thread spare chunk;
//  - pickle_value.cpp      reading a document's values (Value::find, Value::items, kind_name);
//  - pickle_opcodes.hpp    the opcode bytes, their names, the memo GET tables.
// Everything called once per opcode or per value is defined here, inline, so that splitting the
// reader into files costs no calls across them (there is no link-time optimisation).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/types.hpp"
#include "trace/pickle.hpp"
#include "trace/pickle_opcodes.hpp"

namespace fraglab::pickle::internal {

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

inline Value make_int(std::int64_t v) {
  Value x;
  x.kind = Kind::Int;
  x.integer = v;
  return x;
}

inline Value make_uint(std::uint64_t v) {
  if (v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return make_int(static_cast<std::int64_t>(v));
  Value x;
  x.kind = Kind::UInt;
  x.unsigned_integer = v;
  return x;
}

inline Value make_text(Kind kind, const char* p, std::uint32_t n) {
  Value x;
  x.kind = kind;
  x.length = n;
  x.text = p;
  return x;
}

// UTF-8 as CPython's decoder with errors="surrogatepass" accepts it: shortest forms only, code
// points up to U+10FFFF, surrogates (ED A0..BF xx) allowed. Returns the offset of the first bad
// byte, or n when all is well.
inline std::size_t utf8_error_offset(const unsigned char* s, std::size_t n) {
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

// Where take_get_run's memo key for a run of GETs starting at `q` ends (valid_get_run_end): the
// first APPENDS byte in [q, limit) that is followed by SETITEMS or has no GET opcode byte in the
// four after it, which is where a list of frames ends; nullptr when there is none at least 5 bytes
// before `limit`. Only the key depends on it (hits are confirmed byte for byte), but the same
// bytes must always give the same key. Was a memchr per APPENDS byte (two calls per run, as an
// index byte often is one); SSE2 looks at 16 bytes at a time and at every APPENDS byte in them
// without a call. tests/trace/pickle_run_key_test.cpp compares it with the byte-by-byte rule.
inline const unsigned char* run_key_end(const unsigned char* q, const unsigned char* limit) {
  auto ends_here = [](const unsigned char* e) {
    return e[1] == SETITEMS || (kGetLength[e[1]] | kGetLength[e[2]] | kGetLength[e[3]] | kGetLength[e[4]]) == 0;
  };
#if defined(__SSE2__)
  const __m128i appends = _mm_set1_epi8(static_cast<char>(APPENDS));
  auto block = [&](int at) {
    return _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + at)), appends);
  };
  // The APPENDS bytes of 64 bytes at once (frames runs are 100-300 bytes), then of 16.
  for (; limit - q >= 64; q += 64) {
    const __m128i b0 = block(0), b1 = block(16), b2 = block(32), b3 = block(48);
    if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(b0, b1), _mm_or_si128(b2, b3))) == 0) continue;
    auto bits = static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(b0))) |
                static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(b1))) << 16 |
                static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(b2))) << 32 |
                static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(b3))) << 48;
    for (; bits; bits &= bits - 1) {
      const unsigned char* e = q + std::countr_zero(bits);
      if (limit - e < 5) return nullptr;  // the first APPENDS byte too near the end, as below
      if (ends_here(e)) return e;
    }
  }
  for (; limit - q >= 16; q += 16) {
    for (auto bits = static_cast<unsigned>(_mm_movemask_epi8(block(0))); bits; bits &= bits - 1) {
      const unsigned char* e = q + std::countr_zero(bits);
      if (limit - e < 5) return nullptr;
      if (ends_here(e)) return e;
    }
  }
#endif
  for (; q < limit; ++q) {
    if (*q != APPENDS) continue;
    if (limit - q < 5) return nullptr;
    if (ends_here(q)) return q;
  }
  return nullptr;
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
  // `sink` (with `entry_arena` for the streamed entries): see EntrySink; only with a skip_key and
  // the fast paths (PickleOptions::can_stream()), null otherwise.
  Machine(std::string_view bytes, std::string_view origin, Arena& arena, std::string_view skip_key,
          bool fast_paths = true, EntrySink* sink = nullptr, Arena* entry_arena = nullptr)
      : begin_(reinterpret_cast<const unsigned char*>(bytes.data())),
        end_(begin_ + bytes.size()),
        origin_(origin),
        skip_key_(skip_key),
        fast_paths_(fast_paths),
        sink_(sink),
        entry_arena_(entry_arena),
        arena_(arena),
        stack_(256),
        // Snapshots memoize one value per 20-90 input bytes: reserving for the densest case
        // saves regrowth copies, and untouched reserve costs no memory.
        memo_(bytes.size() / 16 + 16) {}

  Value run(int& protocol);
  // The list holding the streamed list (EntrySink), or nullptr when none was made.
  const ListObject* streamed_lists() const { return stream_outer_; }

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
      memo_.push_back(memo_copy(stack_.back()));
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
    memo_[index] = memo_copy(stack_.back());
  }
  [[gnu::always_inline]] void memo_get(std::uint64_t index) {
    if (index >= memo_.size() || memo_[index].kind == Kind::Missing) [[unlikely]]
      fail(fmt::format("memo index {} was never stored (bad memo index)", index));
    push(memo_[index]);
  }
  // What the memo keeps of a stack value: a copy of a streamed value (the streamed list, the list
  // holding it, an entry handed to the sink) is poisoned, so that every value the sink took or
  // will take has one reference, the one on the stack (DUP of one starts again, see run()).
  [[gnu::always_inline]] Value memo_copy(const Value& v) const {
    if (v.kind == Kind::Skipped && v.integer != 0) [[unlikely]]
      return poisoned(static_cast<Kind>(v.length));
    if (v.kind == Kind::List && v.list == stream_outer_) [[unlikely]]
      return poisoned(Kind::List);
    return v;
  }
  const unsigned char* take_get_run(const unsigned char* at);
  [[gnu::always_inline]] inline const unsigned char* valid_get_run_end(const unsigned char* at);
  const unsigned char* valid_get_run_end_unpredicted(const unsigned char* at);
  const unsigned char* take_flat_dicts(const unsigned char* at);
  template <bool kStreamed>
  const unsigned char* take_flat_dict_run(const unsigned char* at, const unsigned char* last_pair_start,
                                          bool only_first);
  template <bool kStreamed>
  const unsigned char* take_flat_dict(const unsigned char* at, const unsigned char* last_pair_start, bool& handed_over,
                                      Arena* dict_arena);
  [[gnu::noinline]] void hand_over_dict(const Value& dict, Arena& arena, const Value* keys, const Value* values,
                                        std::size_t n, bool with_key, Value* memo_top, const Value& list,
                                        const unsigned char* list_run_start, const unsigned char* list_run_end);
  // The tuple take_flat_dict makes of a pair's value `first` and a small int (a segment's
  // segment_pool_id, (0, 0)) once the dict is handed over: its items go to the arena and the
  // handed-over value at stack_[at] and its memo copy (`memoized`, or null) point at them. Out of
  // line: once per segment, never on a trace entry.
  [[gnu::noinline]] void place_handed_over_tuple(std::size_t at, Value* memoized, const Value& first,
                                                 std::int64_t second);
  // A flat dict's DictObject in the arena, rounded to the values after it (take_flat_dict).
  static constexpr std::size_t kFlatDictHeader = (sizeof(DictObject) + 15) & ~std::size_t{15};
  // Readable bytes at the start of a flat dict's pair: a key (5) and a value (10, LONG1 of 8
  // bytes), each maybe followed by MEMOIZE, and the opcode after. A str checks its own length.
  static constexpr std::ptrdiff_t kPairBytes = 24;
  const unsigned char* flat_dict_refused_ = nullptr;  // where take_flat_dicts() last gave up
  // GET runs already decoded, by a hash of their bytes (see take_get_run).
  struct RunMemo {
    std::uint64_t hash = 0;
    const unsigned char* start = nullptr;  // in the input
    std::uint32_t length = 0;
    std::uint32_t generation = 0;  // RunTables::generation of the Machine that wrote it: else empty
  };
  static constexpr unsigned kRunMemoBits = 11;
  std::uint64_t run_seed_ = hash_seed();
  // The run that came after the last two runs (by their hashes) the last time they came in that
  // order: a training step calls the same code in the same order, so the next stack is usually
  // the one that followed the same two stacks before (3 in 4 runs of the real snapshots). It is
  // tried first, confirmed byte for byte as a run-memo hit is, which spares finding the key's
  // end and hashing it (see valid_get_run_end).
  struct RunSuccessor {
    std::uint64_t context = 0;  // of the two runs before
    RunMemo next;
  };
  // Two ways per set, the last used first: the same two runs may be followed by one of two in
  // turn, and the second way predicts those too (the real snapshots have such pairs).
  static constexpr unsigned kRunSuccessorBits = 11;
  // Both tables (~112 KiB) live per thread and are emptied by a new generation number instead of
  // being cleared for each document: clearing them was ~1.5 % of reading a 1.4 MB snapshot. A slot
  // counts only when it carries this Machine's generation, so no start pointer into an earlier
  // input is ever followed. Thread-local (not on the heap): no operator new, as when they were
  // members, so --max-memory sees the same allocations.
  struct RunTables {
    std::array<RunMemo, std::size_t{1} << kRunMemoBits> memo;
    std::array<RunSuccessor, std::size_t{1} << kRunSuccessorBits> successors;
    std::uint32_t generation = 0;  // the last one handed out; 0 is never handed out
  };
  static RunTables& this_thread_run_tables();
  // A generation no slot of `tables` carries yet.
  static std::uint32_t next_generation(RunTables& tables) {
    if (++tables.generation == 0) {  // wrapped: every slot may carry any number
      tables.memo = {};
      tables.successors = {};
      tables.generation = 1;
    }
    return tables.generation;
  }
  RunTables& run_tables_ = this_thread_run_tables();
  const std::uint32_t generation_ = next_generation(run_tables_);
  RunMemo* const run_memo_ = run_tables_.memo.data();
  RunSuccessor* const run_successors_ = run_tables_.successors.data();
  std::uint64_t run_before_last_ = 0;  // hashes of the last two runs (0: unknown)
  std::uint64_t last_run_ = 0;
  std::uint64_t run_context() const { return seeded_hash(last_run_ ^ std::rotl(run_before_last_, 29), run_seed_); }
  void remember_run(const RunMemo& run);
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
  // Dicts built by SETITEMS on the checked path (a snapshot's segments, which the fast path hands
  // over) share the key array of a recent one with the same keys, as take_flat_dict's dicts do:
  // a reader's DictLayout then knows them by one pointer compare instead of a compare per key.
  // Two are remembered, the last used first: segments list their keys in one of two orders.
  struct RecentKeys {
    const Value* keys = nullptr;  // owned by a dict whose capacity is set: never written again...
    std::size_t size = 0;         // ...at [0, size), as updates only append
  };
  static constexpr std::size_t kMinSharedKeys = 4;
  std::array<RecentKeys, 2> recent_keys_{};
  const Value* recent_key_array(std::size_t first, std::size_t pairs);
  void remember_key_array(const Value* keys, std::size_t pairs);
  void check_key(const Value& key) const {
    const Kind k = kind_of(key);
    if (k == Kind::List || k == Kind::Dict) fail(fmt::format("dict key of type {} is unhashable", kind_name(k)));
  }

  // ---- streaming (PickleOptions::entry_sink) ---------------------------------------------------
  // Kind::Skipped values carry in `integer`: 0 for a skipped container, Value::kStreamedList, this
  // for a memo copy of a streamed value (any use of it as a target, or in a built container,
  // starts again without skipping), or the DictObject of an entry for the sink (a streamed entry,
  // read by the sink when the streamed list takes it).
  static constexpr std::int64_t kPoisoned = 1;
  static Value poisoned(Kind kind) {
    Value v = skipped(kind);
    v.integer = kPoisoned;
    return v;
  }
  static Value streamed_entry(const Value& dict) {
    Value v = skipped(Kind::Dict);
    v.dict = dict.dict;
    return v;
  }
  // Whether a dict pushed on a stack of `size` items is an item of the streamed list.
  bool in_streamed_list(std::size_t size) const {
    if (!stream_outer_) return false;
    return (size > 0 && stack_[size - 1].streamed_list()) || (floor_ > 0 && stack_[floor_ - 1].streamed_list());
  }
  [[gnu::noinline]] Value new_list_or_streamed();
  [[gnu::noinline]] void stream_entries(std::size_t first, std::size_t n);
  [[gnu::noinline]] Value new_streamed_entry();
  const ListObject* outer_candidate_ = nullptr;  // a list pushed after a root key 'device_traces'
  std::size_t outer_candidate_writes_ = 0;       // memo writes before it
  const ListObject* stream_outer_ = nullptr;     // the one that holds the streamed list
  std::size_t memo_writes() const { return memo_count_ + memo_overwrites_; }

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
    if (size > 0 && (is_skip_parent(stack_[size - 1]) || is_skip_key(stack_[size - 1]))) return true;
    return floor_ > 0 && floor_ <= size && is_skip_parent(stack_[floor_ - 1]);
  }
  // Skipped, and so are its items (the streamed list and its entries are read: not skipped).
  static bool is_skip_parent(const Value& v) { return v.kind == Kind::Skipped && v.integer < Value::kStreamedList; }
  // Items entering a built list or tuple must be built themselves.
  void check_built(std::size_t first, std::size_t n) const {
    if (skip_key_.empty()) return;
    for (std::size_t i = 0; i < n; ++i)
      if (stack_[first + i].kind == Kind::Skipped) [[unlikely]]
        throw SkippedValueEscapes{};
  }
  // The same for the list holding the streamed list, which is the one skipped value it may take.
  void check_built_but_streamed_list(std::size_t first, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i)
      if (stack_[first + i].kind == Kind::Skipped && !stack_[first + i].streamed_list()) throw SkippedValueEscapes{};
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
  bool fast_paths_;                              // false: the checked switch only (PickleOptions)
  EntrySink* const sink_;                        // null: nothing streamed (PickleOptions::entry_sink)
  Arena* const entry_arena_;                     // where the flat streamed entries are built
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
    // Keys [0, n) fetched by the GETs `key_bytes` (kNoKeyBytes: no GET), no key from n on
    // (pickle_fast_paths.cpp).
    inline void set_key_bytes(const std::uint64_t* key_bytes, std::size_t n);
  };
  KeyTemplate key_template_;
  static const KeyTemplate kNoKeyTemplate;  // matches no key
  // The keys a dict read before it was handed over (a snapshot's segments: 868 in lm2.7b-ctx512,
  // between the trace entries of key_template_), matched by their bytes as key_template_'s are,
  // tried when a dict's first key is not key_template_'s: reading them one by one was ~25
  // instructions a key. Its keys live here, not in the arena, so no dict shares them: `size`
  // stays 0, and a dict that ends on these keys gets a key array of its own, as before.
  KeyTemplate handed_over_keys_;
  std::array<Value, kMaxFlatPairs> handed_over_key_values_{};
  void remember_handed_over_keys(const Value* keys, const std::uint64_t* key_bytes, std::size_t n);
};

// The binary str opcodes, one call per string read on the checked path: inline.
inline Value Machine::read_str(const unsigned char* p, std::uint64_t n) {
  std::uint32_t len = checked_length(n, "str");
  std::size_t bad = utf8_error_offset(p, len);
  if (bad != len) fail(fmt::format("str is not valid UTF-8 (byte {} of the string)", bad));
  return make_text(Kind::Str, reinterpret_cast<const char*>(p), len);
}

// Python 2 str (BINSTRING, SHORT_BINSTRING): Python 3 decodes it as ASCII by default.
inline Value Machine::read_ascii_str(const unsigned char* p, std::uint64_t n) {
  std::uint32_t len = checked_length(n, "str");
  for (std::uint32_t i = 0; i < len; ++i)
    if (p[i] & 0x80) fail("Python 2 str with non-ASCII bytes (expected ASCII)");
  return make_text(Kind::Str, reinterpret_cast<const char*>(p), len);
}

}  // namespace fraglab::pickle::internal
