// Fragmentation anatomy (README "Metrics", "Fragmentation anatomy"): the gap between reserved and
// requested bytes split into parts that add up to it exactly.
//
//   reserved − requested = rounding + cached_free_usable + stream_bound + oversize_locked
//                          + small_pool + other                  (− host_resident, see below)
//
//  rounding          Σ (block size − requested) over every block held for the program: live, or
//                    freed but with its free still pending (free_requested, not completed). A
//                    pending block is neither allocated nor free; its requested bytes still count
//                    in `requested` (fraglab/replay.hpp), so its whole block is accounted here.
//  the four free parts  free bytes inside the policy's segments, as its Policy::free_anatomy()
//                    classifies them relative to a reference stream (below);
//  other             reserved bytes that are neither held blocks nor free pieces of a segment: what
//                    the device maps for the policy outside its segment listing (each policy
//                    family's content is in the README). Signed: it is negative when the policy
//                    lists held bytes as free (a bug: InvariantChecker's invariant 7), or after a
//                    cache flush that completed pending frees early (PyTorch synchronises every
//                    stream on its retry and on empty_cache, allocator-model §5.3): until the
//                    trace's free_completed, such a block counts in requested and rounding while
//                    the policy already lists it as free or has released it.
//
//  host_resident     not a part: block bytes of held blocks whose data the policy keeps in host
//                    memory (Policy::held_on_host; gemini's offloaded chunks). They count in
//                    requested and rounding but take no reserved bytes, so the parts add up to
//                    reserved + host_resident − requested and `other` is not pushed below 0 by them.
//
// The reference stream is the stream of the latest alloc request at or before the point (served
// or not): "stream-bound" bytes are the free bytes that request could not have used because they
// belong to another stream. Before the first request there is none, and nothing is stream-bound.
#pragma once

#include <cstdint>
#include <optional>

#include "fraglab/device.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/replay.hpp"

namespace fraglab {

// The replay's counters at one point, as the anatomy needs them.
struct AnatomyInput {
  std::int64_t event = -1;         // the event after which the state is taken; -1 = the start
  Bytes reserved = 0;              // the device's reserved bytes
  Bytes requested = 0;             // ReplayPoint::requested
  Bytes held = 0;                  // ReplayPoint::held: block bytes of live and pending allocations
  std::optional<StreamId> stream;  // the reference stream (see above)
};

// The anatomy (struct Anatomy, fraglab/replay.hpp) of `policy`'s current state. O(the policy's
// segment listing). `pieces`, when given, receives the pieces walked.
Anatomy anatomy_of(const Policy& policy, const AnatomyInput& input, std::uint64_t* pieces = nullptr);

// Tracks the reference stream and the held bytes through a replay, for observers that compute the
// anatomy at points of their choosing (the timeline, a report sampling over time).
class AnatomyCounters {
 public:
  void on_initial_block(const Block& block) { held_ += block.size; }
  void on_event(const ReplayPoint& point) {
    if (point.event != nullptr && point.event->op == Op::Alloc) stream_ = point.event->stream;
  }
  std::optional<StreamId> stream() const { return stream_; }
  Bytes held_at_start() const { return held_; }

 private:
  Bytes held_ = 0;  // only before the first event (ReplayPoint::held afterwards)
  std::optional<StreamId> stream_;
};

// Observer: the anatomy after the event at which reserved first reached its peak
// (Metrics::peak_reserved_event; the start when it never rose). It recomputes only when reserved
// rises above every earlier value, and gives up (stale()) once the segments it has walked exceed
// a budget linear in the events seen, so a hostile trace costs O(events), not O(events ×
// segments); run_replay then replays again to the peak event (AnatomyAtEvent).
class AnatomyAtPeak final : public ReplayObserver {
 public:
  explicit AnatomyAtPeak(const Device& device) : device_(device) {}
  void on_initial_block(const InitialAllocation& allocation, const Block& block) override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;

  bool stale() const { return stale_; }
  const Anatomy& anatomy() const { return anatomy_; }
  std::uint64_t pieces_walked() const { return work_; }

 private:
  void compute(const AnatomyInput& input);
  const Device& device_;
  const Policy* policy_ = nullptr;
  AnatomyCounters counters_;
  Bytes requested_at_start_ = 0;
  Bytes best_reserved_ = 0;
  std::uint64_t work_ = 0;  // segment pieces walked so far
  std::uint64_t seen_ = 0;  // initial blocks and events seen
  bool stale_ = false;
  Anatomy anatomy_;
};

// Observer: the anatomy after one given event (-1 = the start).
class AnatomyAtEvent final : public ReplayObserver {
 public:
  AnatomyAtEvent(const Device& device, std::int64_t event) : device_(device), event_(event) {}
  void on_initial_block(const InitialAllocation& allocation, const Block& block) override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;
  const std::optional<Anatomy>& anatomy() const { return anatomy_; }

 private:
  const Device& device_;
  std::int64_t event_;
  const Policy* policy_ = nullptr;
  AnatomyCounters counters_;
  Bytes requested_at_start_ = 0;
  std::optional<Anatomy> anatomy_;
};

}  // namespace fraglab
