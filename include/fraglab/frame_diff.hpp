// `fraglab diff A B --by-frame`: the requested bytes of two traces grouped by the top stack frame
// of each allocation (the first frame a FrameFilter does not skip), side by side: which source
// line's memory changed between A and B (README "Stack frames"). Policy independent: it reads
// only the traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fraglab/frames.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

// Group names for allocations without a usable frame.
inline constexpr std::string_view kNoStackGroup = "(no stack)";
inline constexpr std::string_view kOnlyIgnoredGroup = "(only PyTorch frames)";

struct FrameGroupSide {
  std::uint64_t allocs = 0;  // allocations (initial ones included)
  Bytes requested = 0;       // their requested bytes, summed
  Bytes peak_live = 0;       // most of their bytes live at once
};

struct FrameGroupDiff {
  std::string frame;  // filename:line:name, or one of the group names above
  FrameGroupSide a, b;
};

struct FrameDiff {
  std::string name_a, name_b;
  bool a_has_frames = false, b_has_frames = false;  // the trace kept any stack
  // Largest change of peak live bytes first, then the larger peak, then by frame text.
  std::vector<FrameGroupDiff> groups;
};

FrameDiff diff_by_frame(const Trace& a, const Trace& b, const FrameFilter& filter);

}  // namespace fraglab
