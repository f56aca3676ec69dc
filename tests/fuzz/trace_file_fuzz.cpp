// A trace file as the commands read it (read_trace, read_trace_devices; src/trace/trace_file.cpp,
// input_sniff.cpp): the first bytes choose the reader (pickle, gzip then sniffed again, JSONL,
// or a one-line refusal of anything else), so this is where gzip input (bombs included) is fuzzed.
// Properties:
//  - bad input is an InputError, never anything else;
//  - read_trace and read_trace_devices agree: when the file holds one device's trace, it is the
//    same Trace.
#include "fraglab/trace_io.hpp"
#include "fuzz_support.hpp"
#include "trace_compare.hpp"

namespace fraglab::fuzz {

void fuzz_one(std::string_view data) {
  const std::string path = scratch_file("trace", data);
  Trace trace;
  std::vector<std::pair<int, Trace>> devices;
  const std::string error = input_error_of([&] { trace = read_trace(path); });
  const std::string devices_error = input_error_of([&] { devices = read_trace_devices(path); });
  if (error.empty() && devices_error.empty() && devices.size() == 1) {
    const std::string why = trace_difference(trace, devices[0].second);
    if (!why.empty()) fail("read_trace and read_trace_devices differ: " + why);
  }
}

}  // namespace fraglab::fuzz
