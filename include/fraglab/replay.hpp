// Replayer: drives a Trace through a Policy on a Device, single-threaded and deterministic, and
// measures the metrics of README "Metrics". Observers (timeline, invariant checker,
// validation) see the state after every event; they compose, the loop knows none of them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

// What a replay measured. Definitions (the one place in the code; README repeats them):
//  requested = bytes the program asked for and still holds: an allocation counts from its alloc
//              until its free *completes*;
//  allocated = bytes of the blocks handed out (after the policy's rounding), from alloc until
//              the free is *requested* (PyTorch's allocated_bytes);
//  reserved  = bytes the device has mapped for the policy (measured by the Device);
//  held      = bytes of the blocks held for the program, from alloc until the free *completes*
//              (live blocks and blocks whose free is pending): the fragmentation anatomy's
//              rounding is held − requested (fraglab/anatomy.hpp).
struct Metrics {
  Bytes peak_requested = 0;
  Bytes peak_allocated = 0;
  Bytes peak_reserved = 0;      // the device's own peak (may be reached inside an event)
  Bytes reserved_at_start = 0;  // after the initial state is rebuilt, before event 0
  Bytes reserved_at_end = 0;
  // The least reserved from the start up to the peak: of the bytes reserved before the first
  // event, at least min(this, reserved_at_start) were still held when reserved peaked.
  Bytes lowest_reserved_before_peak = 0;
  // The most bytes allocated after any event at which reserved stood at its peak (a policy that
  // holds its peak — a cache, a static arena — is judged at its busiest moment there).
  Bytes allocated_at_peak_reserved = 0;
  std::int64_t peak_reserved_event = -1;  // first event after which reserved was at its peak; -1 = start
  double fragmentation_at_peak = 0;       // 1 - allocated_at_peak_reserved / peak reserved after an event
  double peak_utilization = 0;            // peak allocated / peak reserved
  std::uint64_t num_alloc_retries = 0;
  std::uint64_t num_ooms = 0;
  std::uint64_t num_device_alloc = 0;  // successful cudaMalloc + map calls
  std::uint64_t num_device_free = 0;   // cudaFree + unmap calls
  // Estimated seconds in device calls from the start to the end of the replay, by the device's
  // CostModel (fraglab/cost_model.hpp; README "Device time"): all of them, and those in calls
  // that synchronise the device (cudaFree, cudaDeviceSynchronize of a flush, empty_cache or
  // before an unmap). stall_time_s <= device_time_s.
  double device_time_s = 0;
  double stall_time_s = 0;
  // On a device with a real driver (--device cuda): wall-clock seconds spent inside its calls from
  // the start to the end of the replay, measured (Device::measured_seconds). Absent on sim; not
  // deterministic.
  std::optional<double> measured_device_time_s;
  Bytes host_bytes_moved = 0;  // device→host plus host→device bytes (Policy::host_bytes_moved)
};

struct OomRecord {
  std::uint64_t event_index = 0;
  Bytes size = 0;
  StreamId stream = 0;
  std::string message;
};

// The state after one event, as observers see it.
struct ReplayPoint {
  std::uint64_t event_index = 0;
  const Event* event = nullptr;
  Bytes requested = 0;
  Bytes allocated = 0;
  Bytes reserved = 0;
  Bytes held = 0;
  // For alloc events: the block handed out (nullopt on OOM or for other ops).
  const Block* block = nullptr;
  // The device's estimated time in device calls since the start, this event's included.
  const DeviceTime* device_time = nullptr;
};

class ReplayObserver {
 public:
  virtual ~ReplayObserver() = default;
  // One call per initial allocation the policy adopted (before on_start).
  virtual void on_initial_block(const InitialAllocation& /*allocation*/, const Block& /*block*/) {}
  // After the initial state is rebuilt, before event 0.
  virtual void on_start(const Trace& /*trace*/, const Policy& /*policy*/) {}
  virtual void on_event(const ReplayPoint& point) = 0;
  virtual void on_finish() {}
};

// The fragmentation anatomy at one point (fraglab/anatomy.hpp has the definitions): the parts add
// up to reserved − requested exactly.
struct Anatomy {
  std::int64_t event = -1;  // the event after which it was taken; -1 = the start
  Bytes reserved = 0;
  Bytes requested = 0;
  Bytes rounding = 0;
  Bytes cached_free_usable = 0;
  Bytes stream_bound = 0;
  Bytes oversize_locked = 0;
  Bytes small_pool = 0;
  std::int64_t other = 0;
  // Held block bytes whose data the policy keeps in host memory (Policy::held_on_host; gemini's
  // offloaded chunks): requested and held, but not reserved. Not a part: the parts add up to
  // reserved + host_resident − requested, the bytes the program's memory takes wherever it is.
  Bytes host_resident = 0;
  // What the parts add up to: reserved − requested, plus host_resident (0 unless a policy offloads).
  std::int64_t gap() const {
    return static_cast<std::int64_t>(reserved + host_resident) - static_cast<std::int64_t>(requested);
  }
  std::int64_t sum_of_parts() const {
    return static_cast<std::int64_t>(rounding + cached_free_usable + stream_bound + oversize_locked + small_pool) +
           other;
  }
};

// Where a replay of a trace that begins mid-run starts (README "What-if answers on a snapshot").
enum class StartState : std::uint8_t {
  // The recorded segments and blocks, adopted as they were (Policy::adopt): what the run had, and
  // faithful only under the settings that made it (what `validate` uses).
  Recorded,
  // An empty device on which the policy allocates the allocations live at the start, in address
  // order, before the first event (Policy::allocate_initial): the same start for every setting.
  Cold,
};
std::string_view start_state_name(StartState s);  // "recorded", "cold"

struct ReplayOptions {
  bool stop_on_oom = false;
  StartState start_state = StartState::Recorded;
  // Fill ReplayResult::detailed_stats. Off where nothing reads them (a replay without --stats, a
  // sweep): the policy's listing builds ~120 keys as strings at every run's end.
  bool detailed_stats = true;
};

struct ReplayResult {
  std::string policy;  // the spec string it was created from
  StartState start_state = StartState::Recorded;
  // The run is the trace's own recorded allocator settings (compare and sweep show it as the
  // baseline "what my job did"); set by the caller, not the Replayer.
  bool recorded_settings = false;
  Metrics metrics;
  std::vector<OomRecord> ooms;
  bool stopped_on_oom = false;
  std::uint64_t events_replayed = 0;
  double seconds = 0;  // wall time of the replay loop (informational; not deterministic)
  std::vector<std::pair<std::string, std::int64_t>> detailed_stats;  // empty unless ReplayOptions::detailed_stats
  std::vector<std::string> notes;                                    // the policy's notes on its options
  // Set when the run was watched by an InvariantChecker: how many violations, and the first few.
  std::optional<std::uint64_t> invariant_violations;
  std::vector<std::string> invariant_messages;
  // Set when asked for (ReplayObservers::anatomy): the anatomy after Metrics::peak_reserved_event.
  std::optional<Anatomy> anatomy_at_peak;
};

class Replayer {
 public:
  Replayer(const Trace& trace, Policy& policy, Device& device, ReplayOptions options = {});
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;
  void add_observer(ReplayObserver* observer) { observers_.push_back(observer); }
  // Rebuilds the initial state, replays every event, returns the metrics. Call once.
  ReplayResult run(std::string policy_spec);

  // The same run with the events given in pieces (a trace streamed from its file,
  // fraglab/trace_stream.hpp): start(), feed() with each piece in order, finish(). `trace` (given
  // to the constructor) is then the header alone: its initial state and strings, no events; a
  // mark's strings must be in it by the time the mark is fed. Policy::prepare and the observers'
  // on_start see that header, so only policies that need no events before the replay may be
  // streamed. The result is the one run() gives for the whole trace.
  void start(std::string policy_spec);
  void feed(std::span<const Event> events);
  ReplayResult finish();

 private:
  struct Run;
  void begin(std::string policy_spec, bool streamed);

  const Trace& trace_;
  Policy& policy_;
  Device& device_;
  ReplayOptions options_;
  std::vector<ReplayObserver*> observers_;
  std::unique_ptr<Run> run_;
  std::uint64_t device_allocs_at_start_ = 0;
  std::uint64_t device_frees_at_start_ = 0;
  std::optional<double> measured_at_start_;
};

}  // namespace fraglab
