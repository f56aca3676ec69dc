// The JSONL trace reader (parse_jsonl, src/trace/jsonl_reader.cpp) on any text.
// Properties (jsonl_writer.cpp's promise):
//  - bad input is an InputError, never anything else;
//  - a trace that reads writes back and reads again to the same Trace, event by event, and
//    writing that again gives the same bytes;
//  - what the commands compute from any Trace that reads (summarize, the trace identity) runs.
#include <sstream>

#include "fraglab/trace_identity.hpp"
#include "fraglab/trace_io.hpp"
#include "fuzz_support.hpp"
#include "trace_compare.hpp"

namespace fraglab::fuzz {

void fuzz_one(std::string_view data) {
  const Trace trace = parse_jsonl(data, "fuzz.jsonl");
  (void)summarize(trace);
  (void)trace_identity(trace);

  std::ostringstream out;
  write_jsonl(trace, out);
  const std::string text = out.str();
  Trace back;
  const std::string error = input_error_of([&] { back = parse_jsonl(text, "written.jsonl"); });
  if (!error.empty()) fail("a trace that read was written as JSONL that does not read: " + error);
  const std::string why = trace_difference(trace, back);
  if (!why.empty()) fail("written and read back, the Trace differs: " + why);
  std::ostringstream again;
  write_jsonl(back, again);
  require(again.str() == text, "writing the read-back Trace gives other bytes");
}

}  // namespace fraglab::fuzz
