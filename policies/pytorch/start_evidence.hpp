// The block sizes of a cut-off trace's start state that the snapshot does not record, pinned
// down from the trace's own evidence (allocator-model §12.2, §3.1, §4.1-§4.3).
//
// An allocation live at the start but freed before the dump has no recorded block. Its block is
// its rounded request R plus a remainder the split rule left unsplit (§4.1), and it ends at or
// before the next known allocation of its segment (or the segment end): an interval [min, max].
// The trace narrows it:
//  - positive evidence: blocks are carved from the low end of a free block (§4.2) and free
//    neighbours merge (§4.3), so while L lives the free space after its block is one free block
//    starting at L's end; the first recorded alloc placed in [L + R, next known allocation]
//    starts exactly there: L's block is that address minus L's;
//  - negative evidence: a request of L's pool and stream served by a new segment missed every
//    cached block (§3.1, §5), so the free block after L (at least next - L - block bytes while
//    nothing landed there) was too small for it, or excluded by max_split_size (§3.2 step 4);
//    one placed at the start of an initial segment that holds nothing (a free block of exactly
//    its size) found that block a better fit than the one after L (smaller, or equal and lower).
//    Both are read only where the free block after L is known well enough to be sound.
// Whatever is not pinned stays an interval; adopt() then uses the gap rule's guess clamped into it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fraglab/trace.hpp"
#include "pytorch/config.hpp"

namespace fraglab::cca {

struct BlockInterval {
  Bytes min = 0;         // smallest block size consistent with the trace
  Bytes max = 0;         // largest
  Bytes guess = 0;       // the gap rule's guess (a free block reaching the next known allocation, §12.2)
  std::string evidence;  // what narrowed the interval, "" = only the split rule
  std::string error;     // non-empty: the trace contradicts every legal size (the interval is kept)
  bool determined() const { return min == max; }
  Bytes chosen() const { return guess < min ? min : (guess > max ? max : guess); }
};

struct StartEvidence {
  // Per initial allocation, in the order of InitialState::allocations; nullopt = block recorded.
  std::vector<std::optional<BlockInterval>> blocks;
  // Indices of InitialState::allocations by address (std::sort by address from 0, 1, 2, ...):
  // adopt() needs the same order.
  std::vector<std::size_t> by_address;
};

// A pure function of the trace and the allocator's settings. Throws nothing on odd traces: an
// allocation outside every segment is left to adopt(), which names it.
StartEvidence infer_start_blocks(const Trace& trace, const Config& config);

}  // namespace fraglab::cca
