// The fragmentation anatomy: definitions in fraglab/anatomy.hpp, README "Fragmentation anatomy".
#include "fraglab/anatomy.hpp"

namespace fraglab {

FreeAnatomy classify_free_pieces(const std::vector<SegmentView>& segments, std::optional<StreamId> own_stream) {
  FreeAnatomy out;
  for (const SegmentView& segment : segments) {
    Bytes& part = own_stream && segment.stream != *own_stream ? out.stream_bound
                  : segment.pool == "small"                   ? out.small_pool
                                                              : out.usable;
    for (const SegmentView::Piece& piece : segment.blocks) {
      ++out.pieces;
      if (!piece.allocated) part += piece.size;
    }
    ++out.pieces;
  }
  return out;
}

FreeAnatomy Policy::free_anatomy(std::optional<StreamId> /*stream*/) const { return classify_free_pieces(segments()); }

Anatomy anatomy_of(const Policy& policy, const AnatomyInput& input, std::uint64_t* pieces) {
  const FreeAnatomy free = policy.free_anatomy(input.stream);
  if (pieces != nullptr) *pieces = free.pieces;
  Anatomy a;
  a.event = input.event;
  a.reserved = input.reserved;
  a.requested = input.requested;
  // Every held block, live or pending, counts whole: its requested bytes are in `requested`
  // until the free completes (fraglab/replay.hpp), the rest of the block here.
  a.rounding = input.held - input.requested;
  a.cached_free_usable = free.usable;
  a.stream_bound = free.stream_bound;
  a.oversize_locked = free.oversize_locked;
  a.small_pool = free.small_pool;
  // Held blocks on the host take no reserved bytes (gemini's offloaded chunks): listed apart.
  a.host_resident = policy.held_on_host();
  // What is left: reserved bytes outside the held blocks on the device and the listed free pieces.
  a.other = static_cast<std::int64_t>(input.reserved) - static_cast<std::int64_t>(input.held - a.host_resident) -
            static_cast<std::int64_t>(free.total());
  return a;
}

// ---- AnatomyAtPeak ---------------------------------------------------------------------------

namespace {
// Segment pieces an AnatomyAtPeak may walk per event seen before it gives up (plus a start-up
// allowance). Walking a piece costs about what replaying an event does, so the observer costs at
// most about one more replay before it hands over to a second replay (README "Fragmentation
// anatomy" has the measurements): a trace whose every event is a new peak stays linear.
constexpr std::uint64_t kPiecesPerEvent = 1;
constexpr std::uint64_t kPieceAllowance = std::uint64_t{1} << 12;
}  // namespace

void AnatomyAtPeak::on_initial_block(const InitialAllocation& allocation, const Block& block) {
  counters_.on_initial_block(block);
  requested_at_start_ += allocation.requested;
  ++seen_;
}

void AnatomyAtPeak::on_start(const Trace& /*trace*/, const Policy& policy) {
  policy_ = &policy;
  best_reserved_ = device_.reserved();
  compute(AnatomyInput{-1, best_reserved_, requested_at_start_, counters_.held_at_start(), std::nullopt});
}

void AnatomyAtPeak::on_event(const ReplayPoint& point) {
  counters_.on_event(point);
  ++seen_;
  // The same rule as Metrics::peak_reserved_event: the first event after which reserved is higher
  // than after any earlier one.
  if (point.reserved <= best_reserved_) return;
  best_reserved_ = point.reserved;
  if (stale_) return;
  compute(AnatomyInput{static_cast<std::int64_t>(point.event_index), point.reserved, point.requested, point.held,
                       counters_.stream()});
}

void AnatomyAtPeak::compute(const AnatomyInput& input) {
  if (work_ > kPieceAllowance + kPiecesPerEvent * seen_) {
    stale_ = true;
    return;
  }
  std::uint64_t pieces = 0;
  anatomy_ = anatomy_of(*policy_, input, &pieces);
  work_ += pieces;
}

// ---- AnatomyAtEvent --------------------------------------------------------------------------

void AnatomyAtEvent::on_initial_block(const InitialAllocation& allocation, const Block& block) {
  counters_.on_initial_block(block);
  requested_at_start_ += allocation.requested;
}

void AnatomyAtEvent::on_start(const Trace& /*trace*/, const Policy& policy) {
  policy_ = &policy;
  if (event_ < 0) {
    anatomy_ =
        anatomy_of(policy, AnatomyInput{-1, device_.reserved(), requested_at_start_, counters_.held_at_start(), {}});
  }
}

void AnatomyAtEvent::on_event(const ReplayPoint& point) {
  counters_.on_event(point);
  if (static_cast<std::int64_t>(point.event_index) != event_) return;
  anatomy_ =
      anatomy_of(*policy_, AnatomyInput{event_, point.reserved, point.requested, point.held, counters_.stream()});
}

}  // namespace fraglab
