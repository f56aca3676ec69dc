// Reading and writing traces: native JSONL (optionally gzip-compressed) and PyTorch memory
// snapshot pickles. read_trace() picks the reader from the file's first bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab {

// Called with (bytes parsed, bytes of the input) while a long input is read, and once at the end.
using ReadProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct TraceReadOptions {
  // Snapshots hold one trace per device: which one to read. -1 = the only device that has
  // events or segments (an error naming the devices when there are several).
  int device_index = -1;
  // Stack frames to keep per allocation (README "Stack frames"): the N innermost frames of each
  // recorded stack, interned into Trace::frames / stacks / event_stacks. 0 (the default): none
  // are read, and ingest runs at full speed.
  std::uint32_t frames = 0;
  // JSONL: called every 65536 lines (snapshot pickles are read in one piece: not called).
  ReadProgress progress = {};
};

// The path that means standard input, and the name messages give it. A trace read from stdin
// is named "stdin" unless its own header names it.
inline constexpr std::string_view kStdinPath = "-";
inline constexpr std::string_view kStdinOrigin = "<stdin>";

// Any supported file, or standard input for "-": a pickle (first byte 0x80), gzip (1f 8b,
// decompressed then sniffed again) or JSONL. Throws InputError naming the file (and line / event)
// on bad input, including input that is no trace at all (a directory, an empty file, a zip
// archive, JSON that is not JSONL, binary data): one line saying what it looks like and what
// was expected.
Trace read_trace(const std::string& path, const TraceReadOptions& options = {});

// Native JSONL (README "Traces"). `origin` names the input in error messages.
Trace parse_jsonl(std::string_view text, std::string_view origin, const ReadProgress& progress = {});
void write_jsonl(const Trace& trace, std::ostream& out);
void write_jsonl_file(const Trace& trace, const std::string& path);  // ".gz" suffix: gzip

// PyTorch snapshot pickle bytes -> Trace for one device, initial state rebuilt (allocator-model §12).
Trace parse_snapshot(std::string_view bytes, std::string_view origin, const TraceReadOptions& options = {});

// Every device of a snapshot that has trace entries or segments: (device index, its Trace).
std::vector<std::pair<int, Trace>> parse_snapshot_devices(std::string_view bytes, std::string_view origin);
// The same for any trace file: a JSONL trace (or a snapshot of one device) gives one entry.
std::vector<std::pair<int, Trace>> read_trace_devices(const std::string& path);

// Whole file ("-": standard input) into memory; gzip input is decompressed. Throws InputError
// naming the file if it is a directory, unreadable, or a stream too large for memory.
std::string read_file_bytes(const std::string& path);

}  // namespace fraglab
