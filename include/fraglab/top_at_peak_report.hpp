// Rendering `inspect --top-at-peak N` (src/report/top_at_peak.cpp): the N largest allocations
// live at a peak, with their kept stack frames, as text and JSON (README "Stack frames").
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "fraglab/frames.hpp"
#include "fraglab/peak_allocations.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

struct TopAtPeak {
  std::string basis;        // "requested" (the program's own peak) or "reserved" (a policy's peak)
  std::string policy;       // the policy whose reserved peak it is; empty for "requested"
  Bytes peak_reserved = 0;  // that policy's peak reserved bytes (basis "reserved")
  LiveSet live;
  std::size_t count = 0;  // N: at most this many allocations are listed
};

// One block per allocation: size, id, alloc event, stream, then its frames from its top frame
// (FrameFilter::top_frame) outwards, those `filter` ignores left out, at most `frames_shown`, one
// per line as filename:line:name.
std::string top_at_peak_text(const Trace& trace, const TopAtPeak& top, const FrameFilter& filter,
                             std::size_t frames_shown);
// Every kept frame of each listed allocation, and "top_frame": the first not in `filter`.
nlohmann::json top_at_peak_json(const Trace& trace, const TopAtPeak& top, const FrameFilter& filter);

}  // namespace fraglab
