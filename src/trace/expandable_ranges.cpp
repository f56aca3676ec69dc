// Expandable ranges at the start of a cut-off trace: see include/fraglab/start_state.hpp.
#include <algorithm>
#include <map>
#include <tuple>

#include "fraglab/start_state.hpp"

namespace fraglab {

std::vector<ExpandableRangeStart> infer_expandable_ranges(const Trace& trace, Bytes small_range, Bytes large_range) {
  constexpr Bytes kSmallRequest = 1048576;  // requests up to 1 MiB round into the small pool (§2)
  // The initial runs, grouped per (stream, pool) as adopt() groups them.
  std::vector<const InitialSegment*> runs;
  for (const InitialSegment& s : trace.initial.segments) {
    if (s.expandable) runs.push_back(&s);
  }
  std::stable_sort(runs.begin(), runs.end(), [](const InitialSegment* x, const InitialSegment* y) {
    return std::tie(x->stream, x->small_pool, x->addr) < std::tie(y->stream, y->small_pool, y->addr);
  });
  std::vector<ExpandableRangeStart> ranges;
  std::vector<Addr> last_end;  // per range: end of its highest run
  for (std::size_t i = 0; i < runs.size();) {
    const InitialSegment& first = *runs[i];
    const Bytes range = first.small_pool ? small_range : large_range;
    Addr end = first.addr + first.size;
    std::size_t j = i + 1;
    while (j < runs.size() && runs[j]->stream == first.stream && runs[j]->small_pool == first.small_pool &&
           runs[j]->addr + runs[j]->size <= first.addr + range) {
      end = runs[j]->addr + runs[j]->size;
      ++j;
    }
    ranges.push_back({first.stream, first.small_pool, first.addr, first.addr});
    last_end.push_back(end);
    i = j;
  }
  if (ranges.empty()) return ranges;

  // Recorded maps, each with the pool of the request it served.
  const auto& events = trace.events;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.op != Op::SegmentMap) continue;
    std::size_t k = i + 1;
    while (k < events.size() && events[k].op != Op::Alloc) ++k;
    if (k == events.size()) continue;  // no request follows: its pool is unknown
    const bool small = events[k].size <= kSmallRequest;
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      ExpandableRangeStart& g = ranges[r];
      const Bytes range = g.small_pool ? small_range : large_range;
      if (g.stream != e.stream || g.small_pool != small || e.addr >= g.first_run) continue;
      // The range must still hold every run: base >= last run end - range.
      if (e.addr + range < last_end[r]) continue;
      // Inside an earlier range of the same stream and pool: that one's, not this one's.
      const bool earlier = std::any_of(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(r),
                                       [&](const ExpandableRangeStart& o) {
                                         return o.stream == g.stream && o.small_pool == g.small_pool &&
                                                e.addr >= o.base && e.addr < o.first_run + range;
                                       });
      if (!earlier) g.base = std::min(g.base, e.addr);
    }
  }
  return ranges;
}

}  // namespace fraglab
