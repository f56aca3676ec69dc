// parse_jsonl: native JSONL text -> Trace (README "Traces"; field layout in
// jsonl_writer.cpp, which is its exact inverse).
//
// Invariants:
//  - the first non-blank line is the header ({"fraglab_trace": 1, ...}); every later non-blank
//    line is exactly one JSON object holding one event; blank lines are skipped;
//  - every error is one InputError "ORIGIN:LINE: what was expected", LINE counted from 1 over all
//    lines, blank ones included; lifetime rules (live ids, double frees, ...) are checked while
//    reading so the line is known (same rules as validate_trace, via LiveAllocations);
//  - the string table is rebuilt in first-use order (header "strings" first, then per event:
//    label, value, tag), which is the order the writer relies on to omit "strings";
//  - a mark's value is kept as its exact JSON text, so it is written back byte for byte.
//
// Speed (~100 ns per event is the budget): each event line is first offered to the reader of
// the writer's exact line shape (jsonl_canonical_line.hpp), then to the strict scanner of
// jsonl_event_line.hpp, which reads the compact form writers emit in place, without
// first finding the line's end. Any line it declines — whitespace, escapes, floats, nesting, or
// an error — goes to one reused simdjson On-Demand parser, straight from the caller's buffer
// (only a line within SIMDJSON_PADDING bytes of the end is copied, to give simdjson its padding).
// All three fill the same plain slots, which make_event() then interprets by op (for runs of the
// writer's own alloc/free* lines, read_canonical_lines() builds the events itself, without the
// interpretation by op, and leaves any line it might refuse to make_event()). The header is always
// read by simdjson.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace_io.hpp"
#include "trace/json_text.hpp"
#include "trace/jsonl_canonical_line.hpp"
#include "trace/jsonl_event_line.hpp"
#include "trace/jsonl_reader.hpp"
#include "trace/line_count.hpp"
#include "trace/live_allocations.hpp"
#include "trace/summary_builder.hpp"

namespace fraglab {

namespace {

namespace od = simdjson::ondemand;
using detail::EventFields;

// Trace::strings plus an index over it: Trace::intern is a linear scan, fine for a generator's
// handful of tags, not for a million mark values.
class Interner {
 public:
  explicit Interner(std::vector<std::string>& strings) : strings_(strings) { recent_.fill(kNoString); }

  std::uint32_t intern(std::string_view s) {
    // Tags are short: a string of at most 8 bytes is its own key (its bytes in a word, plus its
    // length) in a direct-mapped cache, one word compare with no memcmp call. An entry only ever
    // holds what intern_slow() returned for that string, and strings_ only grows, so the cache
    // changes no index.
    if (s.size() > 8) return intern_slow(s);
    std::uint64_t key = 0;
    for (std::size_t i = 0; i < s.size(); ++i) key |= std::uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
    return intern_short(s, key);
  }

  // intern() for a string with 8 readable bytes at s.data() (a tag the canonical-line reader
  // found, kCanonicalRoom bytes from its line's start): its key is one masked load instead of a
  // loop over its bytes (whose varying trip count also cost mispredicted branches).
  std::uint32_t intern_readable8(std::string_view s) {
    if (s.size() > 8) return intern_slow(s);
    std::uint64_t word;
    std::memcpy(&word, s.data(), 8);
    // The bytes past the string are masked off: the same key intern() builds byte by byte.
    const std::uint64_t key = s.size() == 8 ? word : word & ((std::uint64_t{1} << (8 * s.size())) - 1);
    return intern_short(s, key);
  }

 private:
  std::uint32_t intern_short(std::string_view s, std::uint64_t key) {
    // Two multiplies: with one, "act" and "grad" (the generator's tags) shared a slot.
    std::uint64_t h = (key + s.size()) * 0x9E3779B97F4A7C15ull;
    ShortEntry& e = short_[((h ^ (h >> 29)) * 0x9E3779B97F4A7C15ull) >> 58];
    if (e.index != kNoString && e.key == key && e.size == s.size()) return e.index;
    const std::uint32_t i = intern_slow(s);
    e = ShortEntry{key, static_cast<std::uint32_t>(s.size()), i};
    return i;
  }

 public:
  // Header "strings": taken verbatim, in order (a duplicate keeps its first index for lookups).
  void add_verbatim(std::string_view s) {
    strings_.emplace_back(s);
    index_.emplace(strings_.back(), static_cast<std::uint32_t>(strings_.size() - 1));
  }

 private:
  // Out of line: inlined, its register saves cost the short-string hit path more than it does.
  [[gnu::noinline]] std::uint32_t intern_slow(std::string_view s) {
    // A few tags make up almost every lookup: a tiny direct-mapped cache, keyed by length and end
    // bytes, answers them with one compare instead of hashing the whole string. The second byte
    // too: without it "param", "comm" and "temp" (the generator's tags) shared one slot and
    // evicted each other, sending a third of all lookups to the hash map.
    std::size_t slot =
        s.empty() ? 0
                  : (s.size() * 31 + static_cast<unsigned char>(s.front()) * 7 +
                     static_cast<unsigned char>(s[s.size() > 1 ? 1 : 0]) * 13 + static_cast<unsigned char>(s.back())) %
                        recent_.size();
    std::uint32_t cached = recent_[slot];
    if (cached != kNoString && strings_[cached] == s) return cached;
    auto it = index_.find(s);
    std::uint32_t i;
    if (it != index_.end()) {
      i = it->second;
    } else {
      i = static_cast<std::uint32_t>(strings_.size());
      strings_.emplace_back(s);
      index_.emplace(strings_.back(), i);
    }
    recent_[slot] = i;
    return i;
  }

 private:
  struct ShortEntry {
    std::uint64_t key = 0;
    std::uint32_t size = 0;
    std::uint32_t index = kNoString;  // kNoString = empty
  };
  std::array<ShortEntry, 64> short_{};
  std::vector<std::string>& strings_;
  // Searched with a string_view (transparent), no std::string built. Seeded per process: a fixed
  // hash (std::hash) lets a trace list strings that all land in one bucket. Only looked up.
  std::unordered_map<std::string, std::uint32_t, SeededHash, std::equal_to<>> index_;
  std::array<std::uint32_t, 61> recent_;  // indices into strings_, kNoString = empty
};

// Asks the kernel to back [data, data + bytes) with transparent huge pages where it is configured
// to on request ("madvise", the usual default): a large event vector is written once from start to
// end, and 4 KiB pages cost one page fault each (13,700 for a million events). Only the whole 2 MiB
// pages inside the range are advised; the memory is the caller's either way, and no result changes.
void advise_huge_pages(const void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only: errors ignored
#else
  (void)data;
  (void)bytes;
#endif
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// A JSON token for an error message, cut short so one bad line cannot make a huge message.
std::string show_token(od::value& v) {
  std::string_view raw = trim_right(v.raw_json_token());
  if (raw.size() > 40) return std::string(raw.substr(0, 40)) + "...";
  return std::string(raw);
}

}  // namespace

namespace detail {

class JsonlReader {
 public:
  JsonlReader(std::string_view origin, const ReadProgress& progress)
      : origin_(origin), progress_(progress), interner_(trace_.strings) {}

  // The whole input in one piece.
  Trace read(std::string_view text) {
    start_window(text, 0, text.size());
    if (!read_header_in_window()) {
      line_no_ = 1;  // nothing but blank lines: the header is missing from the first line
      fail("empty input: expected a header line {\"fraglab_trace\": 1, ...}");
    }
    // At most one event per remaining line: counting them (line_count.hpp) sizes the event
    // vector once instead of regrowing and copying it ~20 times on large traces.
    trace_.events.reserve(detail::count_lines(text_.substr(pos_)));
    advise_huge_pages(trace_.events.data(), trace_.events.capacity() * sizeof(Event));
    read_events_in_window(trace_.events);
    return std::move(trace_);
  }

  // ---- pieces of a streamed input (JsonlStream below) -----------------------------------------
  // Each window is the next bytes of the input, `offset` bytes into it, ending just after a '\n'
  // or at the input's end (a line is never split between windows); `total` is the input's size.
  void start_window(std::string_view window, std::uint64_t offset, std::uint64_t total) {
    text_ = window;
    offset_ = offset;
    total_ = total;
    pos_ = 0;
  }
  // Reads the header if the window has a non-blank line; false when it had only blank lines.
  bool read_header_in_window() {
    std::string_view line;
    if (!next_line(line)) return false;
    read_header(line);
    return true;
  }
  // Appends the window's events to `out` (the lifetime rules checked as they come).
  void read_events_in_window(std::vector<Event>& out) {
    std::string_view line;
    EventFields f;  // reused: each reader below starts from its own `seen`
    while (pos_ < text_.size()) {
      if (progress_ && (line_no_ & kProgressLines) == 0) progress_(offset_ + pos_, total_);
      // Fastest path: a run of lines in the writer's own shape (jsonl_canonical_line.hpp).
      if (read_canonical_lines(out)) continue;
      // Fast path: the strict scanner reads the line in place and finds its end itself, so a
      // well-formed line is touched once.
      f = EventFields{};
      std::size_t length;
      if (detail::scan_event_line(text_.substr(pos_), f, length)) {
        ++line_no_;
        pos_ = std::min(pos_ + length + 1, text_.size());
        make_event(f, out.emplace_back());
        continue;
      }
      if (!next_line(line)) break;  // only blank lines were left
      f = EventFields{};
      read_event_fields(line, f);
      make_event(f, out.emplace_back());
    }
  }
  // Keeps TraceSummary figures while reading (SummaryBuilder), for a reader that holds no trace.
  void keep_summary() { summary_.emplace(); }
  TraceSummary summary(std::uint64_t events) const { return summary_ ? summary_->finish(events) : TraceSummary{}; }
  // The trace read so far: its header, strings and (for read()) events.
  Trace& trace() { return trace_; }
  bool has_stacks() const { return has_stacks_; }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", origin_, line_no_, what));
  }
  [[noreturn]] void fail_json(simdjson::error_code err) const {
    fail(fmt::format("not valid JSON ({})", simdjson::error_message(err)));
  }
  template <class T>
  T get(simdjson::simdjson_result<T>&& r) const {
    T value;
    if (auto err = std::move(r).get(value)) fail_json(err);
    return value;
  }

  // Next non-blank line, its number in line_no_. False at the end of the text.
  bool next_line(std::string_view& line) {
    while (pos_ < text_.size()) {
      ++line_no_;
      const char* begin = text_.data() + pos_;
      const void* nl = std::memchr(begin, '\n', text_.size() - pos_);
      std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text_.data()) : text_.size();
      line = text_.substr(pos_, end - pos_);
      line_start_ = pos_;
      pos_ = nl ? end + 1 : end;
      if (!trim_right(line).empty()) return true;
    }
    return false;
  }

  // Starts simdjson on the current line. The bytes after a line are readable (the rest of the
  // text), so only a line within SIMDJSON_PADDING of the end is copied to a padded scratch buffer.
  od::document iterate(std::string_view line) {
    std::size_t room = text_.size() - line_start_;
    simdjson::padded_string_view view;
    if (room >= line.size() + simdjson::SIMDJSON_PADDING) {
      view = simdjson::padded_string_view(line.data(), line.size(), room);
    } else {
      scratch_.assign(line);
      scratch_.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
      view = simdjson::padded_string_view(scratch_.data(), line.size(), scratch_.size());
    }
    return get(parser_.iterate(view));
  }

  od::object iterate_object(od::document& doc, std::string_view what) {
    od::object obj;
    if (auto err = doc.get_object().get(obj)) {
      if (err == simdjson::INCORRECT_TYPE) fail(fmt::format("not a JSON object (expected {})", what));
      fail_json(err);
    }
    return obj;
  }

  // After the object's closing brace nothing may follow on the line.
  void expect_end(od::document& doc) {
    const char* rest;
    if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS)
      fail("unexpected text after the JSON object (expected one object per line)");
  }

  std::uint64_t read_u64(od::value v, std::string_view key) {
    std::uint64_t x;
    if (v.get_uint64().get(x))
      fail(fmt::format("field '{}': expected an unsigned 64-bit integer, got {}", key, show_token(v)));
    return x;
  }
  std::int64_t read_i64(od::value v, std::string_view key) {
    std::int64_t x;
    if (v.get_int64().get(x))
      fail(fmt::format("field '{}': expected a signed 64-bit integer, got {}", key, show_token(v)));
    return x;
  }
  std::string_view read_string(od::value v, std::string_view key) {
    std::string_view s;
    if (v.get_string().get(s)) fail(fmt::format("field '{}': expected a string, got {}", key, show_token(v)));
    return s;
  }
  bool read_bool(od::value v, std::string_view key) {
    bool b;
    if (v.get_bool().get(b)) fail(fmt::format("field '{}': expected true or false, got {}", key, show_token(v)));
    return b;
  }
  std::uint64_t read_size(od::value v, std::string_view key, bool allow_zero) {
    std::uint64_t x = read_u64(v, key);
    if (x == 0 && !allow_zero) fail(fmt::format("field '{}': size 0 (expected a positive size)", key));
    if (x >= detail::kImpossibleSize) fail(fmt::format("field '{}': impossible size {} (expected < 2^60)", key, x));
    return x;
  }

  // ---- header ---------------------------------------------------------------------------------

  void read_header(std::string_view line) {
    od::document doc = iterate(line);
    od::object obj = iterate_object(doc, "the header {\"fraglab_trace\": 1, ...}");
    bool versioned = false;
    for (auto field_result : obj) {
      od::field field = get(std::move(field_result));
      std::string_view key = get(field.unescaped_key());
      od::value v = field.value();
      if (key == "fraglab_trace") {
        std::uint64_t version;
        if (v.get_uint64().get(version))
          fail(fmt::format("field 'fraglab_trace': expected the format version 1, got {}", show_token(v)));
        if (version != 1)
          fail(fmt::format("unsupported fraglab_trace version {} (this build reads version 1)", version));
        versioned = true;
      } else if (key == "name") {
        trace_.name = read_string(v, key);
      } else if (key == "source") {
        trace_.source = read_string(v, key);
      } else if (key == "allocator_conf") {
        trace_.allocator_conf = read_string(v, key);
        trace_.allocator_conf_known = true;
      } else if (key == "source_entries") {
        trace_.source_entries = read_u64(v, key);
      } else if (key == "strings") {
        if (!trace_.strings.empty()) fail("field 'strings' given twice");
        od::array arr = array_of(v, key);
        for (auto item : arr) interner_.add_verbatim(read_string(get(std::move(item)), key));
      } else if (key == "initial_segments") {
        read_initial_segments(array_of(v, key));
      } else if (key == "initial_allocations") {
        read_initial_allocations(array_of(v, key));
      } else if (key == "frames") {
        read_frames(array_of(v, key));
      } else if (key == "stacks") {
        read_stacks(array_of(v, key));
      } else {
        check_ignored(v, key);
      }
    }
    expect_end(doc);
    if (!versioned) fail("missing header: expected {\"fraglab_trace\": 1, ...} as the first line");
    check_frame_tables();
  }

  // ---- stack frames (README "Stack frames") --------------------------------------------------

  // "frames": [[filename, line, name], ...]
  void read_frames(od::array arr) {
    std::size_t index = 0;
    for (auto item : arr) {
      const std::string where = fmt::format("frames[{}]", index++);
      od::array frame;
      if (get(std::move(item)).get_array().get(frame)) fail(fmt::format("{}: expected [filename, line, name]", where));
      Frame f;
      std::size_t n = 0;
      for (auto part : frame) {
        od::value v = get(std::move(part));
        if (n == 0) f.filename = read_string(v, where + "[0]");
        if (n == 1) f.line = read_i64(v, where + "[1]");
        if (n == 2) f.name = read_string(v, where + "[2]");
        ++n;
      }
      if (n != 3) fail(fmt::format("{}: expected [filename, line, name], got {} items", where, n));
      trace_.frames.push_back(std::move(f));
    }
  }

  // "stacks": [[frame index, ...], ...], innermost first.
  void read_stacks(od::array arr) {
    has_stacks_ = true;
    std::size_t index = 0;
    for (auto item : arr) {
      const std::string where = fmt::format("stacks[{}]", index++);
      od::array stack;
      if (get(std::move(item)).get_array().get(stack))
        fail(fmt::format("{}: expected an array of frame indices", where));
      std::vector<std::uint32_t>& frames = trace_.stacks.emplace_back();
      for (auto part : stack) {
        const std::uint64_t f = read_u64(get(std::move(part)), where);
        if (f >= kNoString) fail(fmt::format("field '{}': frame index {} out of range", where, f));
        frames.push_back(static_cast<std::uint32_t>(f));
      }
    }
  }

  // Once the header is read: every index points into its table.
  void check_frame_tables() {
    if (!trace_.frames.empty() && !has_stacks_) fail("field 'frames' without 'stacks' (expected both or neither)");
    for (std::size_t s = 0; s < trace_.stacks.size(); ++s) {
      for (const std::uint32_t f : trace_.stacks[s]) {
        if (f >= trace_.frames.size())
          fail(fmt::format("field 'stacks[{}]': frame index {} out of range (the header lists {} frames)", s, f,
                           trace_.frames.size()));
      }
    }
    for (const InitialAllocation& a : trace_.initial.allocations) {
      if (a.stack != kNoString && a.stack >= trace_.stacks.size())
        fail(fmt::format("initial allocation {}: stack {} out of range (the header lists {} stacks)", a.id, a.stack,
                         trace_.stacks.size()));
    }
  }

  od::array array_of(od::value v, std::string_view key) {
    od::array arr;
    if (v.get_array().get(arr)) fail(fmt::format("field '{}': expected an array, got {}", key, show_token(v)));
    return arr;
  }

  void read_initial_segments(od::array arr) {
    std::size_t index = 0;
    for (auto item : arr) {
      std::string where = fmt::format("initial_segments[{}]", index++);
      od::object obj;
      if (get(std::move(item)).get_object().get(obj)) fail(fmt::format("{}: expected an object", where));
      InitialSegment seg;
      bool has_addr = false, has_size = false;
      for (auto field_result : obj) {
        od::field field = get(std::move(field_result));
        std::string_view key = get(field.unescaped_key());
        od::value v = field.value();
        std::string name = where + "." + std::string(key);
        if (key == "addr") {
          seg.addr = read_u64(v, name);
          has_addr = true;
        } else if (key == "size") {
          seg.size = read_size(v, name, /*allow_zero=*/true);
          has_size = true;
        } else if (key == "stream") {
          seg.stream = read_u64(v, name);
        } else if (key == "pool") {
          std::string_view pool = read_string(v, name);
          if (pool != "small" && pool != "large")
            fail(fmt::format("field '{}': expected \"small\" or \"large\", got \"{}\"", name, pool));
          seg.small_pool = pool == "small";
        } else if (key == "expandable") {
          seg.expandable = read_bool(v, name);
        }
      }
      if (!has_addr || !has_size) fail(fmt::format("{}: missing field 'addr' or 'size'", where));
      trace_.initial.segments.push_back(seg);
    }
  }

  void read_initial_allocations(od::array arr) {
    std::size_t index = 0;
    for (auto item : arr) {
      std::string where = fmt::format("initial_allocations[{}]", index++);
      od::object obj;
      if (get(std::move(item)).get_object().get(obj)) fail(fmt::format("{}: expected an object", where));
      InitialAllocation a;
      bool has_id = false, has_addr = false, has_size = false;
      for (auto field_result : obj) {
        od::field field = get(std::move(field_result));
        std::string_view key = get(field.unescaped_key());
        od::value v = field.value();
        std::string name = where + "." + std::string(key);
        if (key == "id") {
          a.id = read_u64(v, name);
          has_id = true;
        } else if (key == "addr") {
          a.addr = read_u64(v, name);
          has_addr = true;
        } else if (key == "size") {
          a.requested = read_size(v, name, /*allow_zero=*/false);
          has_size = true;
        } else if (key == "block_size") {
          a.block_size = read_size(v, name, /*allow_zero=*/true);
        } else if (key == "stream") {
          a.stream = read_u64(v, name);
        } else if (key == "free_requested") {
          a.free_requested = read_bool(v, name);
        } else if (key == "stack") {
          const std::uint64_t s = read_u64(v, name);
          if (s >= kNoString) fail(fmt::format("field '{}': stack index {} out of range", name, s));
          a.stack = static_cast<std::uint32_t>(s);
        }
      }
      if (!has_id || !has_addr || !has_size) fail(fmt::format("{}: missing field 'id', 'addr' or 'size'", where));
      if (!live_.add_initial(a.id, a.requested, a.free_requested))
        fail(fmt::format("{}: id {} is already live (expected unique ids)", where, a.id));
      trace_.initial.allocations.push_back(a);
    }
  }

  // ---- events ---------------------------------------------------------------------------------

  // The general reader for a line the strict scanner declined: any valid JSON, and every error.
  // Fills the same slots as scan_event_line() (last duplicate key wins, unknown keys ignored).
  void read_event_fields(std::string_view line, EventFields& f) {
    od::document doc = iterate(line);
    od::object obj = iterate_object(doc, "one event per line");
    for (auto field_result : obj) {
      od::field field = get(std::move(field_result));
      std::string_view key = get(field.unescaped_key());
      od::value v = field.value();
      if (key == "op") {
        std::string_view name = read_string(v, key);
        std::optional<Op> op = detail::event_op(name);
        if (!op)
          fail(
              fmt::format("unknown op \"{}\" (expected alloc, free, free_requested, free_completed, "
                          "empty_cache, mark, segment_alloc, segment_free, segment_map, segment_unmap or oom)",
                          name.substr(0, 40)));
        f.op = *op;
        f.seen |= EventFields::kOp;
      } else if (key == "id") {
        f.id = read_u64(v, key), f.seen |= EventFields::kId;
      } else if (key == "size") {
        f.size = read_u64(v, key), f.seen |= EventFields::kSize;
      } else if (key == "stream") {
        f.stream = read_u64(v, key), f.seen |= EventFields::kStream;
      } else if (key == "addr") {
        f.addr = read_u64(v, key), f.seen |= EventFields::kAddr;
      } else if (key == "t") {
        f.time = read_i64(v, key), f.seen |= EventFields::kTime;
      } else if (key == "tag") {
        f.tag = read_string(v, key), f.seen |= EventFields::kTag;
      } else if (key == "device") {
        f.device = read_u64(v, key), f.seen |= EventFields::kDevice;
      } else if (key == "device_free") {
        f.device_free = read_u64(v, key), f.seen |= EventFields::kDeviceFree;
      } else if (key == "stack" && has_stacks_) {  // without the header's "stacks", an unknown field
        f.stack = read_u64(v, key), f.seen |= EventFields::kStack;
      } else if (key == "label") {
        f.label = read_string(v, key), f.seen |= EventFields::kLabel;
      } else if (key == "value") {
        f.value = read_mark_value(v), f.seen |= EventFields::kValue;
      } else {
        check_ignored(v, key);  // unknown fields are ignored (README "Traces"), if they are JSON
      }
    }
    expect_end(doc);
  }

  // On-Demand skips a value it is not asked for without reading its atoms: check an ignored
  // scalar ourselves, so that `"x": tru` is still "not JSON". (Arrays and objects are skipped
  // by their structure only.)
  void check_ignored(od::value v, std::string_view key) {
    od::json_type type;
    if (v.type().get(type)) fail(fmt::format("field '{}': not valid JSON", key));
    if (type == od::json_type::object || type == od::json_type::array) return;
    std::string_view raw = trim_right(v.raw_json_token());
    if (!detail::is_json_scalar(raw)) fail(fmt::format("field '{}': not valid JSON: {}", key, raw.substr(0, 40)));
  }

  // A mark value: any JSON scalar, kept as its exact text.
  std::string_view read_mark_value(od::value v) {
    std::string_view raw;
    od::json_type type;
    if (v.type().get(type)) fail("field 'value': not valid JSON");
    if (type == od::json_type::object || type == od::json_type::array)
      fail(fmt::format("field 'value': expected a JSON scalar (string, number, bool, null), got {}", show_token(v)));
    raw = trim_right(v.raw_json_token());
    if (!detail::is_json_scalar(raw))
      fail(fmt::format("field 'value': not a valid JSON scalar: {}", raw.substr(0, 40)));
    return raw;
  }

  [[noreturn]] void missing(std::string_view op, std::string_view fields) const {
    fail(fmt::format("{}: missing field {}", op, fields));
  }

  // Interprets the slots by op into `e`, a new last element of the trace (filled in place: a copy
  // per event showed in profiles; on error the whole trace is dropped anyway).
  void make_event(const EventFields& f, Event& e) {
    if (!f.has(EventFields::kOp)) fail("missing field 'op'");
    e.op = f.op;
    e.stream = f.get(EventFields::kStream, f.stream);
    std::uint64_t device = f.get(EventFields::kDevice, f.device);
    if (device > 0xffffffffull) fail(fmt::format("field 'device': {} is not a device index (expected < 2^32)", device));
    e.device = static_cast<std::uint32_t>(device);
    e.has_time = f.has(EventFields::kTime);
    e.time_us = e.has_time ? f.time : 0;
    e.id = f.get(EventFields::kId, f.id);
    e.size = f.get(EventFields::kSize, f.size);
    e.has_addr = f.has(EventFields::kAddr);
    e.addr = f.get(EventFields::kAddr, f.addr);
    switch (e.op) {
      case Op::Alloc:
        if (!f.has(EventFields::kId) || !f.has(EventFields::kSize)) missing("alloc", "'id' or 'size'");
        if (e.size == 0) fail("alloc: size 0 (expected a positive size)");
        if (e.size >= detail::kImpossibleSize) fail(fmt::format("alloc: impossible size {} (expected < 2^60)", e.size));
        break;
      case Op::Free:
      case Op::FreeRequested:
      case Op::FreeCompleted:
        if (!f.has(EventFields::kId)) missing(op_name(e.op), "'id'");
        break;
      case Op::EmptyCache:
        break;
      case Op::Mark:
        if (!f.has(EventFields::kLabel) || !f.has(EventFields::kValue)) missing("mark", "'label' or 'value'");
        e.id = interner_.intern(f.label);
        e.size = interner_.intern(f.value);
        break;
      case Op::SegmentAlloc:
      case Op::SegmentFree:
      case Op::SegmentMap:
      case Op::SegmentUnmap:
        if (!f.has(EventFields::kAddr) || !f.has(EventFields::kSize)) missing(op_name(e.op), "'addr' or 'size'");
        if (e.size >= detail::kImpossibleSize)
          fail(fmt::format("{}: impossible size {} (expected < 2^60)", op_name(e.op), e.size));
        break;
      case Op::Oom:
        if (!f.has(EventFields::kSize) || !f.has(EventFields::kDeviceFree)) missing("oom", "'size' or 'device_free'");
        if (e.size >= detail::kImpossibleSize) fail(fmt::format("oom: impossible size {} (expected < 2^60)", e.size));
        e.addr = f.device_free;  // oom keeps device_free in addr (trace.hpp)
        e.has_addr = false;
        break;
    }
    if (f.has(EventFields::kTag)) e.tag = interner_.intern(f.tag);
    if (has_stacks_) {
      const std::uint64_t stack = f.has(EventFields::kStack) ? f.stack : kNoString;
      if (stack != kNoString && stack >= trace_.stacks.size())
        fail(fmt::format("field 'stack': {} out of range (the header lists {} stacks)", stack, trace_.stacks.size()));
      trace_.event_stacks.push_back(static_cast<std::uint32_t>(stack));
    }  // else "stack" is an unknown field, ignored as it always was
    if (const char* what = live_.apply(e.op, e.id, e.size)) fail_live(e, what);
    if (summary_) add_to_summary(e);
  }

  // Reads lines in the writer's own shape (scan_canonical_line(), 8 bytes at a time without
  // finding a line's end first) from pos_, one after another, and builds each event in place:
  // what make_event() builds, without its general interpretation by op. The reader's position and
  // line number stay in locals for the run (kept in members, they were loaded and stored again for
  // every line). A line needs kCanonicalRoom readable bytes, so the last few of a window or text
  // are left to the other readers, as is the line that reports progress next (the caller reports
  // it first) and every line this does not build: not in the writer's shape, or one that might be
  // refused (a missing id or size, a size of 0 or >= 2^60, a device >= 2^32, a stack out of
  // range). The strict scanner accepts every line scan_canonical_line() accepts and fills the same
  // slots, so such a line gets the same event, or the same message, from make_event().
  // tests/trace/jsonl_canonical_test.cpp reads traces and refused lines both ways. True when it
  // read at least one line.
  [[gnu::always_inline]] bool read_canonical_lines(std::vector<Event>& out) {
    using F = EventFields;
    if (text_.size() - pos_ < detail::kCanonicalRoom) return false;
    const char* const text = text_.data();
    const char* const last = text + (text_.size() - detail::kCanonicalRoom);  // the last start with room
    const char* p = text + pos_;
    const std::size_t first_line = line_no_;
    std::size_t line_no = first_line;
    // The caller reports progress before the line after a multiple of 65536 lines: stop there.
    const std::size_t stop = progress_ ? (line_no | kProgressLines) + 1 : SIZE_MAX;
    const std::uint64_t stacks = has_stacks_ ? trace_.stacks.size() : 0;
    EventFields f;
    const char* newline;
    for (;;) {
      // The slots a line may leave unset hold what make_event() takes for them (EventFields::get),
      // so the event is built from them without testing `seen` for each.
      f.id = f.size = f.stream = f.addr = f.device = 0;
      f.time = 0;
      f.stack = kNoString;
      if (p > last || line_no >= stop || !detail::scan_canonical_line(p, f, newline)) break;
      const bool alloc = f.op == Op::Alloc;
      const std::uint32_t needed = alloc ? (F::kId | F::kSize) : std::uint32_t{F::kId};
      // size - 1 wraps for 0: one compare refuses 0 and every size >= 2^60.
      if ((f.seen & needed) != needed || (alloc && f.size - 1 >= detail::kImpossibleSize - 1) ||
          f.device > 0xffffffffull || (has_stacks_ && f.stack != kNoString && f.stack >= stacks))
        break;
      out.push_back(Event{.op = f.op,
                          .has_addr = f.has(F::kAddr),
                          .has_time = f.has(F::kTime),
                          .device = static_cast<std::uint32_t>(f.device),
                          .tag = f.has(F::kTag) ? interner_.intern_readable8(f.tag) : kNoString,
                          .id = f.id,
                          .size = f.size,
                          .stream = f.stream,
                          .addr = f.addr,
                          .time_us = f.time});
      ++line_no;
      p = newline + 1;
      if (has_stacks_) trace_.event_stacks.push_back(static_cast<std::uint32_t>(f.stack));
      if (const char* what = live_.apply(f.op, f.id, f.size)) {
        line_no_ = line_no;
        fail_live(out.back(), what);
      }
      if (summary_) add_to_summary(out.back());
    }
    pos_ = static_cast<std::size_t>(p - text);
    line_no_ = line_no;
    return line_no != first_line;
  }

  [[noreturn, gnu::noinline]] void fail_live(const Event& e, const char* what) const {
    fail(fmt::format("{} id {}: {}", op_name(e.op), e.id, what));
  }

  // The event was allowed (live_ applied it): what summarize() would count for it.
  void add_to_summary(const Event& e) {
    if (is_observed(e.op)) {
      summary_->observed();
    } else if (e.op == Op::Alloc) {
      summary_->alloc(e, true);
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      summary_->freed(true, live_.last_released());
    }
  }

  static constexpr std::size_t kProgressLines = (std::size_t{1} << 16) - 1;  // progress every 65536 lines

  std::string_view text_;     // the current window (the whole input, for read())
  std::uint64_t offset_ = 0;  // where the window starts in the input
  std::uint64_t total_ = 0;   // bytes of the whole input
  std::string_view origin_;
  const ReadProgress& progress_;
  std::size_t pos_ = 0;         // start of the next line
  std::size_t line_start_ = 0;  // start of the current line
  std::size_t line_no_ = 0;     // 1-based number of the current line
  od::parser parser_;
  std::string scratch_;
  Trace trace_;
  Interner interner_;
  detail::LiveAllocations live_;
  bool has_stacks_ = false;  // the header has "stacks": one event_stacks entry per event
  std::optional<SummaryBuilder> summary_;
};

}  // namespace detail

Trace parse_jsonl(std::string_view text, std::string_view origin, const ReadProgress& progress) {
  Trace trace = detail::JsonlReader(origin, progress).read(text);
  if (progress) progress(text.size(), text.size());
  return trace;
}

}  // namespace fraglab

namespace fraglab::detail {

JsonlWindowReader::JsonlWindowReader(std::string_view origin, const ReadProgress& progress)
    : reader_(std::make_unique<JsonlReader>(origin, progress)) {
  reader_->keep_summary();
}
JsonlWindowReader::~JsonlWindowReader() = default;
void JsonlWindowReader::start_window(std::string_view window, std::uint64_t offset, std::uint64_t total) {
  reader_->start_window(window, offset, total);
}
bool JsonlWindowReader::read_header() { return reader_->read_header_in_window(); }
void JsonlWindowReader::read_events(std::vector<Event>& out) { reader_->read_events_in_window(out); }
TraceSummary JsonlWindowReader::summary(std::uint64_t events) const { return reader_->summary(events); }
Trace& JsonlWindowReader::trace() { return reader_->trace(); }
bool JsonlWindowReader::has_stacks() const { return reader_->has_stacks(); }

}  // namespace fraglab::detail
