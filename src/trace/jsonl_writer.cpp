// write_jsonl: Trace -> native JSONL (README "Traces"). The exact inverse of
// jsonl_reader.cpp: parse_jsonl(write_jsonl(t)) == t, and writing a parsed file again gives the
// same bytes, for any valid Trace (validate_trace) that also keeps trace.hpp's field conventions:
// distinct strings (what Trace::intern builds), mark values that are JSON text, has_addr set on
// segment_* events and not on oom (whose addr is device_free).
//
// Layout (keys in this fixed order, compact, integers in decimal, fields in [] only when not
// their default):
//   header       {"fraglab_trace":1,"name":S,"source":S,["allocator_conf":S,]["source_entries":N,]
//                 ["strings":[S...],]["initial_segments":[...],]["initial_allocations":[...],]
//                 ["frames":[[FILENAME,LINE,NAME]...],"stacks":[[FRAME...]...]]}
//     segment    {"addr":N,"size":N,["stream":N,]["pool":"small",]["expandable":true]}
//     allocation {"id":N,"addr":N,"size":N,["block_size":N,]["stream":N,]["free_requested":true,]["stack":N]}
//   alloc, free, free_requested, free_completed, empty_cache
//                {"op":OP,"id":N,"size":N,[stream],[addr],[tag],[t],[device]}
//                 (id always for alloc/free*, size always for alloc; otherwise only when != 0)
//   mark         {"op":"mark","label":S,"value":JSON,[stream],[addr],[tag],[t],[device]}
//   segment_*    {"op":OP,"addr":N,"size":N,"stream":N,[id],[tag],[t],[device]}
//   oom          {"op":"oom","size":N,"device_free":N,[id],[stream],[tag],[t],[device]}
//
// Every event line ends with [,"stack":N] when the trace kept frames (Trace::event_stacks) and the
// event has a stack; "frames" and "stacks" are written when it kept any (Trace::has_frames()), so
// a trace read without frames is written byte for byte as before.
//
// "strings" (the whole string table) is written only when the table is not what the reader
// would rebuild by itself — strings in first-use order (per event: label, value, tag), none
// unused — so ordinary files stay free of it while any Trace still round-trips exactly.
#include <simdjson.h>

#include <charconv>
#include <ostream>
#include <string>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "trace/json_text.hpp"

namespace fraglab {

namespace {

// Bytes buffered before handing them to the stream: large enough that the ostream's per-call
// cost vanishes, small enough to stay in cache.
constexpr std::size_t kFlushBytes = 1 << 20;

class JsonlWriter {
 public:
  JsonlWriter(const Trace& trace, std::ostream& out) : trace_(trace), out_(out) {
    buf_.reserve(kFlushBytes + 4096);
    // Every string is quoted once up front; events then copy the quoted form.
    quoted_.reserve(trace.strings.size());
    for (const std::string& s : trace.strings) {
      std::string q;
      detail::append_json_string(q, s);
      quoted_.push_back(std::move(q));
    }
  }

  void write() {
    write_header();
    const bool stacks = !trace_.event_stacks.empty();
    for (std::size_t i = 0; i < trace_.events.size(); ++i) {
      write_event(trace_.events[i], stacks && i < trace_.event_stacks.size() ? trace_.event_stacks[i] : kNoString);
      if (buf_.size() >= kFlushBytes) flush();
    }
    flush();
  }

 private:
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  void raw(std::string_view s) { buf_.append(s); }
  void u64(std::uint64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }
  void i64(std::int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }
  // ,"key":value — key is a literal with its quotes and colon, e.g. R"(,"id":)".
  void field(std::string_view key, std::uint64_t v) { raw(key), u64(v); }
  void field_str(std::string_view key, std::uint32_t index) {
    raw(key);
    raw(quoted_.at(index));
  }
  void field_text(std::string_view key, std::string_view s) {
    raw(key);
    detail::append_json_string(buf_, s);
  }

  // A mark value is JSON text kept verbatim. A value that is not valid JSON text (a Trace built in
  // code with a bare word) is written as a JSON string so the file stays readable.
  void mark_value(std::uint32_t index) {
    const std::string& v = trace_.strings.at(index);
    if (detail::is_json_scalar(v) && simdjson::validate_utf8(v.data(), v.size()))
      raw(v);
    else
      raw(quoted_[index]);
  }

  bool strings_in_first_use_order() const {
    std::vector<bool> seen(trace_.strings.size(), false);
    std::size_t next = 0;  // strings must first appear as 0, 1, 2, ...
    auto use = [&](std::uint64_t i) {
      if (i >= seen.size()) return false;
      if (!seen[i]) {
        if (i != next) return false;
        seen[i] = true;
        ++next;
      }
      return true;
    };
    for (const Event& e : trace_.events) {
      if (e.op == Op::Mark && (!use(e.id) || !use(e.size))) return false;
      if (e.tag != kNoString && !use(e.tag)) return false;
    }
    return next == trace_.strings.size();
  }

  void write_header() {
    raw(R"({"fraglab_trace":1)");
    field_text(R"(,"name":)", trace_.name);
    field_text(R"(,"source":)", trace_.source);
    if (trace_.allocator_conf_known) field_text(R"(,"allocator_conf":)", trace_.allocator_conf);
    if (trace_.source_entries != 0) field(R"(,"source_entries":)", trace_.source_entries);
    if (!trace_.strings.empty() && !strings_in_first_use_order()) {
      raw(R"(,"strings":[)");
      for (std::size_t i = 0; i < quoted_.size(); ++i) {
        if (i) raw(",");
        raw(quoted_[i]);
      }
      raw("]");
    }
    const InitialState& init = trace_.initial;
    if (!init.segments.empty()) {
      raw(R"(,"initial_segments":[)");
      for (std::size_t i = 0; i < init.segments.size(); ++i) {
        const InitialSegment& s = init.segments[i];
        raw(i ? R"(,{"addr":)" : R"({"addr":)");
        u64(s.addr);
        field(R"(,"size":)", s.size);
        if (s.stream != 0) field(R"(,"stream":)", s.stream);
        if (s.small_pool) raw(R"(,"pool":"small")");
        if (s.expandable) raw(R"(,"expandable":true)");
        raw("}");
      }
      raw("]");
    }
    if (!init.allocations.empty()) {
      raw(R"(,"initial_allocations":[)");
      for (std::size_t i = 0; i < init.allocations.size(); ++i) {
        const InitialAllocation& a = init.allocations[i];
        raw(i ? R"(,{"id":)" : R"({"id":)");
        u64(a.id);
        field(R"(,"addr":)", a.addr);
        field(R"(,"size":)", a.requested);
        if (a.block_size != 0) field(R"(,"block_size":)", a.block_size);
        if (a.stream != 0) field(R"(,"stream":)", a.stream);
        if (a.free_requested) raw(R"(,"free_requested":true)");
        if (a.stack != kNoString) field(R"(,"stack":)", a.stack);
        raw("}");
      }
      raw("]");
    }
    if (trace_.has_frames()) write_frame_tables();
    raw("}\n");
  }

  void write_frame_tables() {
    raw(R"(,"frames":[)");
    for (std::size_t i = 0; i < trace_.frames.size(); ++i) {
      const Frame& f = trace_.frames[i];
      raw(i ? ",[" : "[");
      detail::append_json_string(buf_, f.filename);
      raw(",");
      i64(f.line);
      raw(",");
      detail::append_json_string(buf_, f.name);
      raw("]");
    }
    raw(R"(],"stacks":[)");
    for (std::size_t s = 0; s < trace_.stacks.size(); ++s) {
      raw(s ? ",[" : "[");
      for (std::size_t k = 0; k < trace_.stacks[s].size(); ++k) {
        if (k) raw(",");
        u64(trace_.stacks[s][k]);
      }
      raw("]");
    }
    raw("]");
  }

  void write_event(const Event& e, std::uint32_t stack) {
    raw(R"({"op":")");
    raw(op_name(e.op));
    raw("\"");
    switch (e.op) {
      case Op::Mark:
        field_str(R"(,"label":)", static_cast<std::uint32_t>(e.id));
        raw(R"(,"value":)");
        mark_value(static_cast<std::uint32_t>(e.size));
        if (e.stream != 0) field(R"(,"stream":)", e.stream);
        if (e.has_addr) field(R"(,"addr":)", e.addr);
        break;
      case Op::SegmentAlloc:
      case Op::SegmentFree:
      case Op::SegmentMap:
      case Op::SegmentUnmap:
        field(R"(,"addr":)", e.addr);
        field(R"(,"size":)", e.size);
        field(R"(,"stream":)", e.stream);
        if (e.id != 0) field(R"(,"id":)", e.id);
        break;
      case Op::Oom:
        field(R"(,"size":)", e.size);
        field(R"(,"device_free":)", e.addr);
        if (e.id != 0) field(R"(,"id":)", e.id);
        if (e.stream != 0) field(R"(,"stream":)", e.stream);
        break;
      default: {  // alloc, free, free_requested, free_completed, empty_cache
        bool names_allocation = e.op != Op::EmptyCache;
        if (names_allocation || e.id != 0) field(R"(,"id":)", e.id);
        if (e.op == Op::Alloc || e.size != 0) field(R"(,"size":)", e.size);
        if (e.stream != 0) field(R"(,"stream":)", e.stream);
        if (e.has_addr) field(R"(,"addr":)", e.addr);
        break;
      }
    }
    if (e.tag != kNoString) field_str(R"(,"tag":)", e.tag);
    if (e.has_time) {
      raw(R"(,"t":)");
      i64(e.time_us);
    }
    if (e.device != 0) field(R"(,"device":)", e.device);
    if (stack != kNoString) field(R"(,"stack":)", stack);
    raw("}\n");
  }

  const Trace& trace_;
  std::ostream& out_;
  std::string buf_;
  std::vector<std::string> quoted_;  // trace_.strings[i] as a JSON string literal
};

}  // namespace

void write_jsonl(const Trace& trace, std::ostream& out) { JsonlWriter(trace, out).write(); }

}  // namespace fraglab
