// diff_by_frame() (fraglab/frame_diff.hpp): each trace walked once, every allocation charged to
// the group of its top frame until its free completes (trace.hpp lifetime rules).
#include "fraglab/frame_diff.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {

namespace {

using Groups = std::map<std::string, FrameGroupSide>;

std::string group_of(const Trace& trace, std::uint32_t stack, const FrameFilter& filter) {
  const auto frames = trace.stack_at(stack);
  if (!frames) return std::string(kNoStackGroup);
  const auto top = filter.top_frame(trace, *frames);
  return top ? frame_text(trace.frames[*top]) : std::string(kOnlyIgnoredGroup);
}

Groups profile(const Trace& trace, const FrameFilter& filter) {
  Groups groups;
  struct Held {
    FrameGroupSide* group;
    Bytes size;
  };
  std::unordered_map<AllocId, Held, SeededHash> live;
  std::unordered_map<const FrameGroupSide*, Bytes> live_by_group;  // bytes live now, by group
  auto add = [&](AllocId id, Bytes size, std::uint32_t stack) {
    FrameGroupSide& g = groups[group_of(trace, stack, filter)];
    ++g.allocs;
    g.requested += size;
    Bytes& now = live_by_group[&g];
    now += size;
    g.peak_live = std::max(g.peak_live, now);
    live[id] = Held{&g, size};
  };
  for (const InitialAllocation& a : trace.initial.allocations) add(a.id, a.requested, a.stack);
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.op == Op::Alloc) {
      add(e.id, e.size, i < trace.event_stacks.size() ? trace.event_stacks[i] : kNoString);
    } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
      if (auto it = live.find(e.id); it != live.end()) {
        live_by_group[it->second.group] -= it->second.size;
        live.erase(it);
      }
    }
  }
  return groups;
}

Bytes change(const FrameGroupDiff& g) {
  return g.a.peak_live > g.b.peak_live ? g.a.peak_live - g.b.peak_live : g.b.peak_live - g.a.peak_live;
}

}  // namespace

FrameDiff diff_by_frame(const Trace& a, const Trace& b, const FrameFilter& filter) {
  FrameDiff diff;
  diff.name_a = a.name;
  diff.name_b = b.name;
  diff.a_has_frames = !a.stacks.empty();
  diff.b_has_frames = !b.stacks.empty();
  const Groups ga = profile(a, filter);
  const Groups gb = profile(b, filter);
  std::map<std::string, FrameGroupDiff> merged;
  for (const auto& [frame, side] : ga) {
    merged[frame].frame = frame;
    merged[frame].a = side;
  }
  for (const auto& [frame, side] : gb) {
    merged[frame].frame = frame;
    merged[frame].b = side;
  }
  for (auto& [frame, g] : merged) diff.groups.push_back(std::move(g));
  std::stable_sort(diff.groups.begin(), diff.groups.end(), [](const FrameGroupDiff& x, const FrameGroupDiff& y) {
    if (change(x) != change(y)) return change(x) > change(y);
    const Bytes px = std::max(x.a.peak_live, x.b.peak_live), py = std::max(y.a.peak_live, y.b.peak_live);
    return px > py;  // stable: ties keep the frame-text order of `merged`
  });
  return diff;
}

}  // namespace fraglab
