// parse_snapshot(): a torch.cuda.memory._dump_snapshot() pickle -> the Trace of one device, with
// the allocator state at the start of the recorded trace rebuilt (allocator-model §11, §12).
//
// Invariants of the result (beyond validate_trace()'s):
//  - ids: initial allocations are 1..k in address order, then trace allocs k+1.. in trace order;
//  - `free_requested` immediately followed by `free_completed` at the same address is one Free
//    (what memory_viz does, §12.1); any other free_* stays separate;
//  - `snapshot`, `user_defined` and `annotate` entries carry no allocator action (§11.5): they
//    are skipped, and only counted in source_entries (which counts every entry of the device);
//  - initial.segments and initial.allocations are sorted by address and consistent with the
//    snapshot's `segments` after undoing the trace (an inconsistency is an InputError, never a
//    silently wrong start state);
//  - Σ initial segment sizes + segment events replayed = Σ snapshot total_size of the device
//    (the reserved-bytes timeline of §12.2).
//
// Invariants of the reading (issue 16, hostile input):
//  - every walk over the parsed pickle's containers is charged to a WalkBudget of the input's
//    size plus a fixed allowance: a container shared by memo references and walked once per
//    reference is refused in one line, never expanded without bound;
//  - reading every device of a snapshot (parse_snapshot_devices) looks at each device list and
//    segment a fixed number of times: linear in the file, not in devices x file;
//  - device indices are ints (0..INT_MAX); a larger one is refused naming it, never truncated;
//  - parse_snapshot() without frames walks the first device trace list's entries as the pickle
//    reader completes them (pickle::EntrySink), keeping none: the Trace and every message are those
//    of walking the kept list afterwards, and whatever streaming cannot show to be so (an entry it
//    refused, one that is reachable some other way) is read again without streaming.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <memory_resource>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fraglab/trace_io.hpp"
#include "trace/address_table.hpp"
#include "trace/dict_layout.hpp"
#include "trace/frame_interner.hpp"
#include "trace/live_allocations.hpp"
#include "trace/pickle.hpp"
#include "trace/pointer_map.hpp"
#include "trace/snapshot_options.hpp"
#include "trace/trace_checks.hpp"

namespace fraglab {

namespace {

using pickle::Kind;
using pickle::Value;

// Pages and segment sizes the snapshot format implies (allocator-model §1.1, §7.1).
constexpr Bytes kSmallSegment = 2 * MiB;       // every small-pool cudaMalloc segment
constexpr Bytes kDefaultLargePage = 20 * MiB;  // large_segment_size / max_non_split_rounding

enum class Action : std::uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Oom,
  Skipped,  // snapshot, user_defined, annotate
};

// One trace entry with the fields a Trace needs, decoded once.
struct Entry {
  Action action = Action::Skipped;
  bool has_time = false;
  Addr addr = 0;  // oom: device_free
  Bytes size = 0;
  StreamId stream = 0;
  std::int64_t time_us = 0;
  const Value* frames = nullptr;  // the entry's stack, when frames are kept and it has one
};

struct SnapshotSegment {
  Addr addr = 0;
  Bytes size = 0;
  StreamId stream = 0;
  bool small_pool = false;
  bool expandable = false;
  const Value* blocks = nullptr;
  std::size_t index = 0;  // position in the snapshot's `segments`, for messages
};

// A mapped range while undoing segment events (key: its address).
struct Range {
  Bytes size = 0;
  StreamId stream = 0;
  bool small_pool = false;
  bool expandable = false;
};

// Key comparison with a literal: a constant-length memcmp the compiler turns into a load and a
// compare (a string_view == called memcmp for every key of every entry).
template <std::size_t N>
bool is(std::string_view name, const char (&literal)[N]) {
  return name.size() == N - 1 && std::memcmp(name.data(), literal, N - 1) == 0;
}

// The keys parse_snapshot reads (allocator-model §11.3-§11.5), by where they sit: everything else in
// a trace entry, segment or block is ignored. The enums index the DictLayouts' names.
enum EntryField : std::size_t { kAction, kAddr, kSize, kStream, kTimeUs, kDeviceFree, kFrames };
constexpr std::array<std::string_view, 7> kEntryKeys{"action",  "addr",        "size",  "stream",
                                                     "time_us", "device_free", "frames"};
enum SegmentField : std::size_t {
  kSegDevice,
  kSegAddress,
  kSegTotalSize,
  kSegStream,
  kSegType,
  kSegExpandable,
  kSegBlocks
};
constexpr std::array<std::string_view, 7> kSegmentKeys{"device",       "address",       "total_size", "stream",
                                                       "segment_type", "is_expandable", "blocks"};
enum BlockField : std::size_t { kBlockState, kBlockAddress, kBlockSize, kBlockRequested, kBlockHistory, kBlockFrames };
constexpr std::array<std::string_view, 6> kBlockKeys{"state", "address", "size", "requested_size", "history", "frames"};

// Where a value sits in the snapshot, for error messages; formatted only when one is thrown.
struct Loc {
  enum Kind : std::uint8_t { Snapshot, Settings, Segment, Block, BlockHistory, Entry, EntryFrames, BlockFrames };
  Kind kind = Snapshot;
  std::size_t i = 0;  // segment index, or device for entries
  std::size_t j = 0;  // block index, or entry index
  std::string str() const {
    switch (kind) {
      case Snapshot:
        return "snapshot";
      case Settings:
        return "allocator_settings";
      case Segment:
        return fmt::format("segments[{}]", i);
      case Block:
        return fmt::format("segments[{}] block {}", i, j);
      case BlockHistory:
        return fmt::format("segments[{}] block {} history", i, j);
      case Entry:
        return fmt::format("device_traces[{}] entry {}", i, j);
      case EntryFrames:
        return fmt::format("device_traces[{}] entry {} frames", i, j);
      case BlockFrames:
        return fmt::format("segments[{}] block {} frames", i, j);
    }
    return "?";
  }
};

// Sizes of 2^60 and more are corrupt (no device has an exabyte), and a range must not wrap
// around the address space: the segment arithmetic below relies on both.
bool plausible_range(Addr addr, Bytes size) { return size < (Bytes{1} << 60) && addr + size >= addr; }

// Ids of initial allocations are known only once all are found; until then an event refers to
// one by this tag plus its discovery index.
constexpr std::uint64_t kInitialRef = std::uint64_t{1} << 63;

// Devices are CUDA device indices (an int in PyTorch and in TraceReadOptions): larger ones are
// refused, never truncated.
constexpr std::uint64_t kMaxDevice = std::numeric_limits<int>::max();

// The pickle document aliases shared containers as Python does (pickle.hpp), so a 12 KB pickle
// can hold 3,000 segments that all name one 3,000-block list by memo GET: cheap to parse, but
// 9,000,000 blocks to whoever walks each segment's blocks. Every walk over a container's items
// (trace entries, blocks, device lists, segments, the keys of a dict whose layout is learned or
// searched) is charged here, and the walk stops once the charges exceed the input's size in
// bytes plus a fixed allowance.
//
// Why no snapshot that shares no containers is refused: every item of a container was pushed by
// an opcode of its own of at least one byte (NONE, NEWTRUE, EMPTY_LIST, DUP, ... take one; BININT1,
// BINGET, any str take two or more), and a dict's pair takes two such pushes. This reader walks
// each container a fixed number of times and charges per walk at most one unit per item: a list
// item 1 (its push took >= 1 byte), a dict key 1 each time the dict's keys are looked at, which is
// at most twice (finding the devices, then reading them) for a pair that took >= 2 bytes. The
// top-level dict and allocator_settings are looked at a few times per document, within the
// allowance. So charges stay within the input's size unless one container is walked again through
// memo references: exactly the amplification this refuses.
class WalkBudget {
 public:
  static constexpr std::uint64_t kAllowance = std::uint64_t{1} << 20;

  WalkBudget(std::size_t input_bytes, std::string_view origin) : limit_(input_bytes + kAllowance), origin_(origin) {}

  void charge(std::uint64_t items) {
    used_ += items;
    if (used_ > limit_) [[unlikely]]
      exceeded();
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void exceeded() const {
    throw InputError(
        fmt::format("{}: pickle expands to more than {} items through shared references (memo GETs of the same "
                    "list or dict, walked once per reference); expected a snapshot from "
                    "torch.cuda.memory._dump_snapshot()",
                    origin_, limit_));
  }

  std::uint64_t limit_;
  std::uint64_t used_ = 0;
  std::string_view origin_;
};

// A snapshot's streamed trace list (pickle::EntrySink), whose entries the reader walked as the
// pickle reader completed them (SnapshotReader::stream_entries()): what read() takes instead of
// walking the list's dicts, which are not kept. An entry the walk refused (the message, and its
// place among the other messages, are found by reading the snapshot again without streaming), or
// an item that is not an entry built for the sink, sets `failed`.
struct StreamedEntries {
  std::size_t count = 0;  // items the streamed list took
  bool failed = false;
};

// Thrown by SnapshotReader::read() when it needs the entries of a streamed list that could not be
// decoded as they came (StreamedEntries::failed): parse_snapshot() reads the snapshot again
// without streaming, which gives the Trace or the error it would have given without it.
struct ReadAgainWithoutStreaming {};

// Reads the devices of one parsed snapshot. What all devices share (the top-level lists, which
// device each segment belongs to, the allocator settings, the walk budget) is found once, on the
// first read: reading every device of a snapshot is linear in its size, not in devices x size.
class SnapshotReader {
 public:
  SnapshotReader(std::string_view origin, std::size_t input_bytes, std::uint32_t keep_frames = 0)
      : keep_frames_(keep_frames), input_bytes_(input_bytes), origin_(origin), budget_(input_bytes, origin) {}

  // The Trace of one device (-1: the only device with data; see TraceReadOptions).
  Trace read(const Value& root, int device_index);
  // A streamed list's entries, as the pickle reader hands them over before read() (EntryStream):
  // items `first`.. walked as emit_events() would walk them, and the end of the list. Each throws
  // InputError where emit_events() would have thrown one, but charges the walk budget only when
  // read() takes the walk (take_streamed_walk()). Returns false at an item that is not an entry
  // built for the sink (pickle::EntrySink).
  [[gnu::flatten]] bool stream_entries(std::span<const Value> items, std::size_t first) {
    streaming_ = true;
    // A trace entry takes 32 bytes of pickle or more (EMPTY_DICT MEMOIZE MARK SETITEMS and 6 or
    // more key/value pairs of 2+ bytes each): room for all, only address space until written.
    if (first == 0) stream_trace_.events.reserve(input_bytes_ / 32);
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (!items[k].is_streamed_entry()) return false;
      walk_entry(stream_walk_, decode_entry(items[k].streamed_dict(), first + k), first + k, stream_trace_);
    }
    return true;
  }
  void finish_stream() { finish_walk(stream_walk_, stream_trace_); }
  // Forgets the walk of a streamed list (the pickle reader started again without streaming).
  void discard_stream();
  // The document's streamed list (Value::streamed_list()) is `stream`, walked by stream_entries().
  void use_stream(const StreamedEntries* stream) { stream_ = stream; }
  // Whether the last read() proved that its events keep validate_trace()'s event rules (sizes,
  // lifetimes): it tracks each address's allocation anyway, so a second walk over the events
  // with a table of ids only repeats the work. False when any event might break a rule.
  bool events_proven() const { return events_proven_; }
  // Devices with trace entries or segments, in increasing order (checks the top-level layout).
  const std::set<std::uint64_t>& devices_with_data(const Value& root) {
    index(root);
    return with_data_;
  }

 private:
  // ---- errors: one line, naming the file and where -----------------------------------------
  [[noreturn, gnu::cold, gnu::noinline]] void fail(const Loc& where, std::string_view what) const {
    throw InputError(fmt::format("{}: {}: {}", origin_, where.str(), what));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_entry(std::size_t i, std::string_view what) const {
    fail(Loc{Loc::Entry, device_, i}, what);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_missing_entry_key(std::size_t i, std::string_view action,
                                                                     std::size_t key) const {
    fail_entry(i, fmt::format("({}) missing key '{}'", action, kEntryKeys[key]));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_type(const Loc& where, std::string_view key,
                                                        std::string_view expected, const Value& got) const {
    check_not_streamed(got);
    fail(where, fmt::format("key '{}': expected {}, got {}", key, expected, pickle::kind_name(got.kind)));
  }

  // A value about to be named in a message is never one of a stream's (which only the streamed list
  // and skip_key values hold); if one were, the snapshot is read again without streaming.
  void check_not_streamed(const Value& v) const {
    if (stream_ && v.kind == Kind::Skipped) throw ReadAgainWithoutStreaming{};
  }
  // Items of a device trace list (the streamed list's are counted by the stream).
  std::size_t list_size(const Value& list) const {
    return stream_ && list.streamed_list() ? stream_->count : list.items().size();
  }
  bool is_trace_list(const Value& list) const { return list.is_sequence() || (stream_ && list.streamed_list()); }

  // ---- typed field access ------------------------------------------------------------------
  // Value::find walks the dict's keys: charged.
  const Value* find(const Value& dict, std::string_view key) {
    budget_.charge(dict.dict_size());
    return dict.find(key);
  }
  const Value& field(const Value& dict, std::string_view key, const Loc& where) {
    const Value* v = find(dict, key);
    if (!v) fail(where, fmt::format("missing key '{}'", key));
    return *v;
  }
  // The same for a key of the dict last passed to layout.look_at().
  template <std::size_t N>
  const Value& field(const DictLayout<N>& layout, const Value& dict, std::size_t key, const Loc& where) const {
    const Value* v = layout.get(dict, key);
    if (!v) fail(where, fmt::format("missing key '{}'", layout.name(key)));
    return *v;
  }
  // Inline (several per trace entry); the messages are out of line.
  [[gnu::always_inline]] std::uint64_t as_u64(const Value& v, std::string_view key, const Loc& where) const {
    if (v.kind == Kind::Int && v.integer >= 0) return static_cast<std::uint64_t>(v.integer);
    if (v.kind == Kind::UInt) return v.unsigned_integer;
    fail_type(where, key, "a non-negative int", v);
  }
  [[gnu::always_inline]] std::int64_t as_i64(const Value& v, std::string_view key, const Loc& where) const {
    if (v.kind == Kind::Int) return v.integer;
    fail_type(where, key, "an int within 64 bits", v);
  }
  // The same for a trace entry's fields, by the entry's index: its Loc is made only when one is
  // thrown (built up front, it was ~5 instructions an entry).
  [[noreturn, gnu::cold, gnu::noinline]] void fail_entry_type(std::size_t i, std::string_view key,
                                                              std::string_view expected, const Value& got) const {
    fail_type(Loc{Loc::Entry, device_, i}, key, expected, got);
  }
  [[gnu::always_inline]] std::uint64_t entry_u64(const Value& v, std::string_view key, std::size_t i) const {
    if (v.kind == Kind::Int && v.integer >= 0) return static_cast<std::uint64_t>(v.integer);
    if (v.kind == Kind::UInt) return v.unsigned_integer;
    fail_entry_type(i, key, "a non-negative int", v);
  }
  [[gnu::always_inline]] std::int64_t entry_i64(const Value& v, std::string_view key, std::size_t i) const {
    if (v.kind == Kind::Int) return v.integer;
    fail_entry_type(i, key, "an int within 64 bits", v);
  }
  std::uint64_t u64_field(const Value& d, std::string_view key, const Loc& where) {
    return as_u64(field(d, key, where), key, where);
  }
  template <std::size_t N>
  std::uint64_t u64_field(const DictLayout<N>& layout, const Value& dict, std::size_t key, const Loc& where) const {
    return as_u64(field(layout, dict, key, where), layout.name(key), where);
  }

  // Learns a dict's layout, charging the keys it had to look at.
  template <std::size_t N>
  void look_at(DictLayout<N>& layout, const Value& dict) {
    if (const std::uint32_t looked = layout.look_at(dict)) budget_.charge(looked);
  }

  // ---- steps -------------------------------------------------------------------------------
  void check_root(const Value& root) const;
  const Value& segments_of(const Value& root);
  const Value* device_traces_of(const Value& root);
  void index(const Value& root);
  void reset_device();
  void choose_device(int device_index);

  void collect_segments();
  [[gnu::always_inline]] inline Entry decode_entry(const Value& e, std::size_t i);
  void emit_events(std::span<const Value> entries, Trace& trace);
  // emit_events()'s walk, fed one entry at a time: the free_requested event just made, which the
  // entry after it may join (walk_entry()), and whether the events keep validate_trace()'s rules
  // (events_proven()). Scalars only: keeping the free_requested's whole Entry until the next one
  // came copied it with 16-byte loads right after decode_entry() had stored it field by field, a
  // failed store-to-load forward on every free_requested (the hottest instruction of
  // stream_entries() in a cpu-clock profile).
  struct EntryWalk {
    bool requested = false;  // the last entry was a free_requested: its event is the last one
    Addr requested_addr = 0;
    detail::AddressTable::Slot* requested_slot = nullptr;  // its address's (no get() since)
    std::size_t requested_index = 0;                       // its entry index
    const Value* requested_frames = nullptr;               // its stack, read once joined or not
    bool proven = true;
  };
  [[gnu::always_inline]] inline void walk_entry(EntryWalk& walk, const Entry& e, std::size_t i, Trace& trace);
  void finish_walk(EntryWalk& walk, Trace& trace);
  [[gnu::always_inline]] inline void emit_event(const Entry& e, std::size_t i, Trace& trace, EntryWalk& walk);
  void add_block_allocations();
  void rebuild_segments(Trace& trace) const;
  bool rebuild_whole_segments(Trace& trace) const;
  void number_allocations(Trace& trace);
  void read_allocator_settings(const Value& root);
  void check_allocations_in_segments(const Trace& trace) const;
  std::uint32_t read_stack(const Value& frames, const Loc& where);

  std::uint32_t keep_frames_ = 0;                  // TraceReadOptions::frames
  std::size_t input_bytes_;                        // the pickle's size (what a streamed walk reserves for)
  std::optional<detail::FrameInterner> interner_;  // while a device is read with frames kept
  std::vector<std::uint32_t> stack_frames_;        // scratch for read_stack()
  std::vector<std::uint32_t> initial_stacks_;      // by discovery order, like initial_
  // Containers of the document already read by read_stack(): frame dicts -> frame index, frame
  // lists -> stack index. Per device (the interner's tables are per Trace).
  detail::PointerMap frame_cache_;
  detail::PointerMap stack_cache_;

  std::string_view origin_;
  WalkBudget budget_;  // shared by every device read from the document
  // The walk of a streamed list's entries, in the per-device fields (addresses_, initial_, ...)
  // and these, until read() knows whether it is the device's (take_streamed_walk()).
  const StreamedEntries* stream_ = nullptr;  // the streamed list (use_stream)
  bool streaming_ = false;                   // walking one: charges go to stream_layout_charges_
  EntryWalk stream_walk_;
  Trace stream_trace_;                       // its events
  std::uint64_t stream_layout_charges_ = 0;  // what learning its entries' key layouts would charge
  void take_streamed_walk(Trace& trace);
  void reset_walk();

  // Found once per document by index().
  bool indexed_ = false;
  std::span<const Value> device_lists_;                                   // device_traces (empty: none)
  std::span<const Value> segment_list_;                                   // segments
  std::set<std::uint64_t> with_data_;                                     // devices with entries or segments
  std::map<std::uint64_t, std::vector<std::size_t>> segments_by_device_;  // indices into segment_list_
  bool allocator_conf_known_ = false;
  std::string allocator_conf_;
  Bytes large_page_ = kDefaultLargePage;

  // Per device read (reset_device()).
  std::size_t device_ = 0;
  const Value* device_entries_ = nullptr;  // the device's trace list (may be null: no trace)

  std::vector<SnapshotSegment> segments_;
  // Segment events with their entry index, in trace order: all rebuild_segments() needs.
  std::vector<std::pair<std::size_t, Entry>> segment_entries_;
  // Where entries, segments and blocks keep the keys read (each kind lists its keys alike).
  DictLayout<kEntryKeys.size()> entry_layout_{kEntryKeys};
  DictLayout<kSegmentKeys.size()> segment_layout_{kSegmentKeys};
  DictLayout<kBlockKeys.size()> block_layout_{kBlockKeys};

  detail::AddressTable addresses_;          // allocation lifetimes while walking the trace forward
  std::vector<InitialAllocation> initial_;  // discovery order; ids assigned later
  std::uint64_t trace_allocs_ = 0;
  bool events_proven_ = true;
  // Actions by the text of their name (a view into the input): writers memoize the action strings,
  // so an entry's action is nearly always the very text an earlier entry had (the same view, so
  // the same bytes), found by two compares instead of a decode of the name.
  struct ActionMemo {
    const char* text = nullptr;
    std::uint32_t length = 0;
    Action action = Action::Skipped;
  };
  std::array<ActionMemo, 16> action_memo_{};
  [[gnu::always_inline]] inline Action action_of(const Value& name, bool& known);
  [[gnu::always_inline]] inline const Value& need_entry_field(const Value& e, EntryField key, std::size_t i,
                                                              const Value& action) const;
};

std::string file_stem(std::string_view origin) {
  if (origin == kStdinOrigin) return "stdin";  // read_trace("-") (trace_io.hpp)
  std::size_t slash = origin.find_last_of("/\\");
  std::string_view base = slash == std::string_view::npos ? origin : origin.substr(slash + 1);
  // read_trace() hands decompressed .gz files over under their own name: drop that layer too.
  if (base.size() > 3 && base.substr(base.size() - 3) == ".gz") base.remove_suffix(3);
  std::size_t dot = base.find_last_of('.');
  if (dot != std::string_view::npos && dot > 0) base = base.substr(0, dot);
  return std::string(base);
}

// ---- top-level layouts (allocator-model §11.2) --------------------------------------------------------

// PyTorch 1.13's torch.cuda.memory_snapshot() returns the bare list of segments (people pickle
// that list too); _snapshot() / _dump_snapshot() give a dict with `segments` and `device_traces`.
void SnapshotReader::check_root(const Value& root) const {
  if (!root.is_dict() && !root.is_sequence())
    fail(Loc{Loc::Snapshot}, fmt::format("expected a dict with 'segments' and 'device_traces' (as "
                                         "torch.cuda.memory._snapshot() gives) or a list of segments (as 1.13's "
                                         "memory_snapshot() gives) at the top, got {}",
                                         pickle::kind_name(root.kind)));
}

const Value& SnapshotReader::segments_of(const Value& root) {
  if (root.is_sequence()) return root;
  const Loc top{Loc::Snapshot};
  const Value& segments = field(root, "segments", top);
  if (!segments.is_sequence()) fail_type(top, "segments", "a list", segments);
  return segments;
}

// The per-device trace lists; null for a bare list of segments (a state-only dump).
const Value* SnapshotReader::device_traces_of(const Value& root) {
  check_root(root);
  if (root.is_sequence()) return nullptr;
  const Loc top{Loc::Snapshot};
  const Value& traces = field(root, "device_traces", top);
  if (!traces.is_sequence()) fail_type(top, "device_traces", "a list", traces);
  return &traces;
}

// ---- device choice ---------------------------------------------------------------------------

// Snapshots hold every device; a Trace is one. A device "has data" when it has trace entries or
// segments; -1 picks the only such device (README "Traces", trace_io.hpp TraceReadOptions).
// Each device list and segment is looked at once here, and each device's read then visits only
// its own segments.
void SnapshotReader::index(const Value& root) {
  if (indexed_) return;
  if (root.is_dict()) read_allocator_settings(root);  // first, as its errors always came first
  const Loc top{Loc::Snapshot};
  const Value* traces = device_traces_of(root);
  segment_list_ = segments_of(root).items();
  device_lists_ = traces ? traces->items() : std::span<const Value>();
  budget_.charge(device_lists_.size() + segment_list_.size());
  for (std::size_t d = 0; d < device_lists_.size(); ++d) {
    const Value& list = device_lists_[d];
    if (list.is_none()) continue;
    if (!is_trace_list(list)) {
      check_not_streamed(list);
      fail(top,
           fmt::format("device_traces[{}]: expected a list of trace entries, got {}", d, pickle::kind_name(list.kind)));
    }
    if (list_size(list) == 0) continue;
    if (d > kMaxDevice)
      fail(top, fmt::format("device_traces[{}]: device index {} is beyond {} (expected a CUDA device index)", d, d,
                            kMaxDevice));
    with_data_.insert(d);
  }
  DictLayout<kSegmentKeys.size()> keys{kSegmentKeys};
  // Segments come grouped by device (all of one device in a one-GPU snapshot): the last device's
  // list is kept at hand, so a segment costs no set insert and no map lookup.
  std::uint64_t last_device = 0;
  std::vector<std::size_t>* last_device_segments = nullptr;
  for (std::size_t i = 0; i < segment_list_.size(); ++i) {
    const Loc where{Loc::Segment, i};
    if (!segment_list_[i].is_dict()) fail(where, "expected a dict");
    look_at(keys, segment_list_[i]);
    const std::uint64_t device = u64_field(keys, segment_list_[i], kSegDevice, where);
    if (device > kMaxDevice)
      fail(where, fmt::format("key 'device': device index {} is beyond {} (expected a CUDA device index)", device,
                              kMaxDevice));
    if (!last_device_segments || device != last_device) {
      with_data_.insert(device);
      last_device = device;
      last_device_segments = &segments_by_device_[device];  // std::map: stays valid
    }
    last_device_segments->push_back(i);
  }
  indexed_ = true;
}

void SnapshotReader::reset_device() {
  device_ = 0;
  device_entries_ = nullptr;
  segments_.clear();
  interner_.reset();
  frame_cache_.clear();
  stack_cache_.clear();
  if (!stream_) reset_walk();  // a streamed list's walk is kept until read() knows its device
}

// What walking a device's entries fills.
void SnapshotReader::reset_walk() {
  segment_entries_.clear();
  addresses_ = detail::AddressTable();
  initial_.clear();
  initial_stacks_.clear();
  trace_allocs_ = 0;
  events_proven_ = true;
}

void SnapshotReader::discard_stream() {
  reset_walk();
  stream_walk_ = EntryWalk{};
  stream_trace_ = Trace{};
  stream_layout_charges_ = 0;
  entry_layout_.forget();  // as fresh as when no entry was walked
  streaming_ = false;
}

void SnapshotReader::choose_device(int device_index) {
  const Loc top{Loc::Snapshot};
  auto list_devices = [&] {
    // The first 16 at most: a snapshot may name thousands of devices, and a message is one line.
    std::string s;
    std::size_t listed = 0;
    for (std::uint64_t d : with_data_) {
      if (listed++ == 16) {
        s += fmt::format(", ... ({} devices)", with_data_.size());
        break;
      }
      s += (s.empty() ? "" : ", ") + std::to_string(d);
    }
    return s.empty() ? std::string("none") : s;
  };
  if (device_index < -1)  // -1: the only device with data; no other negative index names one
    fail(top, fmt::format("device index {}: expected a CUDA device index from 0 to {} (--device-index)", device_index,
                          kMaxDevice));
  if (device_index >= 0) {
    device_ = static_cast<std::size_t>(device_index);
    if (!with_data_.count(device_))
      fail(top, fmt::format("device {} has no trace entries and no segments (expected "
                            "--device-index to name a device with data: {})",
                            device_, list_devices()));
  } else {
    if (with_data_.empty()) fail(top, "no device has trace entries or segments");
    if (with_data_.size() > 1)
      fail(top, fmt::format("it holds several devices ({}): choose one with --device-index "
                            "N",
                            list_devices()));
    device_ = static_cast<std::size_t>(*with_data_.begin());
  }
  if (device_ < device_lists_.size() && is_trace_list(device_lists_[device_]))
    device_entries_ = &device_lists_[device_];
  collect_segments();
}

// §11.3: the device's segments as the snapshot saw them at dump time.
void SnapshotReader::collect_segments() {
  DictLayout<kSegmentKeys.size()>& keys = segment_layout_;
  const auto mine = segments_by_device_.find(device_);
  if (mine == segments_by_device_.end()) return;
  for (const std::size_t i : mine->second) {
    const Value& s = segment_list_[i];
    const Loc where{Loc::Segment, i};
    look_at(keys, s);
    SnapshotSegment seg;
    seg.index = i;
    seg.addr = u64_field(keys, s, kSegAddress, where);
    seg.size = u64_field(keys, s, kSegTotalSize, where);
    if (!plausible_range(seg.addr, seg.size))
      fail(where, fmt::format("impossible segment: {} bytes at 0x{:x} (expected a size below "
                              "2^60 that ends below 2^64)",
                              seg.size, seg.addr));
    seg.stream = u64_field(keys, s, kSegStream, where);
    const Value& type = field(keys, s, kSegType, where);
    // is(): a string_view compare called memcmp twice per segment.
    if (!type.is_str() || (!is(type.str(), "small") && !is(type.str(), "large")))
      fail(where, "key 'segment_type': expected \"small\" or \"large\"");
    seg.small_pool = is(type.str(), "small");
    if (const Value* e = keys.get(s, kSegExpandable)) {  // 2.1+ only
      if (e->kind != Kind::Bool) fail_type(where, "is_expandable", "a bool", *e);
      seg.expandable = e->boolean;
    }
    const Value& blocks = field(keys, s, kSegBlocks, where);
    if (!blocks.is_sequence()) fail_type(where, "blocks", "a list", blocks);
    seg.blocks = &blocks;
    segments_.push_back(seg);
  }
}

// ---- trace entries (§11.5) -------------------------------------------------------------------

[[gnu::always_inline]] inline Action action_from_name(std::string_view a, bool& known) {
  known = true;
  switch (a.size()) {
    case 5:
      if (is(a, "alloc")) return Action::Alloc;
      break;
    case 3:
      if (is(a, "oom")) return Action::Oom;
      break;
    case 14:
      if (is(a, "free_requested")) return Action::FreeRequested;
      if (is(a, "free_completed")) return Action::FreeCompleted;
      break;
    case 13:
      if (is(a, "segment_alloc")) return Action::SegmentAlloc;
      if (is(a, "segment_unmap")) return Action::SegmentUnmap;
      break;
    case 12:
      if (is(a, "segment_free")) return Action::SegmentFree;
      if (is(a, "user_defined")) return Action::Skipped;
      break;
    case 11:
      if (is(a, "segment_map")) return Action::SegmentMap;
      break;
    case 8:
      if (is(a, "snapshot") || is(a, "annotate")) return Action::Skipped;
      break;
    default:
      break;
  }
  known = false;
  return Action::Skipped;
}

// An action by its name; the name's text is remembered (action_memo_) once it was decoded.
inline Action SnapshotReader::action_of(const Value& name, bool& known) {
  const auto slot =
      static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(name.text) * 0x9E3779B97F4A7C15ull) >> (64 - 4));
  ActionMemo& m = action_memo_[slot];
  if (m.text == name.text && m.length == name.length) [[likely]] {
    known = true;
    return m.action;
  }
  const Action action = action_from_name(name.str(), known);
  if (known) m = ActionMemo{name.text, name.length, action};
  return action;
}

// A key of the entry last passed to entry_layout_.look_at() that its action needs. Inline, with
// the message out of line (as a lambda with the fmt::format call it stayed an out-of-line call
// per field, ~20 instructions an entry in callgrind).
inline const Value& SnapshotReader::need_entry_field(const Value& e, EntryField key, std::size_t i,
                                                     const Value& action) const {
  const Value* v = entry_layout_.get(e, key);
  if (!v) [[unlikely]]
    fail_missing_entry_key(i, action.str(), key);
  return *v;
}

// The fields come from where the last entry kept them (DictLayout), not a lookup per field, and
// only those the action needs are looked at.
inline Entry SnapshotReader::decode_entry(const Value& e, std::size_t i) {
  if (!e.is_dict()) {
    check_not_streamed(e);
    fail_entry(i, fmt::format("expected a dict, got {}", pickle::kind_name(e.kind)));
  }
  if (const std::uint32_t looked = entry_layout_.look_at(e)) {
    if (streaming_)
      stream_layout_charges_ += looked;  // charged when read() takes the walk
    else
      budget_.charge(looked);
  }
  const Value* action = entry_layout_.get(e, kAction);
  if (!action) fail_entry(i, "missing key 'action'");
  if (!action->is_str()) fail_entry_type(i, "action", "a str", *action);
  bool known = false;
  const Action kind = action_of(*action, known);
  if (!known)
    fail_entry(i, fmt::format("unknown action '{}' (expected alloc, free_requested, "
                              "free_completed, segment_alloc, segment_free, segment_map, "
                              "segment_unmap, oom, snapshot, user_defined or annotate)",
                              action->str().substr(0, 40)));
  if (kind == Action::Skipped) return Entry{};
  // The fields gather in locals and the Entry is made once at the end: it lives in memory (the
  // walk takes it by reference), and defaults stored first and overwritten cost ~5 instructions an
  // entry.
  auto need = [&](EntryField key) -> const Value& { return need_entry_field(e, key, i, *action); };
  Addr addr = 0;
  StreamId stream = 0;
  Bytes size = 0;
  bool has_time = false;
  std::int64_t time_us = 0;
  constexpr std::uint32_t kUsualFields = 1u << kAddr | 1u << kStream | 1u << kSize | 1u << kTimeUs;
  if (kind != Action::Oom && entry_layout_.has_all(kUsualFields)) [[likely]] {
    // The layout has every field: read without a test for a missing key each (as below otherwise).
    addr = entry_u64(entry_layout_.present(e, kAddr), "addr", i);
    stream = entry_u64(entry_layout_.present(e, kStream), "stream", i);
    size = entry_u64(entry_layout_.present(e, kSize), "size", i);
    time_us = entry_i64(entry_layout_.present(e, kTimeUs), "time_us", i);
    has_time = true;
  } else {
    if (kind == Action::Oom) {
      addr = entry_u64(need(kDeviceFree), "device_free", i);
      if (const Value* s = entry_layout_.get(e, kStream)) stream = entry_u64(*s, "stream", i);
    } else {
      addr = entry_u64(need(kAddr), "addr", i);
      stream = entry_u64(need(kStream), "stream", i);
    }
    size = entry_u64(need(kSize), "size", i);
    if (const Value* time = entry_layout_.get(e, kTimeUs)) {  // ≈2.2+ only (allocator-model §13)
      time_us = entry_i64(*time, "time_us", i);
      has_time = true;
    }
  }
  const Value* frames = keep_frames_ > 0 ? entry_layout_.get(e, kFrames) : nullptr;
  return Entry{kind, has_time, addr, size, stream, time_us, frames};
}

// ---- events and the allocations live at the start (§12.1, §12.2) ------------------------------

// Walks the trace forward. A free of an address with no live alloc names an allocation that
// existed before the trace started ("initially allocated", §12.1): it becomes an initial
// allocation, pending at start when its first free entry is a free_completed.
//
// Entries are decoded as they are walked (one pass, no intermediate copy of the trace) and fed to
// walk_entry() one at a time, as a streamed list's entries come (stream_entries()).
void SnapshotReader::emit_events(std::span<const Value> entries, Trace& trace) {
  budget_.charge(entries.size());  // before reserving for them: a shared list may be walked again
  trace.events.reserve(entries.size());
  EntryWalk walk;
  for (std::size_t i = 0; i < entries.size(); ++i) walk_entry(walk, decode_entry(entries[i], i), i, trace);
  finish_walk(walk, trace);
}

// A free_requested followed by the free_completed of the same address is one Free (§12.1,
// memory_viz's pairing): the free_requested's event is made as it comes, and turned into the Free
// when the next entry is that free_completed. The slot's free_requested flag it set then no longer
// matters (the slot is not live). Its stack, when frames are kept, is read once the next entry is
// known, as the place it names is the free_completed's when joined. One emit_event() call, so that
// it is inlined once (twice, its address table lookups stayed calls: ~40 instructions an entry).
inline void SnapshotReader::walk_entry(EntryWalk& walk, const Entry& e, std::size_t i, Trace& trace) {
  if (walk.requested) {
    walk.requested = false;
    const bool joined = e.action == Action::FreeCompleted && e.addr == walk.requested_addr;
    if (interner_) [[unlikely]]
      trace.event_stacks.push_back(
          walk.requested_frames
              ? read_stack(*walk.requested_frames, Loc{Loc::EntryFrames, device_, joined ? i : walk.requested_index})
              : kNoString);
    if (joined) {
      trace.events.back().op = Op::Free;
      walk.requested_slot->live = false;
      return;
    }
  }
  emit_event(e, i, trace, walk);
}

void SnapshotReader::finish_walk(EntryWalk& walk, Trace& trace) {
  if (walk.requested && interner_)
    trace.event_stacks.push_back(
        walk.requested_frames ? read_stack(*walk.requested_frames, Loc{Loc::EntryFrames, device_, walk.requested_index})
                              : kNoString);
  walk.requested = false;
  events_proven_ = walk.proven;
}

// The event of entry `i` (a free_requested's as if no free_completed joins it: walk_entry()).
// `walk.proven` keeps validate_trace()'s event rules, as each event is made (events_proven()): the
// sizes, and the lifetimes, which follow each address's slot. An alloc's id is new (never live
// before); a free's id is its address's live allocation, or a new initial one (discover()); the
// slot's free_requested is that id's state in validate_trace()'s table.
inline void SnapshotReader::emit_event(const Entry& e, std::size_t i, Trace& trace, EntryWalk& walk) {
  if (e.action == Action::Skipped) return;
  bool& proven = walk.proven;
  const auto device = static_cast<std::uint32_t>(device_);
  auto discover = [&](const Entry& freed, bool pending) {
    InitialAllocation a;
    a.addr = freed.addr;
    a.requested = freed.size;
    a.stream = freed.stream;
    a.free_requested = pending;
    a.block_size = 0;  // freed during the trace: the snapshot no longer records its block
    initial_.push_back(a);
    initial_stacks_.push_back(kNoString);  // its alloc is not in the trace: no stack known
    return kInitialRef | (initial_.size() - 1);
  };
  // Made in place (reserved by emit_events()): a local copied in afterwards cost ~10 instructions an
  // event. An entry refused below throws, and the trace being made goes with it.
  Event& ev = trace.events.emplace_back();
  ev.device = device;
  ev.has_time = e.has_time;
  ev.time_us = e.time_us;
  // The address's slot, for the actions that follow lifetimes: one call site, which is inlined.
  const bool has_slot =
      e.action == Action::Alloc || e.action == Action::FreeRequested || e.action == Action::FreeCompleted;
  detail::AddressTable::Slot* const slot_of_addr = has_slot ? &addresses_.get(e.addr) : nullptr;
  switch (e.action) {
    case Action::Skipped:
      break;  // not reached: skipped above
    case Action::Alloc: {
      detail::AddressTable::Slot& slot = *slot_of_addr;
      if (slot.live)
        fail_entry(i, fmt::format("alloc at 0x{:x}, which is still allocated (expected its "
                                  "free_completed first)",
                                  e.addr));
      slot.live = true;
      slot.free_requested = false;
      slot.ref = ++trace_allocs_;
      proven &= e.size != 0 && e.size < detail::kImpossibleSize;
      ev.op = Op::Alloc;
      ev.stream = e.stream;
      ev.id = slot.ref;
      ev.size = e.size;
      ev.addr = e.addr;
      ev.has_addr = true;
      break;
    }
    case Action::FreeRequested: {
      detail::AddressTable::Slot& slot = *slot_of_addr;
      if (!slot.live) {  // allocated before the trace started
        slot.live = true;
        slot.free_requested = false;
        slot.ref = discover(e, false);
      }
      proven &= !slot.free_requested;  // a free (or free_requested) of one already requested
      ev.id = slot.ref;
      ev.op = Op::FreeRequested;  // live until its free_completed
      slot.free_requested = true;
      walk.requested = true;
      walk.requested_addr = e.addr;
      walk.requested_slot = &slot;
      walk.requested_index = i;
      walk.requested_frames = e.frames;
      return;  // its stack: walk_entry()
    }
    case Action::FreeCompleted: {
      detail::AddressTable::Slot& slot = *slot_of_addr;
      ev.op = Op::FreeCompleted;
      if (slot.live) {
        proven &= slot.free_requested;  // else its free was never requested
        ev.id = slot.ref;
        slot.live = false;
      } else {
        ev.id = discover(e, true);  // its free was requested before the trace started
      }
      break;
    }
    case Action::SegmentAlloc:
    case Action::SegmentFree:
    case Action::SegmentMap:
    case Action::SegmentUnmap:
      ev.op = e.action == Action::SegmentAlloc  ? Op::SegmentAlloc
              : e.action == Action::SegmentFree ? Op::SegmentFree
              : e.action == Action::SegmentMap  ? Op::SegmentMap
                                                : Op::SegmentUnmap;
      ev.addr = e.addr;
      ev.size = e.size;
      ev.stream = e.stream;
      ev.has_addr = true;
      segment_entries_.emplace_back(i, e);
      proven &= e.size < detail::kImpossibleSize;
      break;
    case Action::Oom:
      proven &= e.size < detail::kImpossibleSize;
      ev.op = Op::Oom;
      ev.size = e.size;
      ev.stream = e.stream;
      ev.addr = e.addr;  // device_free
      break;
  }
  if (interner_)
    trace.event_stacks.push_back(e.frames ? read_stack(*e.frames, Loc{Loc::EntryFrames, device_, i}) : kNoString);
}

// Snapshot blocks still active at dump time whose address holds no allocation made in the trace
// existed through the whole trace (§12.1 "initially allocated", §12.2). Their block size is
// recorded, and a pending-free one was pending from the start (its free_requested is not in the
// trace, or the address would have been touched).
void SnapshotReader::add_block_allocations() {
  DictLayout<kBlockKeys.size()>& keys = block_layout_;
  for (const SnapshotSegment& seg : segments_) {
    auto blocks = seg.blocks->items();
    budget_.charge(blocks.size());             // segments may share one blocks list (memo GET)
    const Addr seg_end = seg.addr + seg.size;  // plausible_range() held in collect_segments
    Addr next = seg.addr;                      // where the next block starts: blocks are listed in address order
    bool derived = false;                      // some block had no 'address' and was placed at `next`
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const Value& block = blocks[b];
      const Loc where{Loc::Block, seg.index, b};
      if (!block.is_dict()) fail(where, "expected a dict");
      look_at(keys, block);
      // 2.0-era blocks have no 'address' (§11.4 "running sum from segment address"): each block
      // starts where the one before it ends, so the blocks must tile the segment exactly.
      const Bytes size = u64_field(keys, block, kBlockSize, where);
      Addr addr = next;
      if (const Value* a = keys.get(block, kBlockAddress)) {
        addr = as_u64(*a, "address", where);
      } else {
        derived = true;
        if (size == 0 || addr > seg_end || size > seg_end - addr)
          fail(where, fmt::format("no 'address', and its {} bytes from 0x{:x} (where the blocks "
                                  "before it end) do not fit in its segment, which ends at "
                                  "0x{:x} (expected blocks in address order that tile the "
                                  "segment)",
                                  size, addr, seg_end));
      }
      next = plausible_range(addr, size) ? addr + size : ~Addr{0};
      const Value& state = field(keys, block, kBlockState, where);
      if (!state.is_str()) fail_type(where, "state", "a str", state);
      bool pending;
      if (state.str() == "inactive") continue;
      if (state.str() == "active_allocated") pending = false;
      // The memory_viz docstring spells it active_awaiting_free (allocator-model §11.4 trap).
      else if (state.str() == "active_pending_free" || state.str() == "active_awaiting_free")
        pending = true;
      else
        fail(where, fmt::format("unknown block state '{}' (expected active_allocated, "
                                "active_pending_free or inactive)",
                                state.str().substr(0, 40)));
      const detail::AddressTable::Slot* seen = addresses_.find(addr);
      if (seen && seen->live) continue;  // allocated (or freed-pending) in the trace
      if (seen)
        fail(where, fmt::format("block at 0x{:x} is {} but the trace freed that address and never "
                                "allocated it again (snapshot and trace disagree)",
                                addr, state.str()));
      InitialAllocation a;
      a.addr = addr;
      a.block_size = size;
      a.stream = seg.stream;
      a.free_requested = pending;
      std::uint32_t stack = kNoString;
      if (const Value* r = keys.get(block, kBlockRequested)) {
        a.requested = as_u64(*r, "requested_size", where);
        if (const Value* f = keys.get(block, kBlockFrames); f && interner_)
          stack = read_stack(*f, Loc{Loc::BlockFrames, seg.index, b});
      } else if (const Value* h = keys.get(block, kBlockHistory)) {
        // 1.13/2.0 layout (§11.4): the newest history record describes the live allocation.
        if (!h->is_sequence()) fail_type(where, "history", "a list", *h);
        auto records = h->items();
        if (records.empty()) fail(where, "key 'history': empty (expected at least one record)");
        const Value& last = records.back();
        if (!last.is_dict()) fail(where, "key 'history': expected a list of dicts");
        a.requested = u64_field(last, "real_size", Loc{Loc::BlockHistory, seg.index, b});
        if (interner_) {
          if (const Value* f = find(last, "frames")) stack = read_stack(*f, Loc{Loc::BlockHistory, seg.index, b});
        }
      } else {
        fail(where, "missing key 'requested_size' (or legacy 'history')");
      }
      initial_.push_back(a);
      initial_stacks_.push_back(stack);
    }
    if (derived && next != seg_end)
      fail(Loc{Loc::Segment, seg.index},
           fmt::format("its blocks have no 'address' and do not tile it: they cover {} of its "
                       "total_size {} bytes (expected blocks in address order whose sizes add "
                       "up to total_size)",
                       next - seg.addr, seg.size));
  }
}

// rebuild_segments() for the usual history of cudaMalloc segments: segment_alloc and segment_free
// events only. Undoing them one by one in a search tree cost ~470 instructions per event (insert,
// erase and neighbour searches; lm2.7b-ctx512 has 1,235 on 868 segments). Here every range that
// ever exists is a record of the undo steps it lives through: a segment_alloc's range is found by
// its start address in an AddressTable, and the overlap checks of the segment_free undos are made at
// the end, all at once, by a sweep over the records in address order: two records that overlap in
// both address and lifetime, one of them a segment_free's, are an undo the tree would refuse.
// Returns false, having changed nothing, on anything the tree would refuse or checks otherwise (a
// map or unmap, an implausible or empty range, two segments at one address, snapshot segments out
// of address order, many overlapping records): rebuild_segments() then undoes the events with its
// tree, with its errors. Otherwise the result is the tree's.
bool SnapshotReader::rebuild_whole_segments(Trace& trace) const {
  struct Record {
    Addr addr;
    Range range;
    std::size_t born;  // the undo step that made it (0: the snapshot's)
    std::size_t died;  // the undo step that removed it (kAlive: it exists at trace start)
  };
  constexpr std::size_t kAlive = std::numeric_limits<std::size_t>::max();
  std::size_t frees = 0;
  for (const auto& [i, e] : segment_entries_) {
    if (e.action == Action::SegmentFree)
      ++frees;
    else if (e.action != Action::SegmentAlloc)
      return false;
    if (e.size == 0 || !plausible_range(e.addr, e.size)) return false;
  }
  const std::size_t most = segments_.size() + frees;
  if (most >= std::numeric_limits<std::uint32_t>::max() / 4) return false;
  std::vector<Record> records;
  records.reserve(most);
  // Start address -> 1 + the index of the last record that started there (the slot's ref; 0:
  // none); a record there that died leaves it set.
  detail::AddressTable starts(most);
  for (const SnapshotSegment& seg : segments_) {
    if (seg.size == 0 || (!records.empty() && seg.addr <= records.back().addr)) return false;
    std::uint64_t& slot = starts.get(seg.addr).ref;
    records.push_back(Record{seg.addr, Range{seg.size, seg.stream, seg.small_pool, seg.expandable}, 0, kAlive});
    slot = records.size();
  }
  const std::size_t snapshot_records = records.size();
  std::size_t step = 0;
  // Backwards by iterator: clang-tidy 14's std::views::reverse fix does not parse with libstdc++ 12.
  for (auto it = segment_entries_.rbegin(); it != segment_entries_.rend(); ++it) {  // NOLINT(modernize-loop-convert)
    const Entry& e = it->second;
    ++step;
    std::uint64_t& slot = starts.get(e.addr).ref;
    const bool live = slot != 0 && records[slot - 1].died == kAlive;
    if (e.action == Action::SegmentAlloc) {  // undo: the segment did not exist yet
      if (!live || records[slot - 1].range.size != e.size) return false;
      records[slot - 1].died = step;
    } else {  // segment_free; undo: it existed, one fully free block (§12.2)
      if (live) return false;
      records.push_back(Record{e.addr, Range{e.size, e.stream, e.size == kSmallSegment, false}, step, kAlive});
      slot = records.size();
    }
  }
  // Every record in address order: the snapshot's are (checked above), the undone frees' sorted.
  std::vector<std::uint32_t> freed(records.size() - snapshot_records);
  for (std::size_t k = 0; k < freed.size(); ++k) freed[k] = static_cast<std::uint32_t>(snapshot_records + k);
  std::sort(freed.begin(), freed.end(),
            [&](std::uint32_t a, std::uint32_t b) { return records[a].addr < records[b].addr; });
  std::vector<std::uint32_t> order(records.size());
  std::size_t a = 0, b = 0;
  for (std::uint32_t& o : order) {
    if (b == freed.size() || (a < snapshot_records && records[a].addr <= records[freed[b]].addr))
      o = static_cast<std::uint32_t>(a++);
    else
      o = freed[b++];
  }
  // The sweep: each record against those starting inside it. Bounded, as records at one address
  // with lifetimes one after another (allowed) would make it quadratic.
  std::size_t budget = 8 * records.size();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Record& r = records[order[k]];
    const Addr end = r.addr + r.range.size;
    for (std::size_t m = k + 1; m < order.size() && records[order[m]].addr < end; ++m) {
      if (budget-- == 0) return false;
      const Record& q = records[order[m]];
      if ((r.born != 0 || q.born != 0) && r.born < q.died && q.born < r.died) return false;
    }
  }
  std::size_t alive = 0;
  for (const Record& r : records) alive += r.died == kAlive;
  trace.initial.segments.reserve(alive);
  for (std::uint32_t k : order) {
    const Record& r = records[k];
    if (r.died == kAlive)
      trace.initial.segments.push_back(
          InitialSegment{r.addr, r.range.size, r.range.stream, r.range.small_pool, r.range.expandable});
  }
  return true;
}

// Segments at trace start: the snapshot's, with the trace's segment events undone from the
// newest back (§12.1 "Allocator State History", §12.2). cudaMalloc segments (segment_alloc/free)
// come and go whole; expandable segments are reported as maximal mapped runs (§7.6), so undoing
// a map cuts a run and undoing an unmap re-joins neighbouring runs of the same stream.
void SnapshotReader::rebuild_segments(Trace& trace) const {
  if (rebuild_whole_segments(trace)) return;
  // Nodes from one pool, freed at once: a malloc and a free per node were 45 % of this function's
  // instructions. Erased nodes are not reused: at most two more nodes per segment event.
  std::pmr::monotonic_buffer_resource pool((segments_.size() + 2 * segment_entries_.size() + 4) * 64);
  std::pmr::map<Addr, Range> ranges(&pool);
  for (const SnapshotSegment& s : segments_) {
    const Range range{s.size, s.stream, s.small_pool, s.expandable};
    // PyTorch lists segments in address order: each goes after the last, with no search.
    if (ranges.empty() || s.addr > ranges.rbegin()->first) {
      ranges.emplace_hint(ranges.end(), s.addr, range);
    } else if (!ranges.try_emplace(s.addr, range).second) {
      fail(Loc{Loc::Segment, s.index}, fmt::format("two segments of device {} start at 0x{:x}", device_, s.addr));
    }
  }
  // The range containing [addr, addr + size), or end().
  auto containing = [&](Addr addr, Bytes size) {
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return ranges.end();
    --it;
    if (addr + size > it->first + it->second.size) return ranges.end();
    return it;
  };
  auto overlaps = [&](Addr addr, Bytes size) {
    auto next = ranges.lower_bound(addr);
    if (next != ranges.end() && next->first < addr + size) return true;
    if (next == ranges.begin()) return false;
    auto prev = std::prev(next);
    return prev->first + prev->second.size > addr;
  };

  // Backwards by iterator: clang-tidy 14's std::views::reverse fix does not parse with libstdc++ 12.
  for (auto it = segment_entries_.rbegin(); it != segment_entries_.rend(); ++it) {  // NOLINT(modernize-loop-convert)
    const std::size_t i = it->first;
    const Entry& e = it->second;
    if (!plausible_range(e.addr, e.size))
      fail_entry(i, fmt::format("impossible segment range: {} bytes at 0x{:x} (expected a size "
                                "below 2^60 that ends below 2^64)",
                                e.size, e.addr));
    switch (e.action) {
      case Action::SegmentAlloc: {  // undo = the segment did not exist yet
        auto it = ranges.find(e.addr);
        if (it == ranges.end() || it->second.size != e.size)
          fail_entry(i, fmt::format("segment_alloc of {} bytes at 0x{:x} cannot be undone: no "
                                    "such segment exists after it (snapshot and trace disagree)",
                                    e.size, e.addr));
        ranges.erase(it);
        break;
      }
      case Action::SegmentFree: {  // undo = it existed, one fully free block (§12.2)
        if (overlaps(e.addr, e.size))
          fail_entry(i, fmt::format("segment_free of {} bytes at 0x{:x} cannot be undone: it "
                                    "overlaps a segment that exists after it",
                                    e.size, e.addr));
        ranges.emplace(e.addr, Range{e.size, e.stream, e.size == kSmallSegment, false});
        break;
      }
      case Action::SegmentMap: {  // undo = those pages were not mapped: cut them out of the run
        auto it = containing(e.addr, e.size);
        if (it == ranges.end())
          fail_entry(i, fmt::format("segment_map of {} bytes at 0x{:x} cannot be undone: no "
                                    "mapped range holds it (snapshot and trace disagree)",
                                    e.size, e.addr));
        Range run = it->second;
        Addr start = it->first;
        Addr end = start + run.size;
        ranges.erase(it);
        if (e.addr > start) ranges.emplace(start, Range{e.addr - start, run.stream, run.small_pool, run.expandable});
        if (e.addr + e.size < end)
          ranges.emplace(e.addr + e.size, Range{end - (e.addr + e.size), run.stream, run.small_pool, run.expandable});
        break;
      }
      case Action::SegmentUnmap: {  // undo = those pages were mapped: re-join the runs
        if (overlaps(e.addr, e.size))
          fail_entry(i, fmt::format("segment_unmap of {} bytes at 0x{:x} cannot be undone: it "
                                    "overlaps a range mapped after it",
                                    e.size, e.addr));
        Addr start = e.addr;
        Range run{e.size, e.stream, false, true};
        // The pool of a run is its neighbours' when it touches one; alone, only the page size
        // tells: large-pool pages are large_page_ bytes, small-pool pages 2 MiB (§7.1).
        bool pool_known = false;
        auto next = ranges.lower_bound(e.addr);
        if (next != ranges.begin()) {
          auto prev = std::prev(next);
          if (prev->second.expandable && prev->second.stream == e.stream && prev->first + prev->second.size == e.addr) {
            start = prev->first;
            run.size += prev->second.size;
            run.small_pool = prev->second.small_pool;
            pool_known = true;
            ranges.erase(prev);
          }
        }
        if (next != ranges.end() && next->second.expandable && next->second.stream == e.stream &&
            next->first == e.addr + e.size) {
          run.size += next->second.size;
          if (!pool_known) run.small_pool = next->second.small_pool;
          pool_known = true;
          ranges.erase(next);
        }
        if (!pool_known) run.small_pool = e.size % large_page_ != 0;
        ranges.emplace(start, run);
        break;
      }
      default:
        break;
    }
  }
  trace.initial.segments.reserve(ranges.size());
  for (const auto& [addr, r] : ranges)
    trace.initial.segments.push_back(InitialSegment{addr, r.size, r.stream, r.small_pool, r.expandable});
}

// Initial allocations get ids 1..k in address order, trace allocations k+1.. in trace order.
void SnapshotReader::number_allocations(Trace& trace) {
  std::vector<std::size_t> order(initial_.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return initial_[a].addr < initial_[b].addr; });
  std::vector<AllocId> id_of(initial_.size());
  trace.initial.allocations.reserve(initial_.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    InitialAllocation a = initial_[order[r]];
    if (order[r] < initial_stacks_.size()) a.stack = initial_stacks_[order[r]];
    if (r > 0 && trace.initial.allocations.back().addr == a.addr)
      fail(Loc{Loc::Snapshot}, fmt::format("two allocations live at trace start share address 0x{:x} "
                                           "(snapshot and trace disagree)",
                                           a.addr));
    a.id = r + 1;
    id_of[order[r]] = a.id;
    trace.initial.allocations.push_back(a);
  }
  const std::uint64_t k = initial_.size();
  for (Event& ev : trace.events) {
    if (ev.op != Op::Alloc && ev.op != Op::Free && ev.op != Op::FreeRequested && ev.op != Op::FreeCompleted) continue;
    ev.id = (ev.id & kInitialRef) ? id_of[ev.id & ~kInitialRef] : ev.id + k;
  }
}

// Every allocation live at the start must lie in a segment that exists at the start; otherwise
// the trace and the snapshot describe different histories and no replay could start from them.
void SnapshotReader::check_allocations_in_segments(const Trace& trace) const {
  const auto& segs = trace.initial.segments;
  std::size_t s = 0;
  for (const InitialAllocation& a : trace.initial.allocations) {  // both sorted by address
    while (s < segs.size() && segs[s].addr + segs[s].size <= a.addr) ++s;
    if (s == segs.size() || segs[s].addr > a.addr)
      fail(Loc{Loc::Snapshot}, fmt::format("allocation {} at 0x{:x}, live at trace start, lies in no segment that "
                                           "exists at trace start (snapshot and trace disagree)",
                                           a.id, a.addr));
  }
}

// ---- allocator_settings (≈2.3+) -> PYTORCH_CUDA_ALLOC_CONF (allocator-model §10) -------------------

// The structured fields, not the recorded env var: they include runtime changes made with
// _set_allocator_settings (§10). Fixed order so the same settings give the same string.
void SnapshotReader::read_allocator_settings(const Value& root) {
  const Value* settings = find(root, "allocator_settings");
  if (!settings) return;  // older snapshots: unknown, not default
  const Loc where{Loc::Settings};
  if (!settings->is_dict()) fail_type(Loc{Loc::Snapshot}, "allocator_settings", "a dict", *settings);
  allocator_conf_known_ = true;
  std::vector<std::string> items;
  auto mib = [&](const Value& v, std::string_view key) {
    std::uint64_t bytes = as_u64(v, key, where);
    if (bytes % MiB) fail(where, fmt::format("key '{}': {} bytes is not a whole number of MiB", key, bytes));
    return bytes / MiB;
  };

  if (const Value* v = find(*settings, "max_split_size")) {
    // SIZE_MAX (no limit) is stored as int64: -1.
    if (!(v->kind == Kind::Int && v->integer == -1) && !(v->kind == Kind::UInt))
      items.push_back(fmt::format("max_split_size_mb:{}", mib(*v, "max_split_size")));
  }
  if (const Value* v = find(*settings, "roundup_power2_divisions")) {
    if (v->is_dict()) {
      // Keys are interval lower bounds in MiB ("1".."32768"); list form covers every key.
      std::vector<std::pair<std::uint64_t, std::uint64_t>> slots;
      bool any = false;
      budget_.charge(v->dict_size());
      for (std::uint32_t k = 0; k < v->dict_size(); ++k) {
        const Value& key = v->dict_key(k);
        std::uint64_t bound = 0;
        bool ok = key.is_str();
        if (ok) {
          auto s = key.str();
          auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), bound);
          ok = ec == std::errc() && p == s.data() + s.size() && !s.empty();
        } else if (key.is_int()) {
          bound = as_u64(key, "roundup_power2_divisions", where);
          ok = true;
        }
        if (!ok)
          fail(where,
               "key 'roundup_power2_divisions': expected interval keys like \"1\", "
               "\"2\", ... \"32768\"");
        std::uint64_t div = as_u64(v->dict_value(k), "roundup_power2_divisions", where);
        any = any || div != 0;
        slots.emplace_back(bound, div);
      }
      if (any) {
        std::sort(slots.begin(), slots.end());
        std::string list = "roundup_power2_divisions:[";
        for (std::size_t s = 0; s < slots.size(); ++s)
          list += fmt::format("{}{}:{}", s ? "," : "", slots[s].first, slots[s].second);
        items.push_back(list + "]");
      }
    } else if (v->is_int()) {  // a single value, as 2.0-era settings stored it
      std::uint64_t div = as_u64(*v, "roundup_power2_divisions", where);
      if (div) items.push_back(fmt::format("roundup_power2_divisions:{}", div));
    } else {
      fail_type(where, "roundup_power2_divisions", "a dict of interval -> divisions", *v);
    }
  }
  if (const Value* v = find(*settings, "garbage_collection_threshold")) {
    double t = 0;
    if (v->kind == Kind::Float)
      t = v->real;
    else if (v->kind == Kind::Int)
      t = static_cast<double>(v->integer);
    else
      fail_type(where, "garbage_collection_threshold", "a float", *v);
    if (t > 0) items.push_back(fmt::format("garbage_collection_threshold:{}", t));
  }
  if (const Value* v = find(*settings, "expandable_segments")) {
    if (v->kind != Kind::Bool) fail_type(where, "expandable_segments", "a bool", *v);
    if (v->boolean) items.emplace_back("expandable_segments:True");
  }
  if (const Value* v = find(*settings, "max_non_split_rounding")) {
    std::uint64_t m = mib(*v, "max_non_split_rounding");
    if (m * MiB != kDefaultLargePage) items.push_back(fmt::format("max_non_split_rounding_mb:{}", m));
  }
  if (const Value* v = find(*settings, "large_segment_size")) {
    std::uint64_t m = mib(*v, "large_segment_size");
    if (m * MiB != kDefaultLargePage) items.push_back(fmt::format("large_segment_size_mb:{}", m));
  }
  for (std::size_t i = 0; i < items.size(); ++i) allocator_conf_ += (i ? "," : "") + items[i];
  // Expandable pages follow large_segment_size when the snapshot records it (§7.1).
  if (const Value* v = find(*settings, "large_segment_size"); v && v->is_int())
    large_page_ = as_u64(*v, "large_segment_size", where);
  if (large_page_ == 0) large_page_ = kDefaultLargePage;
}

// The walk of the streamed list's entries, made as they came (stream_entries()), as emit_events()
// would have made it here: the walk budget charged as it would have charged it (the entries,
// then the keys learned; a charge past the budget is the same message at any point, and no entry
// was refused), and the events made, for device 0 then (device_ when they were walked).
void SnapshotReader::take_streamed_walk(Trace& trace) {
  budget_.charge(stream_->count);
  budget_.charge(stream_layout_charges_);
  trace.events = std::move(stream_trace_.events);
  const auto device = static_cast<std::uint32_t>(device_);
  if (device != 0)
    for (Event& ev : trace.events) ev.device = device;
  events_proven_ = stream_walk_.proven;
}

Trace SnapshotReader::read(const Value& root, int device_index) {
  streaming_ = false;
  check_root(root);
  index(root);
  reset_device();
  Trace trace;
  trace.name = file_stem(origin_);
  trace.source = "pytorch-snapshot";
  trace.allocator_conf_known = allocator_conf_known_;
  trace.allocator_conf = allocator_conf_;
  choose_device(device_index);
  if (keep_frames_ > 0) interner_.emplace(trace, keep_frames_);
  if (device_entries_ && stream_ && device_entries_->streamed_list()) {
    if (stream_->failed) throw ReadAgainWithoutStreaming{};
    trace.source_entries = stream_->count;
    take_streamed_walk(trace);
  } else {
    if (stream_) discard_stream();  // another device's
    const std::span<const Value> entries = device_entries_ ? device_entries_->items() : std::span<const Value>();
    trace.source_entries = entries.size();
    emit_events(entries, trace);
  }
  add_block_allocations();
  rebuild_segments(trace);
  number_allocations(trace);
  check_allocations_in_segments(trace);
  interner_.reset();
  stream_ = nullptr;  // taken, or not this device's: a next read() walks its list
  return trace;
}

// A recorded stack (§11.5 `frames`: a list of {filename, line, name} dicts, innermost first): its
// top keep_frames_ frames, interned. Writers share frame dicts, and often whole lists, by memo
// reference: each container object is read once (cached by its address in the document) and
// charged to the walk budget once, a reference to one already read costs 1. So the charges stay
// within the input's size (WalkBudget's argument): every object was built by opcodes of its own.
std::uint32_t SnapshotReader::read_stack(const Value& frames, const Loc& where) {
  if (!frames.is_sequence())
    fail(where, fmt::format("expected a list of frame dicts, got {}", pickle::kind_name(frames.kind)));
  const auto items = frames.items();
  const void* list_id = items.data();  // the list's (or tuple's) item storage: one per object
  if (items.empty()) return kNoString;
  budget_.charge(1);
  if (const std::uint32_t* hit = stack_cache_.find(list_id)) return *hit;
  const std::size_t n = std::min<std::size_t>(items.size(), keep_frames_);
  budget_.charge(n);
  stack_frames_.clear();
  for (std::size_t k = 0; k < n; ++k) {
    const Value& f = items[k];
    if (!f.is_dict())
      fail(where,
           fmt::format("frame {}: expected a dict with filename, line and name, got {}", k, pickle::kind_name(f.kind)));
    if (const std::uint32_t* hit = frame_cache_.find(f.dict)) {
      stack_frames_.push_back(*hit);
      continue;
    }
    budget_.charge(f.dict_size());
    const Value* filename = f.find("filename");
    const Value* line = f.find("line");
    const Value* name = f.find("name");
    if (!filename || !filename->is_str() || !name || !name->is_str() || !line || line->kind != Kind::Int)
      fail(where, fmt::format("frame {}: expected a dict with filename (str), line (int) and name (str)", k));
    const std::uint32_t index = interner_->frame(filename->str(), line->integer, name->str());
    frame_cache_.insert(f.dict, index);
    stack_frames_.push_back(index);
  }
  const std::uint32_t stack = interner_->stack(stack_frames_);
  stack_cache_.insert(list_id, stack);
  return stack;
}

// The sink of a streamed list (pickle::EntrySink): the reader that will read the document walks
// each entry as it comes (SnapshotReader::stream_entries()).
class EntryStream final : public pickle::EntrySink {
 public:
  explicit EntryStream(SnapshotReader& reader) : reader_(reader) {}
  void take(std::span<const Value> items) override {
    if (!stream_.failed) {
      try {
        stream_.failed = !reader_.stream_entries(items, stream_.count);
      } catch (const InputError&) {
        stream_.failed = true;  // read again without streaming, if the reader gets to it
      }
    }
    stream_.count += items.size();
  }
  void discard() override {
    reader_.discard_stream();
    stream_ = StreamedEntries{};
  }
  // The document is read: the list's last free_requested has no entry after it.
  const StreamedEntries& finish() {
    if (!stream_.failed) reader_.finish_stream();
    return stream_;
  }

 private:
  SnapshotReader& reader_;
  StreamedEntries stream_;
};

// validate_trace(), without the walk over the events when the reader proved it would find nothing
// there (SnapshotReader::events_proven): the same result and the same message either way.
void check_read(const SnapshotReader& reader, const Trace& trace, std::string_view origin) {
  if (reader.events_proven())
    detail::validate_trace_except_events(trace, origin);
  else
    validate_trace(trace, origin);
}

}  // namespace

// Stack frames are most of every snapshot and nothing reads them unless asked for (§11.5,
// TraceReadOptions::frames): not built then (kSnapshotPickle), everything built otherwise.
Trace parse_snapshot(std::string_view bytes, std::string_view origin, const TraceReadOptions& options) {
  return parse_snapshot(bytes, origin, options, options.frames > 0 ? pickle::PickleOptions{} : kSnapshotPickle);
}

std::vector<std::pair<int, Trace>> parse_snapshot_devices(std::string_view bytes, std::string_view origin) {
  return parse_snapshot_devices(bytes, origin, kSnapshotPickle);
}

// parse_snapshot() with the first device trace list streamed (pickle::EntrySink): its entries are
// decoded as the pickle reader completes them, and never all kept as dicts. Used only when the
// document shows that nothing else can reach that list (the root's 'device_traces' is the list
// holding it, its one reference); throws ReadAgainWithoutStreaming when it cannot be used.
Trace parse_snapshot_streamed(std::string_view bytes, std::string_view origin, const TraceReadOptions& options,
                              const pickle::PickleOptions& pickle_options) {
  SnapshotReader reader(origin, bytes.size(), options.frames);
  EntryStream stream(reader);
  pickle::PickleOptions streaming = pickle_options;
  streaming.entry_sink = &stream;
  pickle::PickleDocument doc(bytes, origin, streaming);
  if (const pickle::ListObject* lists = doc.streamed_lists()) {
    const Value* traces = doc.root().is_dict() ? doc.root().find("device_traces") : nullptr;
    if (!traces || traces->kind != Kind::List || traces->list != lists) throw ReadAgainWithoutStreaming{};
    reader.use_stream(&stream.finish());
  }
  Trace trace = reader.read(doc.root(), options.device_index);
  check_read(reader, trace, origin);
  return trace;
}

Trace parse_snapshot(std::string_view bytes, std::string_view origin, const TraceReadOptions& options,
                     const pickle::PickleOptions& pickle_options) {
  // Streaming needs the frames skipped (the reader reads no frames then) and the fast paths.
  if (options.frames == 0 && pickle_options.can_stream() && !pickle_options.entry_sink) {
    try {
      return parse_snapshot_streamed(bytes, origin, options, pickle_options);
    } catch (const ReadAgainWithoutStreaming&) {
      // Below, as without streaming; the streamed document is gone.
    }
  }
  pickle::PickleDocument doc(bytes, origin, pickle_options);
  SnapshotReader reader(origin, bytes.size(), options.frames);
  Trace trace = reader.read(doc.root(), options.device_index);
  check_read(reader, trace, origin);
  return trace;
}

std::vector<std::pair<int, Trace>> parse_snapshot_devices(std::string_view bytes, std::string_view origin,
                                                          const pickle::PickleOptions& pickle_options) {
  pickle::PickleDocument doc(bytes, origin, pickle_options);
  std::vector<std::pair<int, Trace>> traces;
  SnapshotReader reader(origin, bytes.size());  // one reader, one walk budget, for every device
  for (std::uint64_t device : reader.devices_with_data(doc.root())) {
    const int index = static_cast<int>(device);  // at most kMaxDevice (index())
    Trace trace = reader.read(doc.root(), index);
    check_read(reader, trace, origin);
    traces.emplace_back(index, std::move(trace));
  }
  return traces;
}

}  // namespace fraglab
