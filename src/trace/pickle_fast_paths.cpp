// The pickle reader's fast paths: the bytes most of a snapshot is made of, taken without going
// through the dispatch switch one opcode at a time. Runs of memo GETs (a stack's frames) are
// checked by a tight loop and remembered by their bytes (take_get_run); flat dicts (trace
// entries) are built in place in the arena and share their key arrays, matched by the bytes that
// fetch them (take_flat_dicts). Each gives up, with nothing changed, on anything the checked path
// in pickle.cpp would look at closer; a flat dict with a value it does not take is handed over to
// the checked path there, with the stack the checked path would have. So errors and results are
// those of the checked path.
#include "trace/pickle_internal.hpp"

namespace fraglab::pickle::internal {

const Machine::KeyTemplate Machine::kNoKeyTemplate{};

Machine::RunTables& Machine::this_thread_run_tables() {
  thread_local RunTables tables;
  return tables;
}

// The end of the run of whole GETs naming set slots that starts at `at`.
//
// The same stack gives the same GETs, byte for byte: a run seen before is not decoded again.
// First the run that followed the last two the last time (run_successors_), confirmed byte for
// byte: 3 in 4 runs of the real snapshots end here. Inline in both callers, with everything else
// out of line: the hashing path's register saves and restores cost more than this check.
inline const unsigned char* Machine::valid_get_run_end(const unsigned char* at) {
  const std::uint64_t context = run_context();
  const RunSuccessor& s = run_successors_[(context >> (64 - kRunSuccessorBits)) & ~std::size_t{1}];
  const std::size_t length = s.next.length;
  if (s.context == context && s.next.generation == generation_ && static_cast<std::size_t>(end_ - at) > length &&
      kGetLength[at[length]] == 0 && std::memcmp(at, s.next.start, length) == 0) [[likely]] {
    run_before_last_ = last_run_;
    last_run_ = s.next.hash;
    return at + length;
  }
  return valid_get_run_end_unpredicted(at);
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
  if (q < end_ && *q == APPENDS && floor_ > 0 && is_skip_parent(stack_[floor_ - 1]) &&
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

// valid_get_run_end() when the successor of the last two runs is not the run at `at`.
const unsigned char* Machine::valid_get_run_end_unpredicted(const unsigned char* at) {
  const Value* const memo = &memo_[0];
  const std::size_t memo_size = memo_.size();
  const bool dense = memo_count_ == memo_size;  // no unset slots
  const unsigned char* const end = end_;
  const unsigned char* q = at;
  // The other run that followed the last two (the second way: the same two runs may be followed
  // by one of two in turn).
  {
    const std::uint64_t context = run_context();
    RunSuccessor* const set = &run_successors_[(context >> (64 - kRunSuccessorBits)) & ~std::size_t{1}];
    const std::size_t length = set[1].next.length;
    if (set[1].context == context && set[1].next.generation == generation_ &&
        static_cast<std::size_t>(end - q) > length && kGetLength[q[length]] == 0 &&
        std::memcmp(q, set[1].next.start, length) == 0) {
      std::swap(set[0], set[1]);  // the last used comes first
      run_before_last_ = last_run_;
      last_run_ = set[0].next.hash;
      return q + length;
    }
  }
  // A run is looked up by its bytes up to the next APPENDS byte followed by SETITEMS or with no
  // GET opcode byte in the four after it, which is where a list of frames ends (it is the last
  // value of its dict, and a new dict or list follows). An APPENDS byte inside a LONG_BINGET index
  // has the next GET within four bytes: stopping there gave every run through that frame the same
  // key, and those runs evicted each other. A byte taken for the end wrongly only changes the
  // key's length. A hit is confirmed by comparing the whole run and seeing a non-GET opcode after
  // it. The same bytes from the same start decode the same way; their indices were below the memo
  // size of that time, and set slots stay set.
  RunMemo* memo_slot = nullptr;
  std::uint64_t run_hash = 0;
  if (end - q >= 16) {
    const unsigned char* const limit = q + std::min<std::ptrdiff_t>(end - q, 4096);
    const unsigned char* const key_end = run_key_end(q, limit);
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
      // The last step is seeded per process (fraglab/seeded_hash.hpp), so no input can aim its
      // runs at one set to evict each other (a miss only costs decoding the run, but even so).
      run_hash = seeded_hash(h ^ load_le<std::uint64_t>(key_end - 8), run_seed_);
      // Two ways per set: a program's few hundred distinct stacks in one way each collided
      // often enough that a third of the runs decoded again were evicted ones, not new ones.
      memo_slot = &run_memo_[(run_hash >> (64 - kRunMemoBits)) & ~std::size_t{1}];
      for (int way = 0; way < 2; ++way) {
        const RunMemo& m = memo_slot[way];
        const std::size_t length = m.length;
        if (m.hash == run_hash && m.generation == generation_ && static_cast<std::size_t>(end - q) > length &&
            kGetLength[q[length]] == 0 && std::memcmp(q, m.start, length) == 0) {
          if (way == 1) std::swap(memo_slot[0], memo_slot[1]);  // the last used comes first
          remember_run(memo_slot[0]);
          q += length;
          goto decoded;
        }
      }
    }
  }
  if (dense) {
    // While 5 bytes are readable, no branch on which GET it is (the two mix irregularly), and one
    // compare for both a bad index and another opcode (kGetIndexMask).
    if (end - q >= 5) {
      const unsigned char* const last = end - 5;  // the last GET start with 5 bytes readable
      while (q <= last) {
        const unsigned char op = *q;
        const std::uint64_t index = (load_le<std::uint32_t>(q + 1) | kNotAnIndex) & kGetIndexMask[op];
        if (index >= memo_size) break;
        q += kGetLength[op];
      }
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
  if (memo_slot && q < end && kGetLength[*q] == 0 && q - at <= std::numeric_limits<std::uint32_t>::max()) {
    memo_slot[1] = memo_slot[0];  // the least recently used way goes
    memo_slot[0] = RunMemo{run_hash, at, static_cast<std::uint32_t>(q - at), generation_};
    remember_run(memo_slot[0]);
  } else {
    last_run_ = run_before_last_ = 0;  // no key: the next run has no context
  }
decoded:
  return q;
}

// `run` (checked, and ended at another opcode, as a run-memo entry) came after the last two runs.
void Machine::remember_run(const RunMemo& run) {
  const std::uint64_t context = run_context();
  if (last_run_ != 0 && run_before_last_ != 0) {
    RunSuccessor* const set = &run_successors_[(context >> (64 - kRunSuccessorBits)) & ~std::size_t{1}];
    if (set[0].context != context || set[0].next.start != run.start || set[0].next.length != run.length)
      set[1] = set[0];  // the least recently used way goes
    set[0] = {context, run};
  }
  run_before_last_ = last_run_;
  last_run_ = run.hash;
}

// Hands take_flat_dict's `dict` over to the checked path: the memo up to `memo_top`, the dict's
// header (empty until its SETITEMS), and the stack the checked path would have after the opcodes
// read: the dict, its MARK, its `n` pairs' keys and values, and keys[n] when `with_key` (a pair's
// key read, its value not). When `list_run_end` is set, the value is the skipped frames `list`:
// it too, its MARK, and the values of the GETs in [list_run_start, list_run_end), which
// valid_get_run_end checked. Out of line: inlined, it takes registers from take_flat_dict's pair
// loop (~12 instructions on every entry of a snapshot without frames).
void Machine::hand_over_dict(const Value& dict, Arena& arena, const Value* keys, const Value* values, std::size_t n,
                             bool with_key, Value* memo_top, const Value& list, const unsigned char* list_run_start,
                             const unsigned char* list_run_end) {
  memo_.set_top(memo_top);
  memo_count_ = memo_.size();
  arena.take(kFlatDictHeader);
  *dict.dict = DictObject{};
  push(dict);
  mark();
  // Written in bulk after one capacity check, as take_get_run does.
  stack_.reserve_more(2 * n + 1);
  Value* top = stack_.top();
  for (std::size_t i = 0; i < n; ++i) {
    *top++ = keys[i];
    *top++ = values[i];
  }
  if (with_key) *top++ = keys[n];
  stack_.set_top(top);
  if (!list_run_end) return;
  push(list);
  mark();
  stack_.reserve_more(static_cast<std::size_t>(list_run_end - list_run_start) / 2);  // GETs take 2 or 5 bytes
  top = stack_.top();
  const Value* const memo = &memo_[0];
  for (const unsigned char* r = list_run_start; r < list_run_end; r += kGetLength[*r])
    *top++ = memo[*r == BINGET ? r[1] : load_le<std::uint32_t>(r + 1)];
  stack_.set_top(top);
}

void Machine::place_handed_over_tuple(std::size_t at, Value* memoized, const Value& first, std::int64_t second) {
  Value* const items = alloc_values(2);
  items[0] = first;
  items[1] = make_int(second);
  stack_[at].tuple_items = items;
  if (memoized) memoized->tuple_items = items;
}

void Machine::KeyTemplate::set_key_bytes(const std::uint64_t* key_bytes, std::size_t n) {
  for (std::size_t i = 0; i <= kMaxFlatPairs; ++i) {
    const std::uint64_t get = i < n ? key_bytes[i] : kNoKeyBytes;
    bytes[i] = get;
    lengths[i] = kGetLength[get & 0xff];
    masks[i] = get == kNoKeyBytes ? 0 : kGetMask[get & 0xff];
  }
}

// Keys [0, n) of a dict handed over with keys of its own, and their bytes (as KeyTemplate's), for
// the next dict like it (handed_over_keys_).
void Machine::remember_handed_over_keys(const Value* keys, const std::uint64_t* key_bytes, std::size_t n) {
  copy_values(handed_over_key_values_.data(), keys, n);
  KeyTemplate& t = handed_over_keys_;
  t.keys = handed_over_key_values_.data();
  t.size = 0;  // never shared (see handed_over_keys_)
  t.memo_overwrites = memo_overwrites_;
  t.set_key_bytes(key_bytes, n);
}

// A snapshot trace entry as CPython pickles it: EMPTY_DICT MEMOIZE MARK, then key/value pairs
// (a key is a memo GET or a short str; a value a memo GET, short str, small int, None or bool, or
// the frames value: a skipped list of GETs, or a GET of a shared one), each maybe memoized, then
// SETITEMS. Taken here a pair at a time, building the dict in place in the arena instead of
// through the stack. Entries list the same keys, fetched by the same GET bytes: while a key's
// bytes are those of the last dict's key at its position (key_template_), it is that key, with
// one compare instead of a decode and a check; a dict whose keys all matched shares the last
// one's key array (DictObject). Only the value goes through a switch. Anything the checked path
// would look at closer (an error, a key that is not plain, a skipped value under another key, the
// input's last bytes) returns `at` with nothing changed: the checked path then runs the same
// bytes. Returns the byte after SETITEMS on success, with the dict pushed.
// `last_pair_start` is the same for every dict of a run: take_flat_dicts() works it out once, as
// it checks once that the memo is dense (every dict taken leaves it dense).
// A dict with a value this path does not take (a list of dicts, a tuple, a frame not seen before
// inside a frames list, ...) is handed over to the checked path there (hand_over, below):
// `handed_over` is set and the position of that opcode returned.
// `kStreamed`: an item of the streamed list (EntrySink), built in the entry arena, pushed as a
// streamed entry and memoized poisoned (memo_copy).
template <bool kStreamed>
[[gnu::always_inline]] inline const unsigned char* Machine::take_flat_dict(const unsigned char* at,
                                                                           const unsigned char* const last_pair_start,
                                                                           bool& handed_over, Arena* const dict_arena) {
  constexpr std::size_t kMaxPairs = kMaxFlatPairs;
  const unsigned char* const end = end_;
  if (end - at < 3 || at[1] != MEMOIZE || at[2] != MARK) return at;
  // New memo slots are written past the memo's top and kept only on success; at most one per
  // opcode read below (the dict, and each key, value and frames list; a tuple ends the dict's
  // pairs, read below kMaxPairs).
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
  constexpr std::size_t kHeader = kFlatDictHeader;
  Arena& arena = *dict_arena;
  auto* const block = static_cast<unsigned char*>(arena.peek(kHeader + kMaxPairs * sizeof(Value)));
  Value dict;
  dict.kind = kStreamed ? Kind::Skipped : Kind::Dict;  // a streamed entry: see streamed_entry()
  dict.length = kStreamed ? static_cast<std::uint32_t>(Kind::Dict) : 0;
  dict.dict = reinterpret_cast<DictObject*>(block);
  *memo_top++ = kStreamed ? poisoned(Kind::Dict) : dict;
  Value* const values = reinterpret_cast<Value*>(block + kHeader);
  // While the keys are the template's (tmpl, below), they are not copied; from the first that is
  // not, the keys and their bytes gather here. Uninitialised: only keys[0, n) are ever read.
  union Keys {
    Keys() {}  // NOLINT(modernize-use-equals-default): `= default` would be deleted (Value has a constructor)
    Value values[kMaxPairs];
  } keys;
  std::array<std::uint64_t, kMaxPairs> key_bytes;  // as KeyTemplate::bytes
  const KeyTemplate* tmpl = key_template_.memo_overwrites == memo_overwrites_ ? &key_template_ : &kNoKeyTemplate;
  bool own_keys = false;  // keys[] and key_bytes[] hold keys [0, n)
  // Keys [0, n]: the template's, or keys[] once own_keys. A pair's key is read from here only where
  // it is needed (a MEMOIZE or a skipped value after it), not kept as a pointer: most pairs never
  // look at their key.
  const Value* key_array = tmpl->keys;
  std::size_t n = 0;  // pairs read
  const unsigned char* q = at + 3;
  // At an opcode this path does not take but the checked path may (not an error): the stack and
  // the MARK as the checked path would have them there, from which it goes on (hand_over_dict);
  // the memo already holds what the MEMOIZEs stored. Giving up instead read the whole dict again
  // one opcode at a time. Returns `q`, the opcode the checked path runs next.
  auto hand_over = [&](bool with_key, const unsigned char* list_run_end = nullptr) {
    if (own_keys) remember_handed_over_keys(keys.values, key_bytes.data(), n);
    hand_over_dict(dict, arena, key_array, values, n, with_key, memo_top, values[n], q + 1, list_run_end);
    handed_over = true;
    return list_run_end ? list_run_end : q;
  };
  for (;;) {
    if (q > last_pair_start) [[unlikely]] {
      if (q < end && *q == SETITEMS) break;
      return give_up();
    }
    // The key: the template's, by the same bytes, or read and checked. (A template matches only
    // below its size, so n stays below kMaxPairs on that path.)
    const std::uint64_t eight_bytes = load_le<std::uint64_t>(q);
    if ((eight_bytes & tmpl->masks[n]) == tmpl->bytes[n]) [[likely]] {
      q += tmpl->lengths[n];
    } else {
      if (*q == SETITEMS) break;
      if (n == kMaxPairs) return give_up();
      if (n == 0 && tmpl != &handed_over_keys_ && handed_over_keys_.memo_overwrites == memo_overwrites_ &&
          (eight_bytes & handed_over_keys_.masks[0]) == handed_over_keys_.bytes[0]) {
        tmpl = &handed_over_keys_;  // a dict like the last one handed over: its keys from here
        key_array = tmpl->keys;
        continue;
      }
      // Not a plain key: an int key, or a tuple's second item (segments). Handed over before the
      // keys are copied, so that a segment read on handed_over_keys_ is handed over without
      // remembering its keys again.
      if (*q != BINGET && *q != LONG_BINGET && *q != SHORT_BINUNICODE) {
        // A small int and TUPLE2 (a segment's (0, 0)): the value read last and it become the
        // pair's tuple here, as TUPLE2 makes it on the checked path, and the dict is handed over
        // after it (and its MEMOIZE). The checked path makes a skipped tuple under the skip key
        // and refuses a skipped item: those are handed over before the tuple.
        if (*q == BININT1 && q[2] == TUPLE2 && n > 0 && values[n - 1].kind != Kind::Skipped &&
            !is_skip_key(key_array[n - 1])) {
          const Value first = values[n - 1];
          const std::int64_t second = q[1];
          values[n - 1] = Value{};
          values[n - 1].kind = Kind::Tuple;
          values[n - 1].length = 2;  // its items are placed once handed over
          q += 3;
          Value* memoized = nullptr;
          if (*q == MEMOIZE) {
            memoized = memo_top;
            *memo_top++ = values[n - 1];
            ++q;
          }
          const std::size_t at = stack_.size() + 2 * n;  // the dict, then the pairs: value n - 1
          hand_over(false);
          place_handed_over_tuple(at, memoized, first, second);
          return q;
        }
        return hand_over(false);
      }
      if (!own_keys) {  // the keys so far were the template's
        copy_values(keys.values, tmpl->keys, n);
        std::copy_n(tmpl->bytes.begin(), n, key_bytes.begin());
        own_keys = true;
        tmpl = &kNoKeyTemplate;
        key_array = keys.values;
      }
      Value& k = keys.values[n];
      key_bytes[n] = kNoKeyBytes;
      if (*q == BINGET || *q == LONG_BINGET) {
        const std::size_t index = *q == BINGET ? q[1] : load_le<std::uint32_t>(q + 1);
        if (index >= static_cast<std::size_t>(memo_top - memo)) return give_up();
        k = memo[index];
        key_bytes[n] = eight_bytes & kGetMask[*q];
        q += kGetLength[*q];
      } else {  // SHORT_BINUNICODE
        const std::size_t length = q[1];
        if (static_cast<std::size_t>(end - q) < 2 + length + kPairBytes || utf8_error_offset(q + 2, length) != length)
          return give_up();
        k = make_text(Kind::Str, reinterpret_cast<const char*>(q + 2), static_cast<std::uint32_t>(length));
        q += 2 + length;
      }
      if (((1u << static_cast<unsigned>(k.kind)) & kNotPlainKey) != 0) return give_up();
    }
    // The value, after the key's MEMOIZE if it has one: a case of the switch, so that the usual
    // pair (a key fetched by a GET) is not tested for it.
    Value& v = values[n];
  value:
    // The four usual values (a GET, LONG1, BININT, BININT1: all but the frames of a trace entry)
    // are tested for before the switch. Which one comes follows from the pairs before it, which
    // the predictors of these conditional branches learn; the switch's one indirect jump to every
    // case was mispredicted on most pairs (a predictor keyed by its last target sees them cycle).
    if ((*q | 2) == LONG_BINGET) {  // BINGET or LONG_BINGET
      const std::size_t index = *q == BINGET ? q[1] : load_le<std::uint32_t>(q + 1);
      if (index >= static_cast<std::size_t>(memo_top - memo)) return give_up();
      v = memo[index];
      // A shared frames list: skipped, so only under the skip key.
      if (v.kind == Kind::Skipped && !is_skip_key(key_array[n])) return give_up();
      q += kGetLength[*q];
    } else if (*q == LONG1) {
      const std::size_t length = q[1];
      if (length - 1 >= 8) return give_up();
      const unsigned shift = static_cast<unsigned>(64 - 8 * length);
      v = make_int(static_cast<std::int64_t>(load_le<std::uint64_t>(q + 2) << shift) >> shift);
      q += 2 + length;
    } else if (*q == BININT) {
      v = make_int(load_le<std::int32_t>(q + 1));
      q += 5;
    } else if (*q == BININT1) {
      v = make_int(q[1]);
      q += 2;
    } else {
      switch (*q) {
        case MEMOIZE:
          if (q[1] == MEMOIZE) return give_up();  // memoized twice: the checked path
          *memo_top++ = key_array[n];
          ++q;
          goto value;
        case SHORT_BINUNICODE: {
          const std::size_t length = q[1];
          if (static_cast<std::size_t>(end - q) < 2 + length + 1 || utf8_error_offset(q + 2, length) != length)
            return give_up();
          v = make_text(Kind::Str, reinterpret_cast<const char*>(q + 2), static_cast<std::uint32_t>(length));
          q += 2 + length;
          // A str is the one value a writer memoizes (CPython: a new str); any other value followed
          // by MEMOIZE is handed over at it, as an opcode this path does not take as a key.
          if (*q == MEMOIZE) {
            *memo_top++ = v;
            ++q;
          }
          break;
        }
        case BININT2:
          v = make_int(load_le<std::uint16_t>(q + 1));
          q += 3;
          break;
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
          if (!is_skip_key(key_array[n])) return hand_over(true);  // a list of dicts (a segment's blocks)
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
            if (run_end == end) return give_up();
            if (*run_end != APPENDS) {
              // A bad GET: the checked path reports it. Else a frame dict not seen before, or a FRAME.
              if (kGetLength[*run_end] != 0) return give_up();
              return hand_over(true, run_end);  // with the list, its MARK and its GETs' values
            }
            q = run_end + 1;
          }
          ++n;
          continue;
        default:
          return hand_over(true);
      }
    }
    ++n;
  }
  // SETITEMS: every pair is already checked.
  arena.take(kHeader + n * sizeof(Value));
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
    key_template_.set_key_bytes(key_bytes.data(), n);
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
  if (memo_count_ != memo_.size()) {  // unset slots: the checked path
    flat_dict_refused_ = at;
    return at;
  }
  // A pair may start at or before this with kPairBytes readable.
  const unsigned char* const last_pair_start = end_ - begin_ >= kPairBytes ? end_ - kPairBytes : begin_;
  // Items of the streamed list: all of them after its MARK, or the first one on top of it (APPEND).
  if (stream_outer_ && floor_ > 0 && stack_[floor_ - 1].streamed_list())
    return take_flat_dict_run<true>(at, last_pair_start, false);
  if (in_streamed_list(stack_.size())) return take_flat_dict_run<true>(at, last_pair_start, true);
  return take_flat_dict_run<false>(at, last_pair_start, false);
}

// take_flat_dicts() for dicts that all are (kStreamed) or are not items of the streamed list, or,
// with `only_first`, the first one streamed and the rest taken as not: one copy of the pair loop
// each, so that neither tests which it is or picks its arena per dict.
template <bool kStreamed>
const unsigned char* Machine::take_flat_dict_run(const unsigned char* at, const unsigned char* const last_pair_start,
                                                 bool only_first) {
  const unsigned char* q = at;
  for (;;) {
    bool handed_over = false;
    const unsigned char* after =
        take_flat_dict<kStreamed>(q, last_pair_start, handed_over, kStreamed ? entry_arena_ : &arena_);
    if (after == q) {
      flat_dict_refused_ = q;
      return q;
    }
    q = after;
    if (handed_over || q == end_ || *q != EMPTY_DICT) return q;
    if (kStreamed && only_first) return take_flat_dict_run<false>(q, last_pair_start, false);
  }
}

}  // namespace fraglab::pickle::internal
