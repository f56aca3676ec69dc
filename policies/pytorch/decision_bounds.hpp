// Decision bounds: what one replay's decisions reveal about the settings that would have made
// every one of them the same (the sweep's shortcut, coverage.cpp).
//
// The knobs a sweep varies reach PyTorch's decisions only through a few comparisons, and each
// comparison site records the interval of knob values for which it comes out as it did:
//  - max_split_size (ms): every use is `x < ms` or `x >= ms` (best fit §3.2, should_split §4.1,
//    the oversize rung §5.2, the start state §12.2), so the set is one interval ms_above < ms <=
//    ms_at_most. Where ms itself becomes a size (the §5.2 key, the start evidence), it is pinned.
//  - garbage_collection_threshold: it acts only through the byte threshold t = threshold x
//    allowed (§3.3): the trigger `total <= t` and the loop's `reclaimed < total - t`, both
//    comparisons of t, so one interval gc_min <= t <= gc_max (only calls that free memory
//    count, see gc_idle); a miss where no collection runs (threshold 0) would not have collected
//    under any t >= the total reserved then.
//  - roundup_power2_divisions: it acts only through round_size() of each request (§1.2), so a
//    rule that rounds every requested size the same is equivalent: the sizes are kept (only
//    when recording, i.e. when a sweep asks).
// Statistics that echo the setting (oversize_*, max_split_size) are no decision: not recorded.
// Each hook returns the comparison's result and costs a compare and a min or max; by induction
// on the events, a setting inside every bound makes every decision this replay made.
#pragma once

#include <algorithm>
#include <vector>

#include "pytorch/constants.hpp"

namespace fraglab::cca {

struct DecisionBounds {
  Bytes ms_above = 0;             // ms > ms_above
  Bytes ms_at_most = kUnlimited;  // ms <= ms_at_most (kUnlimited: "none")
  Bytes gc_min = 0;               // gc_min <= t
  Bytes gc_max = kUnlimited;      // t <= gc_max
  bool gc_acted = false;          // a collection passed its trigger: a setting without GC differs
  bool rounding_pinned = false;   // the start state used the rounding rules: only the same rules
  bool recording = false;         // keep request sizes (record_coverage())
  std::vector<Bytes> sizes;       // every size round_size() saw, while recording

  // `x < ms`: holds for every ms > x, fails for every ms <= x. The bounds are read only after a
  // replay that recorded (make_coverage returns nullptr otherwise) and recording starts before the
  // first request (record_coverage()), so a replay that does not record skips the bookkeeping: a
  // test instead of a max or min and its store at each of malloc's comparisons.
  bool below_ms(Bytes x, Bytes ms) {
    const bool below = x < ms;
    if (!recording) return below;
    if (below) {
      ms_above = std::max(ms_above, x);
    } else {
      ms_at_most = std::min(ms_at_most, x);
    }
    return below;
  }
  bool at_least_ms(Bytes x, Bytes ms) { return !below_ms(x, ms); }
  // `ms == unlimited` ("none"), i.e. kUnlimited - 1 < ms.
  bool ms_unlimited(Bytes ms) { return below_ms(kUnlimited - 1, ms); }
  // ms used as a value: only this very ms decides the same.
  void pin_ms(Bytes ms) {
    ms_above = std::max(ms_above, ms - 1);
    ms_at_most = std::min(ms_at_most, ms);
  }

  // §3.3's trigger `total <= t`: true -> GC returns at once. Past it, the call's comparisons are
  // kept aside until gc_end(): a call that frees nothing decides nothing. (Its first pass always
  // runs, and which blocks it frees does not depend on t: ages against their average. A call whose
  // first pass frees nothing frees nothing under any threshold, or under none.)
  bool gc_idle(Bytes total, Bytes t) {
    const bool idle = total <= t;
    if (idle) {
      gc_min = std::max(gc_min, total);
    } else {
      call_min_ = 0;
      call_max_ = total - 1;
    }
    return idle;
  }
  // A miss (§5 step 4) where GC is off: any t >= total would not have acted either.
  void gc_off_at_miss(Bytes total) { gc_min = std::max(gc_min, total); }
  // §3.3's loop test `reclaimed < target`, target = total - t with total = target + t at the
  // trigger: t < total - reclaimed (reclaimed <= total: freed bytes were reserved).
  bool gc_short(Bytes reclaimed, Bytes target, Bytes t) {
    const bool shorter = reclaimed < target;
    const Bytes room = target + t - reclaimed;
    if (shorter) {
      call_max_ = std::min(call_max_, room - 1);
    } else {
      call_min_ = std::max(call_min_, room);
    }
    return shorter;
  }
  // The end of a call past its trigger: if it freed memory, its comparisons decided.
  void gc_end(Bytes reclaimed) {
    if (reclaimed == 0) return;
    gc_min = std::max(gc_min, call_min_);
    gc_max = std::min(gc_max, call_max_);
    gc_acted = true;
  }

  // The size a request is rounded from (§1.2), kept while recording.
  void saw_request(Bytes size) {
    if (recording) sizes.push_back(size);
  }
  // The start state (§12.2) derived block sizes with ms and the rounding rules as values.
  void pin_start(Bytes ms) {
    pin_ms(ms);
    rounding_pinned = true;
  }

 private:
  Bytes call_min_ = 0;  // the current GC call's comparisons (gc_idle .. gc_end)
  Bytes call_max_ = kUnlimited;
};

}  // namespace fraglab::cca
