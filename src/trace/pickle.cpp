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
//
// This file holds that switch (Machine::run) and the container opcodes it runs; the rest of the
// reader is in the files pickle_internal.hpp lists.
#include "trace/pickle.hpp"

#include "trace/pickle_internal.hpp"

namespace fraglab::pickle {
namespace internal {

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
  if (target.kind == Kind::Skipped) [[unlikely]] {
    if (target.streamed_list()) {
      stream_entries(first, n);
    } else if (target.integer != 0) {
      throw SkippedValueEscapes{};  // a memo copy of a streamed value (memo_copy)
    }
    return;
  }
  if (n == 0) return;
  if (target.list == stream_outer_) [[unlikely]]
    check_built_but_streamed_list(first, n);
  else
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
  // A streamed entry is built (in the entry arena); a memo copy of a streamed value may not change.
  const bool built = target.kind != Kind::Skipped || target.is_streamed_entry();
  if (target.kind == Kind::Skipped && target.integer == kPoisoned) throw SkippedValueEscapes{};
  const std::size_t pairs = n_items / 2;
  // The first SETITEMS of a new dict whose keys are a remembered key array's (a segment handed
  // over by take_flat_dict): those keys passed the test below when remembered and equal them
  // byte for byte, so only the values are tested (the same exception at the same pair).
  if (built && target.dict->size == 0 && target.dict->capacity == 0) {
    if (const Value* keys = recent_key_array(first, pairs)) {
      // The values sit at every second stack slot from first + 1.
      const Value* const pair_values = &stack_[first + 1];
      const Value* const values_end = pair_values + 2 * pairs;
      for (const Value* v = pair_values; v != values_end; v += 2) {
        if (v->kind == Kind::Skipped && !is_skip_key(keys[(v - pair_values) / 2])) [[unlikely]]
          throw SkippedValueEscapes{};
      }
      DictObject& d = *target.dict;
      Value* values = alloc_values(pairs);
      Value* to = values;
      for (const Value* v = pair_values; v != values_end; v += 2) *to++ = *v;
      d.keys = keys;
      d.values = values;
      d.size = static_cast<std::uint32_t>(pairs);
      return;  // capacity stays 0: the next update copies both arrays
    }
  }
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
  if (d.size == 0) remember_key_array(keys, pairs);
  d.size = static_cast<std::uint32_t>(want);
}

namespace {
// Whether keys[0, pairs) equal the keys of the pairs at pair_keys (every second Value), by their
// 16 bytes, without a branch per key: arrays of the right size almost always match.
bool same_key_bytes(const Value* keys, const Value* pair_keys, std::size_t pairs) {
  static_assert(sizeof(Value) == 16);
#if defined(__SSE2__)
  auto key_equal = [&](std::size_t i) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pair_keys + 2 * i));
    return _mm_cmpeq_epi8(a, b);
  };
  // Two keys a step (a loop's overhead is most of a key's compare), the odd one first.
  __m128i equal = pairs % 2 ? key_equal(0) : _mm_set1_epi8(-1);
  for (std::size_t i = pairs % 2; i < pairs; i += 2)
    equal = _mm_and_si128(equal, _mm_and_si128(key_equal(i), key_equal(i + 1)));
  return _mm_movemask_epi8(equal) == 0xffff;
#else
  std::uint64_t differ = 0;
  for (std::size_t i = 0; i < pairs; ++i) {
    std::uint64_t a[2], b[2];
    std::memcpy(a, keys + i, 16);
    std::memcpy(b, pair_keys + 2 * i, 16);
    differ |= (a[0] ^ b[0]) | (a[1] ^ b[1]);
  }
  return differ == 0;
#endif
}
}  // namespace

// A key array remembered by remember_key_array() that holds the keys of the pairs at
// stack_[first, first + 2 * pairs), or nullptr. Keys are compared by their 16 bytes: equal bytes
// are the same key (a memoized key is copied with its padding, so the keys of one writer compare
// equal; any other difference only means no sharing).
const Value* Machine::recent_key_array(std::size_t first, std::size_t pairs) {
  const Value* const pair_keys = &stack_[first];
  for (RecentKeys& recent : recent_keys_) {
    if (recent.size != pairs || !same_key_bytes(recent.keys, pair_keys, pairs)) continue;
    if (&recent != &recent_keys_[0]) std::swap(recent_keys_[0], recent);  // the last used first
    return recent_keys_[0].keys;
  }
  return nullptr;
}

void Machine::remember_key_array(const Value* keys, std::size_t pairs) {
  if (pairs < kMinSharedKeys) return;  // too few to pay for the compare
  recent_keys_[1] = recent_keys_[0];
  recent_keys_[0] = RecentKeys{keys, pairs};
}

// EMPTY_LIST with a sink: the streamed list when this is the first list made as an item of the
// list under the root dict's key 'device_traces' (the root at the stack's bottom, its MARK just
// above it, the key at a key's place of its pairs; that list's items come by APPEND, one device,
// or after its own MARK). The list holding it must have one reference, the one on the stack: no
// memo write since it was made, or one, into the last memo slot, which is poisoned here.
Value Machine::new_list_or_streamed() {
  const std::size_t size = stack_.size();
  auto is_device_traces = [](const Value& v) {
    return v.kind == Kind::Str && v.length == 13 && std::memcmp(v.text, "device_traces", 13) == 0;
  };
  if (!stream_outer_ && outer_candidate_ && !marks_.empty() && marks_[0] == 1 && stack_[0].kind == Kind::Dict) {
    std::size_t outer = 0;  // the holding list's place on the stack (0: none)
    if (marks_.size() == 1 && size >= 1)
      outer = size - 1;
    else if (marks_.size() == 2 && floor_ >= 1)
      outer = floor_ - 1;
    const std::size_t writes = memo_writes() - outer_candidate_writes_;
    Value* const last = memo_.size() > 0 ? &memo_[memo_.size() - 1] : nullptr;
    const bool memoized_last = writes == 1 && memo_count_ == memo_.size() && last && last->kind == Kind::List &&
                               last->list == outer_candidate_;
    if (outer >= 2 && outer % 2 == 0 && stack_[outer].kind == Kind::List && stack_[outer].list == outer_candidate_ &&
        is_device_traces(stack_[outer - 1]) && (writes == 0 || memoized_last)) {
      if (memoized_last) *last = poisoned(Kind::List);
      stream_outer_ = outer_candidate_;
      Value v = skipped(Kind::List);
      v.integer = Value::kStreamedList;
      return v;
    }
  }
  Value v = new_list(0, 0);
  if (!stream_outer_ && size >= 2 && size % 2 == 0 && is_device_traces(stack_[size - 1])) {
    outer_candidate_ = v.list;
    outer_candidate_writes_ = memo_writes();
  }
  return v;
}

// An entry dict of the streamed list made on the checked path (the fast path builds its own).
Value Machine::new_streamed_entry() { return streamed_entry(new_dict(0, 0)); }

// The streamed list takes stack_[first, first + n): each goes to the sink in order. Then no
// streamed entry is left anywhere it could be read (each had one reference, now taken, or put
// where nothing reads: skipped containers, skip_key values), so the entry arena starts again.
void Machine::stream_entries(std::size_t first, std::size_t n) {
  if (n) sink_->take(std::span<const Value>(&stack_[first], n));
  entry_arena_->rewind();
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
        // A streamed value has one reference (memo_copy): a second one means starting again.
        if ((top.kind == Kind::Skipped && top.integer >= Value::kStreamedList) ||
            (top.kind == Kind::List && top.list == stream_outer_))
          throw SkippedValueEscapes{};
        push(top);
        break;
      }

      // ---- memo ----
      case BINGET:
      case LONG_BINGET:
        // Keys and shared values come as lone GETs or short runs, taken one by one here; a long
        // run (a stack's frames) goes to the tight loop of take_get_run().
        for (int taken = 0;; ++taken) {
          if (taken == 3 && fast_paths_) {
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
          memo_.push_back(memo_copy(stack_.back()));
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
        if (n - 1 < 8 && end_ - at >= 8 && fast_paths_) [[likely]] {
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
        push(skip_at(stack_.size()) ? skipped(Kind::List) : sink_ ? new_list_or_streamed() : new_list(0, 0));
        break;
      case EMPTY_DICT:
        if (skip_at(stack_.size())) {
          push(skipped(Kind::Dict));
          break;
        }
        if (const unsigned char* after = fast_paths_ ? take_flat_dicts(op_at_) : op_at_; after != op_at_) {
          p = after;
          break;
        }
        push(in_streamed_list(stack_.size()) ? new_streamed_entry() : new_dict(0, 0));
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
        std::size_t n = static_cast<std::size_t>(op - TUPLE1) + 1;
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

}  // namespace internal

PickleDocument::PickleDocument(std::string_view bytes, std::string_view origin, const PickleOptions& options)
    // Containers take 4-6 bytes per pickle byte (16-byte values from 1-5 byte opcodes). A first
    // chunk of 4x is only address space until it is written, and saves most chained chunks. With
    // frames skipped and the trace entries streamed, what is built (segments, blocks) is a small
    // part of the input: a first chunk of 4x was counted against --max-memory all the same.
    : arena_(std::max<std::size_t>(options.entry_sink && options.can_stream() ? bytes.size() / 2 : 4 * bytes.size(),
                                   64 * 1024)) {
  if (!options.skip_key.empty()) {
    try {
      // Streamed entries are built here, and it starts again as each batch of them is taken: it
      // stays as small as a batch (1000 entries of ~150 bytes), or the input when that is less.
      Arena entry_arena(std::clamp<std::size_t>(bytes.size() / 4, 4096, 256 * 1024), false);
      EntrySink* const sink = options.can_stream() ? options.entry_sink : nullptr;
      internal::Machine machine(bytes, origin, arena_, options.skip_key, options.fast_paths, sink, &entry_arena);
      root_ = machine.run(protocol_);
      skipped_ = true;
      streamed_lists_ = machine.streamed_lists();
      return;
    } catch (const internal::SkippedValueEscapes&) {
      // Build everything: what was built so far stays in the arena, unused.
      if (options.entry_sink) options.entry_sink->discard();
    }
  }
  internal::Machine machine(bytes, origin, arena_, {}, options.fast_paths);
  root_ = machine.run(protocol_);
}

}  // namespace fraglab::pickle
