// StreamFreeSpace: the free address space of the pool, and which streams may reuse which part of
// it right now (the stream-ordered reuse rules of the CUDA programming guide, "Memory Reuse
// Policies"; see cuda_async.cpp for the model as a whole).
//
// Free bytes come in three kinds:
//  - shared: any stream may reuse them (new pages, a deferred free whose completion is known,
//    everything after a synchronisation point);
//  - pending on stream S: freed by a plain free on S; S may reuse them at once (stream order),
//    other streams only after the next synchronisation point;
//  - awaiting sync: a completed deferred free when opportunistic reuse is off; no stream may
//    reuse them before the next synchronisation point.
// all_ holds every free byte whatever its kind, coalesced, so a stream alone on the pool sees one
// best-fit heap with full coalescing; shared_, pending_ and awaiting_ record the kinds (each a
// subset of all_, coalesced only with bytes of its own kind).
//
// Invariants:
//  - all_ = shared_ ∪ awaiting_ ∪ (∪ pending_[S]), and those sets are pairwise disjoint;
//  - every range of every set lies in [pool base, top) (the caller's address range);
//  - pending_ entries are kept in the order their stream first freed (never in pointer or hash
//    order), so every decision is deterministic.
//
// Simplified: when other streams have pending bytes, a stream looks for a fit (a) in the best-fit
// range of all_ if none of those bytes lie under the block, (b) among shared bytes, (c) among its
// own pending bytes; a run made of shared bytes and its own pending bytes next to another
// stream's pending bytes is not found as one piece until the next synchronisation point.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "common/free_ranges.hpp"
#include "fraglab/types.hpp"

namespace fraglab::cuda_async {

class StreamFreeSpace {
 public:
  // A plain free on `stream` (cudaFreeAsync on the creation stream).
  void add_pending(Addr addr, Bytes size, StreamId stream);
  // Reusable by every stream from now on.
  void add_shared(Addr addr, Bytes size);
  // Reusable by no stream until the next synchronisation point.
  void add_awaiting_sync(Addr addr, Bytes size);
  // A synchronisation point: every free byte becomes shared.
  void synchronize();

  // Which kind of free bytes a placement was found among; take() then updates only that kind.
  enum class Source { AnyKind, Shared, OwnPending };
  struct Fit {
    Addr addr;
    Source source;
  };
  // The best-fit placement of `size` bytes for `stream` among the bytes it may reuse now
  // (smallest candidate range, lowest address on ties).
  std::optional<Fit> best_fit(Bytes size, StreamId stream) const;
  // The same, ignoring which stream freed what (the driver's internal dependencies: the stream
  // waits on the others instead).
  std::optional<Fit> best_fit_any(Bytes size) const;
  // Where a block that grows the pool past `top` starts: at the free run that touches `top`
  // (from the last byte of it another stream may not reuse yet), or at `top`.
  Addr growth_start(Addr top, StreamId stream) const;
  // Takes [addr, addr + size) out of the free space; it must lie inside one range of all() (and
  // of the kind `source` names). True when some of it was pending on a stream other than
  // `stream` or awaiting sync.
  bool take(Addr addr, Bytes size, StreamId stream, Source source = Source::AnyKind);

  const FreeRanges& all() const { return all_; }
  Bytes pending_bytes() const;  // on any stream
  Bytes awaiting_sync_bytes() const { return awaiting_.total(); }
  // The free bytes `stream` may not reuse before the next synchronisation point, one set per kind:
  // those awaiting sync and every other stream's pending bytes (pairwise disjoint subsets of all()).
  std::vector<const FreeRanges*> restricted_for(StreamId stream) const;
  // Checks the invariants above: each set coalesced and indexed, the kinds disjoint and together
  // exactly all_.
  void audit(kit::AuditLog& log) const;

 private:
  struct Pending {
    StreamId stream;
    FreeRanges ranges;
  };
  FreeRanges& pending_of(StreamId stream);
  // True when some other stream's pending bytes, or bytes awaiting sync, exist.
  bool others_restricted(StreamId stream) const;
  bool blocked(Addr addr, Bytes size, StreamId stream) const;

  FreeRanges all_;
  FreeRanges shared_;
  // Never searched by size: no size index to keep up to date (pending sets: pending_of).
  FreeRanges awaiting_{FreeRanges::SizeIndex::None};
  std::vector<Pending> pending_;  // one entry per stream that ever freed, in first-free order
  std::size_t last_pending_ = 0;  // cache: frees come in long runs on one stream
};

}  // namespace fraglab::cuda_async
