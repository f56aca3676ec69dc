// A safe reader for Python pickles of plain data (protocols 0-5; snapshots use 2 and 4: README
// "Traces", allocator-model §11.1). It interprets only the opcodes that build dicts,
// lists, tuples, str, bytes, ints, floats, bools and None; every opcode that could name or call
// Python code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*, ...) is
// refused with an InputError naming the byte offset and the opcode. Nothing is ever executed.
//
// Invariants:
//  - a PickleDocument owns every container its values point to (one bump arena, freed at
//    once), and keeps pointers into the input bytes: the bytes must outlive the document;
//  - str and bytes values are views into the input, except text-protocol strings (UNICODE), which
//    are decoded into the arena; str values are valid UTF-8 (surrogates allowed, as Python's
//    "surrogatepass");
//  - integers are held in 64 bits: Int covers [-2^63, 2^63), UInt covers [2^63, 2^64); anything
//    wider is refused (no snapshot field needs more);
//  - containers alias as in Python: a memo GET of a list yields the same list object, so a list
//    appended to after it was memoized is seen complete through every reference;
//  - bad input (truncation, stack underflow, missing MARK, bad memo index, lengths beyond the
//    buffer) is an InputError "ORIGIN: pickle byte OFFSET: opcode NAME (0xXX): WHAT", never UB;
//  - with PickleOptions::skip_key, containers stored under that key are not built (Kind::Skipped)
//    but every opcode is still run and checked, so the document is the same as without the
//    option except for those values, and the same input fails with the same message. A skipped
//    container that would be reachable any other way (memo GET into a built container, the
//    root) makes the reader start again without skipping: the result never depends on a guess;
//  - with PickleOptions::entry_sink, the entries of a snapshot's first device trace list are
//    handed to the sink as that list takes them, and not kept: the list is a Kind::Skipped value
//    that streamed_list() recognises, and a document is only handed out when nothing else can
//    reach those entries (else the reader starts again without skipping or streaming).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>
#include <vector>

namespace fraglab::pickle {

enum class Kind : std::uint8_t {
  None,
  Bool,
  Int,   // signed 64-bit
  UInt,  // an integer in [2^63, 2^64): only unsigned values that do not fit Int
  Float,
  Str,
  Bytes,  // bytes and bytearray
  List,
  Tuple,
  Dict,
  Missing,  // never visible outside the reader: an unset memo slot
  Skipped,  // a container under PickleOptions::skip_key, not built: no items
};

// "int", "str", ...: the Python type name, for error messages.
std::string_view kind_name(Kind kind);

struct Value;

// A list's storage grows by reallocation from the arena (the old block is simply abandoned).
struct ListObject {
  Value* items = nullptr;
  std::uint32_t size = 0;
  std::uint32_t capacity = 0;
};

// Insertion-ordered key/value pairs, keys and values in two arrays. Duplicate keys are kept;
// find() returns the last one, which is what Python's dict would hold after the same SETITEM
// sequence. Consecutive flat dicts with the very same keys in the same order (a snapshot's trace
// entries) share one key array, like CPython's key-sharing dicts (PEP 412): half the storage, and
// a reader sees "the same keys as the last entry" by one pointer compare (`keys`).
struct DictObject {
  const Value* keys = nullptr;  // maybe shared: never written in place while capacity is 0
  Value* values = nullptr;
  std::uint32_t size = 0;      // number of pairs
  std::uint32_t capacity = 0;  // pairs both arrays have room for, owned; 0: the next update copies
};

// A 16-byte tagged value. Copies are cheap and share containers (Python reference semantics).
struct Value {
  Kind kind = Kind::None;
  std::uint32_t length = 0;  // Str/Bytes: bytes; Tuple: items; Skipped: the Kind it would have
  union {
    bool boolean;
    std::int64_t integer;
    std::uint64_t unsigned_integer;
    double real;
    const char* text;
    const Value* tuple_items;
    ListObject* list;
    DictObject* dict;
  };

  Value() : integer(0) {}

  bool is_none() const { return kind == Kind::None; }
  bool is_int() const { return kind == Kind::Int || kind == Kind::UInt; }
  bool is_str() const { return kind == Kind::Str; }
  bool is_dict() const { return kind == Kind::Dict; }
  // List or tuple: both are sequences to a reader of plain data.
  bool is_sequence() const { return kind == Kind::List || kind == Kind::Tuple; }

  std::string_view str() const { return {text, length}; }  // Str or Bytes only
  // Items of a list or tuple (empty for any other kind).
  std::span<const Value> items() const;
  // The device trace list whose entries went to PickleOptions::entry_sink (see EntrySink).
  bool streamed_list() const { return kind == Kind::Skipped && integer == kStreamedList; }
  // Kind::Skipped values carry this in `integer` for the streamed list (0 for skipped ones).
  static constexpr std::int64_t kStreamedList = 2;
  // An item of the streamed list that was built for the sink: its dict (EntrySink::take).
  bool is_streamed_entry() const { return kind == Kind::Skipped && integer > kStreamedList; }
  Value streamed_dict() const {
    Value v;
    v.kind = Kind::Dict;
    v.dict = dict;
    return v;
  }
  // Dict lookup by str key; nullptr when absent or when this is not a dict.
  const Value* find(std::string_view key) const;
  std::uint32_t dict_size() const { return kind == Kind::Dict ? dict->size : 0; }
  const Value& dict_key(std::uint32_t i) const { return dict->keys[i]; }
  const Value& dict_value(std::uint32_t i) const { return dict->values[i]; }
};
static_assert(sizeof(Value) == 16, "values are copied a lot: keep them two words");

// A bump allocator: memory is handed out in order from large chunks and released all at once
// with the document. (std::pmr::monotonic_buffer_resource does the same, but through an
// out-of-line virtual call per allocation, which profiles showed at ~3 allocations per snapshot
// entry.) Chunks are not zeroed: every byte handed out is written before it is read.
//
// A released chunk of up to kMaxSpareChunk bytes is kept, one per thread, for the next document
// of that thread, as malloc keeps freed blocks below its mmap threshold (glibc's tops out at the
// same 32 MiB). The arena's chunks are mmap-sized and so never kept by malloc: without this, each
// parse had the kernel fault in and zero its pages again (a sixth of the time of parsing a
// snapshot again, in `perf`).
class Arena {
 public:
  static constexpr std::size_t kMaxSpareChunk = std::size_t{32} << 20;

  // `shares_spare` false: a scratch arena, which neither takes nor keeps the spare chunk below.
  explicit Arena(std::size_t first_chunk, bool shares_spare = true)
      : next_chunk_(first_chunk), shares_spare_(shares_spare) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `bytes` of storage aligned to 16 (enough for Value and the container objects). Callers bound
  // container sizes to 2^32 items, so `bytes` is far from overflowing the rounding below.
  void* allocate(std::size_t bytes) {
    bytes = (bytes + 15) & ~std::size_t{15};
    if (bytes > static_cast<std::size_t>(end_ - cur_)) [[unlikely]]
      refill(bytes);
    void* p = cur_;
    cur_ += bytes;
    return p;
  }
  // Room for up to `bytes` where the next allocation will start, not yet taken: the caller writes
  // there, then take()s what it used, with no other allocation in between.
  void* peek(std::size_t bytes) {
    if (bytes > static_cast<std::size_t>(end_ - cur_)) [[unlikely]]
      refill(bytes);
    return cur_;
  }
  void take(std::size_t bytes) { cur_ += (bytes + 15) & ~std::size_t{15}; }
  // Hands out the last (biggest) chunk again from its start: everything handed out before is
  // void. For a scratch arena whose contents are dead at known points.
  void rewind() {
    if (chunks_.empty()) return;
    cur_ = chunks_.back().data;
    end_ = cur_ + chunks_.back().size;
  }

  // Frees this thread's kept chunk (the next document's first chunk comes from the system).
  static void release_spare_chunk();

  // A chunk from aligned operator new, with what it takes to give it back.
  struct Chunk {
    std::byte* data = nullptr;
    std::size_t size = 0;
    std::align_val_t align{};
  };

 private:
  void refill(std::size_t bytes);
  std::vector<Chunk> chunks_;
  std::byte* cur_ = nullptr;
  std::byte* end_ = nullptr;
  std::size_t next_chunk_;
  bool shares_spare_;
};

// Takes a snapshot's trace entries as the reader completes them (PickleOptions::entry_sink), so
// that they need not be kept: a million entries would fill ~150 MB of arena pages, which the kernel
// zero-fills, only to be walked once afterwards. The streamed list is the first list built as an
// item of the list under the root dict's key 'device_traces'. take() gets the items that list takes
// (APPEND, APPENDS), in list order, valid only during the call: an entry built for the sink is
// Value::is_streamed_entry(), read through streamed_dict(); anything else the sink must not try to
// read (a value shared with the rest of the document, which may still change).
class EntrySink {
 public:
  virtual void take(std::span<const Value> items) = 0;
  // The reader starts again without streaming: what was handed over so far is void.
  virtual void discard() = 0;

 protected:
  ~EntrySink() = default;
};

struct PickleOptions {
  // Dict key whose container values the caller never reads (snapshots: "frames", most of every
  // file). Those containers, and the containers built only to go into them, become Kind::Skipped:
  // no arena storage, no item copies. Empty: build everything.
  std::string_view skip_key;
  // False: every opcode goes through the checked dispatch switch, none through the fast paths of
  // pickle_fast_paths.cpp. The document is the same either way (the fuzzers check it: tests/fuzz).
  bool fast_paths = true;
  // Streams the entries of a snapshot's first device trace list (EntrySink). Only with skip_key
  // and fast_paths (can_stream()); null: keep every entry in the document.
  EntrySink* entry_sink = nullptr;
  // Whether these options let entries be streamed: the entry arena and its sink work with the
  // skipped frames and the fast paths' flat dicts.
  bool can_stream() const { return !skip_key.empty() && fast_paths; }
};

// One parsed pickle. Not copyable: its values point into its arena.
class PickleDocument {
 public:
  // Parses `bytes` up to its STOP opcode (trailing bytes are ignored, as pickle.loads does).
  // `origin` (a file name) starts every error message. Throws InputError on bad input.
  PickleDocument(std::string_view bytes, std::string_view origin, const PickleOptions& options = {});
  PickleDocument(const PickleDocument&) = delete;
  PickleDocument& operator=(const PickleDocument&) = delete;

  const Value& root() const { return root_; }
  int protocol() const { return protocol_; }  // from PROTO; 0 when the pickle has none
  // False when skip_key was given but a skipped container turned out to be reachable some other
  // way, so everything was built after all (see the invariants above).
  bool skipped() const { return skipped_; }
  // The list under the root's 'device_traces' key that holds the streamed list (its only
  // reference, see EntrySink), or nullptr when nothing was streamed.
  const ListObject* streamed_lists() const { return streamed_lists_; }

 private:
  Arena arena_;
  Value root_;
  int protocol_ = 0;
  bool skipped_ = false;
  const ListObject* streamed_lists_ = nullptr;
};

}  // namespace fraglab::pickle
