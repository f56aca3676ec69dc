// TraceStream: a JSONL trace file read a window of lines at a time, for a replay that never holds
// the whole trace (README "Speed": a 9 M-event trace replays in a few hundred bytes of memory per
// thousand events instead of the text and every event at once).
//
// Invariants:
//  - it streams only what it can read exactly as read_trace() would: a regular, uncompressed
//    JSONL file whose header has no start state and no stack frames. For anything else (standard
//    input, gzip, a snapshot pickle, a header it cannot read) open() gives nullptr, and the caller
//    reads the file whole, which also gives every error about such input;
//  - the events, their checks and every error message (the line named) are those of
//    parse_jsonl(): both run the same reader, here fed one window of whole lines at a time;
//  - the file is read into one reused buffer (no zero-fill, no copy of the whole text); a line
//    longer than the buffer grows it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab {

class TraceStream {
 public:
  // The stream over `path` with its header read, or nullptr when it is not such a file (above).
  // `window_bytes`: how much of the file one window holds (tests make it tiny).
  static std::unique_ptr<TraceStream> open(const std::string& path, const ReadProgress& progress = {},
                                           std::size_t window_bytes = kDefaultWindow);
  ~TraceStream();
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  // The header's fields (name, source, strings) with no events. Mark events intern their labels
  // and values into its strings as they are read: it stays valid, and grows, while reading.
  const Trace& trace() const;
  // The next events, in order, into `events` (cleared first): false, with none, at the end.
  // Throws InputError "PATH:LINE: ..." on the first bad line, as read_trace() would.
  bool next(std::vector<Event>& events);
  // The figures summarize() gives, over the events read so far.
  TraceSummary summary() const;

  static constexpr std::size_t kDefaultWindow = std::size_t{1} << 20;

 private:
  struct Impl;
  explicit TraceStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fraglab
