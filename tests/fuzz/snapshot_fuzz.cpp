// The snapshot reader (parse_snapshot, parse_snapshot_devices; src/trace/snapshot_reader.cpp) on
// any bytes, which are mostly pickles (the corpus is snapshots).
// Properties:
//  - bad input is an InputError, never anything else;
//  - the Traces do not depend on how the pickle was read: the readers' own way (skip_key
//    "frames", fast paths) and everything built through the checked switch alone give the same
//    Traces, event by event, or fail with the same message;
//  - parse_snapshot without a device index reads the only device with data: when
//    parse_snapshot_devices finds exactly one, it is the same Trace; with several, an InputError;
//  - each Trace survives `convert`: written as JSONL and read back it is the same Trace;
//  - with stack frames kept (--frames 4), where the one device reads: the fast paths and the
//    checked switch give the same Trace or the same message, it is the Trace read without frames
//    plus the frame tables, and its frames survive `convert` too.
#include <sstream>

#include "fraglab/trace_io.hpp"
#include "fuzz_support.hpp"
#include "trace/frame_interner.hpp"
#include "trace/snapshot_options.hpp"
#include "trace_compare.hpp"

namespace fraglab::fuzz {

void fuzz_one(std::string_view data) {
  constexpr std::string_view kOrigin = "fuzz.pickle";
  std::vector<std::pair<int, Trace>> devices, reference;
  const std::string error = input_error_of([&] { devices = parse_snapshot_devices(data, kOrigin); });
  const std::string reference_error = input_error_of([&] {
    reference = parse_snapshot_devices(data, kOrigin, pickle::PickleOptions{.skip_key = {}, .fast_paths = false});
  });
  if (error != reference_error)
    fail("all built, checked switch: '" + reference_error + "'; the readers' options: '" + error + "'");
  require(devices.size() == reference.size(), "device counts differ");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    require(devices[i].first == reference[i].first, "device indices differ");
    const std::string why = trace_difference(reference[i].second, devices[i].second);
    if (!why.empty())
      fail(fmt::format("device {}: Traces differ with the readers' options: {}", devices[i].first, why));
  }

  Trace single;
  const std::string single_error = input_error_of([&] { single = parse_snapshot(data, kOrigin); });
  if (error.empty() && devices.size() == 1) {
    if (!single_error.empty()) fail("one device with data, but parse_snapshot failed: " + single_error);
    const std::string why = trace_difference(devices[0].second, single);
    if (!why.empty()) fail("parse_snapshot differs from the one device's Trace: " + why);
  }
  if (error.empty() && devices.size() > 1 && single_error.empty())
    fail("several devices with data, but parse_snapshot chose one without --device-index");

  if (error.empty() && devices.size() == 1) {
    const TraceReadOptions kept{.device_index = -1, .frames = 4};
    Trace with, with_reference;
    const std::string with_error = input_error_of([&] { with = parse_snapshot(data, kOrigin, kept); });
    const std::string with_reference_error = input_error_of([&] {
      with_reference = parse_snapshot(data, kOrigin, kept, pickle::PickleOptions{.skip_key = {}, .fast_paths = false});
    });
    if (with_error != with_reference_error)
      fail("frames kept: checked switch '" + with_reference_error + "'; fast paths '" + with_error + "'");
    if (with_error.empty()) {
      require(with == with_reference, "frames kept: the fast paths and the checked switch give other Traces");
      Trace stripped = with;
      detail::keep_top_frames(stripped, 0);
      const std::string why = trace_difference(single, stripped);
      if (!why.empty()) fail("frames kept: the Trace differs from the one read without frames: " + why);
      std::ostringstream out;
      write_jsonl(with, out);
      Trace back;
      const std::string back_error = input_error_of([&] { back = parse_jsonl(out.str(), "converted.jsonl"); });
      if (!back_error.empty()) fail("frames kept: the converted JSONL does not read: " + back_error);
      require(back == with, "frames kept: converted to JSONL and read back, the Trace differs");
    }
  }

  for (const auto& [device, trace] : devices) {
    std::ostringstream out;
    write_jsonl(trace, out);
    const std::string text = out.str();
    Trace back;
    const std::string back_error = input_error_of([&] { back = parse_jsonl(text, "converted.jsonl"); });
    if (!back_error.empty()) fail(fmt::format("device {}: the converted JSONL does not read: {}", device, back_error));
    const std::string why = trace_difference(trace, back);
    if (!why.empty())
      fail(fmt::format("device {}: converted to JSONL and read back, the Trace differs: {}", device, why));
  }
}

}  // namespace fraglab::fuzz
