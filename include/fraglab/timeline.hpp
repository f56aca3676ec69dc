// TimelineWriter: a ReplayObserver that writes one CSV row per event (or every Nth event, plus
// every event that changes reserved bytes, so no segment action is lost to sampling) as the
// replay runs: columns policy,event,op,requested_bytes,allocated_bytes,reserved_bytes,step,
// device_time_s,stall_time_s. `step` is the value of the latest `mark` whose label is "step"
// (empty before the first); the times are Metrics' device_time_s / stall_time_s up to and with
// that event (README "Device time").
// With `anatomy`, each written row adds the fragmentation anatomy of that point (fraglab/anatomy.hpp):
// rounding_bytes,cached_free_usable_bytes,stream_bound_bytes,oversize_locked_bytes,small_pool_bytes,
// other_bytes — computed for written rows only (each costs a walk of the policy's segments).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "fraglab/anatomy.hpp"
#include "fraglab/replay.hpp"

namespace fraglab {

class TimelineWriter final : public ReplayObserver {
 public:
  TimelineWriter(std::ostream& out, const std::string& policy, std::uint64_t every = 1, bool anatomy = false);
  static void write_header(std::ostream& out, bool anatomy = false);

  void on_initial_block(const InitialAllocation& allocation, const Block& block) override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;
  void on_finish() override;

 private:
  std::ostream& out_;
  std::string policy_;
  std::uint64_t every_;
  const Trace* trace_ = nullptr;
  std::uint32_t step_label_ = kNoString;
  std::string step_;
  Bytes last_reserved_ = 0;
  bool anatomy_ = false;
  const Policy* policy_obj_ = nullptr;
  AnatomyCounters counters_;
  std::string buffer_;
};

}  // namespace fraglab
