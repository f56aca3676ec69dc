// InvariantChecker: what must hold for every policy, checked during any replay
// (`--check-invariants`; the property tests attach it to every run):
//  1. no two live blocks overlap;
//  2. every block lies inside memory the device backs (a malloc range, mapped pages or aliases),
//     and the device never frees or unmaps memory under a live block;
//  3. a block is at least as large as the request;
//  4. reserved memory never exceeds the device's capacity;
//  5. the policy's num_ooms counts exactly the allocations that failed;
//  6. the policy's own invariants hold: Policy::audit() finds nothing, after every event;
//  7. the fragmentation anatomy adds up (fraglab/anatomy.hpp): the held blocks and the free pieces
//     the policy lists fit in what it reserves (`other` ≥ 0), save the blocks a flush freed early
//     (below), which the replay still counts as held.
// A block is live from its alloc until its free *completes*, with one exception: once the policy
// flushes its cache (num_alloc_retries grows) or the trace calls empty_cache, blocks whose free
// was requested are free, because PyTorch synchronises every stream first there (allocator-model §5.3)
// and may reuse them before the trace's free_completed arrives.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "fraglab/anatomy.hpp"
#include "fraglab/device.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/seeded_hash.hpp"

namespace fraglab {

class InvariantChecker final : public ReplayObserver, public DeviceListener {
 public:
  static constexpr std::size_t kKeptViolations = 20;

  // Registers itself as a listener of `device` (and removes itself when destroyed).
  explicit InvariantChecker(Device& device);
  ~InvariantChecker() override;
  InvariantChecker(const InvariantChecker&) = delete;
  InvariantChecker& operator=(const InvariantChecker&) = delete;

  void on_initial_block(const InitialAllocation& allocation, const Block& block) override;
  void on_start(const Trace& trace, const Policy& policy) override;
  void on_event(const ReplayPoint& point) override;
  void on_finish() override;
  void on_device_call(DeviceCall call, Addr addr, Bytes size) override;

  bool ok() const { return violation_count_ == 0; }
  std::uint64_t violation_count() const { return violation_count_; }
  // The first kKeptViolations, one line each, naming the event.
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  struct Live {
    Block block;
    AllocId id = 0;
    bool free_requested = false;
  };
  void add_block(AllocId id, const Block& block, Bytes requested, bool free_requested);
  void remove_block(AllocId id);
  // The live block overlapping [addr, addr + size), if any (blocks never overlap one another).
  const Live* overlapping(Addr addr, Bytes size) const;
  void violation(const std::string& text);  // prefixed with where_
  void audit_policy();                      // Policy::audit()'s findings as violations

  Device& device_;
  const Policy* policy_ = nullptr;
  const Event* event_ = nullptr;  // the event being checked; nullptr while adopting
  std::uint64_t event_index_ = 0;
  std::uint64_t retries_seen_ = 0;
  std::uint64_t ooms_at_start_ = 0;  // the policy's num_ooms once the start state is rebuilt
  std::uint64_t ooms_seen_ = 0;      // alloc events without a block since
  std::map<Addr, Live> by_address_;
  std::unordered_map<AllocId, Addr, SeededHash> address_of_;  // seeded: ids come from the trace
  struct Release {
    DeviceCall call;
    Addr addr;
    Bytes size;
  };
  std::vector<Release> pending_releases_;  // device frees/unmaps during the current event
  AnatomyCounters anatomy_;
  // Blocks whose free a flush completed early (see above), by id: the replay holds them until the
  // trace's free completes, while the policy may list them as free or have released them.
  std::unordered_map<AllocId, Bytes, SeededHash> flushed_early_;
  Bytes flushed_early_bytes_ = 0;
  std::uint64_t violation_count_ = 0;
  std::vector<std::string> violations_;
};

}  // namespace fraglab
