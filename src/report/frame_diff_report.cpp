// diff --by-frame, rendered (fraglab/frame_diff_report.hpp).
#include "fraglab/frame_diff_report.hpp"

#include <fmt/format.h>

#include "fraglab/types.hpp"

namespace fraglab {

namespace {

std::string signed_bytes(Bytes a, Bytes b) { return b >= a ? "+" + format_bytes(b - a) : "-" + format_bytes(a - b); }

}  // namespace

std::string frame_diff_report(const FrameDiff& diff) {
  std::string out = fmt::format("\nby top stack frame (peak live requested bytes of each frame's allocations):\n");
  for (const auto& [name, has] :
       {std::pair{diff.name_a, diff.a_has_frames}, std::pair{diff.name_b, diff.b_has_frames}}) {
    if (!has) out += fmt::format("  note: {} has no stack frames (recorded without them, or none kept)\n", name);
  }
  out += fmt::format("  {:>12} {:>12} {:>13} {:>7} {:>7}  {}\n", "peak A", "peak B", "change", "allocsA", "allocsB",
                     "frame");
  for (const FrameGroupDiff& g : diff.groups) {
    out += fmt::format("  {:>12} {:>12} {:>13} {:>7} {:>7}  {}\n", format_bytes(g.a.peak_live),
                       format_bytes(g.b.peak_live), signed_bytes(g.a.peak_live, g.b.peak_live), g.a.allocs, g.b.allocs,
                       g.frame);
  }
  return out;
}

nlohmann::json frame_diff_json(const FrameDiff& diff) {
  nlohmann::json groups = nlohmann::json::array();
  auto side = [](const FrameGroupSide& s) {
    return nlohmann::json{{"allocs", s.allocs}, {"requested_bytes", s.requested}, {"peak_live_bytes", s.peak_live}};
  };
  for (const FrameGroupDiff& g : diff.groups)
    groups.push_back({{"frame", g.frame}, {"a", side(g.a)}, {"b", side(g.b)}});
  return {{"a_has_frames", diff.a_has_frames}, {"b_has_frames", diff.b_has_frames}, {"groups", groups}};
}

}  // namespace fraglab
