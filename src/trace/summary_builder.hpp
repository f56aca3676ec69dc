// SummaryBuilder: the figures of TraceSummary (fraglab/trace.hpp) accumulated one event at a time,
// so that summarize() over a whole trace and a streamed reader (fraglab/trace_stream.hpp), which
// never holds the trace, compute them by the same code. The lifetime rules stay with the caller's
// LiveAllocations: it says whether an event applied and what a completing free released.
#pragma once

#include <algorithm>
#include <unordered_set>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::detail {

class SummaryBuilder {
 public:
  // An allocation live at the start (a pending one included: it holds its memory until its
  // free_completed). `added`: its id was not live yet.
  void initial(Bytes requested, bool added) {
    if (added) current_ += requested;
    sum_.peak_requested = std::max(sum_.peak_requested, current_);
  }
  void observed() { ++sum_.observed_events; }
  // `applied`: the alloc was allowed (a new live id).
  void alloc(const Event& e, bool applied) {
    ++sum_.allocs;
    // Consecutive allocs mostly share a stream: skip the hash set for a repeat.
    if (!has_stream_ || e.stream != last_stream_) {
      streams_.insert(e.stream);
      last_stream_ = e.stream;
      has_stream_ = true;
    }
    sum_.total_requested += e.size;
    sum_.max_request = std::max(sum_.max_request, e.size);
    if (applied) {
      current_ += e.size;
      sum_.peak_requested = std::max(sum_.peak_requested, current_);
    }
  }
  // A free or free_completed; `applied`: it was allowed, releasing `released` requested bytes.
  void freed(bool applied, Bytes released) {
    ++sum_.frees;
    if (applied) current_ -= released;
  }

  TraceSummary finish(std::uint64_t events) const {
    TraceSummary sum = sum_;
    sum.events = events;
    sum.streams = streams_.size();
    return sum;
  }

 private:
  TraceSummary sum_;
  Bytes current_ = 0;
  std::unordered_set<StreamId, SeededHash> streams_;  // seeded: streams come from the trace
  StreamId last_stream_ = 0;
  bool has_stream_ = false;
};

}  // namespace fraglab::detail
