// What a cut-off trace (allocator-model §12) implies about its start state beyond what the snapshot
// records: where the virtual ranges of expandable segments begin.
#pragma once

#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab {

// One virtual range of expandable segments live at the start: the mapped runs of one (stream,
// pool) that fit in one range, and the address the range starts at.
//
// A range is one reservation of range_size bytes (allocator-model §7.1); the snapshot shows only its
// mapped runs (§7.6). Everything below the lowest run is unmapped at the start, and growth maps
// the lowest unmapped block that has room, from its start (§7.2): so the first map the trace
// records below the lowest run (of the same stream and pool, within one range of the runs) is
// the range's base. Without such a map the range is taken to start at its lowest run, which no
// recorded decision contradicts.
struct ExpandableRangeStart {
  StreamId stream = 0;
  bool small_pool = false;
  Addr first_run = 0;  // lowest mapped run of the range at the start
  Addr base = 0;       // inferred start of the range (<= first_run)
  bool operator==(const ExpandableRangeStart&) const = default;
};

// `small_range` / `large_range`: bytes one range spans in each pool. Runs of one (stream, pool)
// are grouped in address order while they fit in one range from the group's lowest run. A map's
// pool is that of the request it served (the next alloc: <= 1 MiB requested -> small, §2).
std::vector<ExpandableRangeStart> infer_expandable_ranges(const Trace& trace, Bytes small_range, Bytes large_range);

}  // namespace fraglab
