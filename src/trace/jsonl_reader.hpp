// The JSONL reader of jsonl_reader.cpp fed a window at a time, for a trace streamed from its file
// (trace_stream.cpp): the same code, so the same events, checks and error messages (line numbers
// counted over all windows) as parse_jsonl() on the whole text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab::detail {

class JsonlReader;

// "runs/step3.jsonl.gz" -> "step3": the default trace name (trace.hpp); "stdin" for "-".
std::string default_trace_name(const std::string& path);

class JsonlWindowReader {
 public:
  JsonlWindowReader(std::string_view origin, const ReadProgress& progress);
  ~JsonlWindowReader();
  JsonlWindowReader(const JsonlWindowReader&) = delete;
  JsonlWindowReader& operator=(const JsonlWindowReader&) = delete;

  // The next window: the input's bytes from `offset`, ending just after a '\n' or at the input's
  // end (a line is never split between windows); `total` is the input's size (for progress).
  // The bytes must stay valid until the next window starts.
  void start_window(std::string_view window, std::uint64_t offset, std::uint64_t total);
  // Reads the header from the window's first non-blank line; false if it had only blank lines.
  bool read_header();
  // Appends the window's events to `out`, checking them as parse_jsonl() does.
  void read_events(std::vector<Event>& out);
  // TraceSummary of the events read so far (as summarize() gives for them).
  TraceSummary summary(std::uint64_t events) const;
  // The header's fields and the strings interned so far (events go to read_events' `out`).
  Trace& trace();
  // The header lists stack frames (each event then has a stack index).
  bool has_stacks() const;

 private:
  std::unique_ptr<JsonlReader> reader_;
};

}  // namespace fraglab::detail
