// Device: the physical memory a policy reserves from (docs/architecture.md).
//
// Two families of calls, as on a CUDA GPU:
//  - malloc/free, like cudaMalloc/cudaFree: a contiguous range backed by memory at once;
//  - the virtual-memory calls of CUDA VMM: reserve_range/release_range take address space only,
//    map/unmap attach or detach physical memory in whole pages of granularity() bytes.
//
// Reserved bytes are measured here, in this non-virtual base (RMM's do_allocate pattern): a
// policy cannot misreport them. reserved = bytes of live malloc ranges + bytes of mapped pages.
// Listeners see every successful call (validation compares them with recorded segment events).
// The time of every call is charged here too, against the device's CostModel (device_time.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/cost_model.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

// MapAlias/UnmapAlias map pages that are already mapped elsewhere a second time (no new memory).
enum class DeviceCall : std::uint8_t { Malloc, Free, Map, Unmap, MapAlias, UnmapAlias };

class DeviceListener {
 public:
  virtual ~DeviceListener() = default;
  virtual void on_device_call(DeviceCall call, Addr addr, Bytes size) = 0;
};

struct DeviceCounters {
  std::uint64_t malloc_calls = 0;  // successful
  std::uint64_t malloc_failures = 0;
  std::uint64_t free_calls = 0;
  std::uint64_t map_calls = 0;  // successful
  std::uint64_t map_failures = 0;
  std::uint64_t unmap_calls = 0;
  std::uint64_t reserve_calls = 0;
  std::uint64_t release_calls = 0;
  std::uint64_t alias_map_calls = 0;
  std::uint64_t alias_unmap_calls = 0;
};

// Estimated time in device calls (README "Device time"): all of it, and the part spent in calls
// that synchronise the device (stall_us <= device_us).
struct DeviceTime {
  double device_us = 0;
  double stall_us = 0;
};

class Device {
 public:
  static constexpr Addr kAnyAddress = 0;

  virtual ~Device() = default;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual std::string kind() const = 0;   // "sim", "cuda:0", ...
  virtual Bytes capacity() const = 0;     // total device memory
  virtual Bytes granularity() const = 0;  // physical page size of map/unmap (2 MiB)
  // What cudaMemGetInfo would call free: memory no one (this policy or anything else) holds.
  virtual Bytes free_memory() const { return capacity() > reserved_ ? capacity() - reserved_ : 0; }

  // cudaMalloc. `at` asks for a specific address (rebuilding recorded state, validation); a
  // device that cannot honour it places the range elsewhere. nullopt = out of memory.
  std::optional<Addr> malloc(Bytes size, Addr at = kAnyAddress);
  void free(Addr addr);  // the address malloc returned
  // CUDA VMM: address space only (no reserved bytes), then pages mapped into it.
  std::optional<Addr> reserve_range(Bytes size, Addr at = kAnyAddress);
  void release_range(Addr addr);
  // size: a multiple of granularity(); false = out of memory. `handle`: the size of each physical
  // allocation (cuMemCreate) the caller's real counterpart maps it in, for the cost model (0 =
  // granularity(): one per page; PyTorch's expandable segments use their segment size).
  bool map(Addr addr, Bytes size, Bytes handle = 0);
  void unmap(Addr addr, Bytes size, Bytes handle = 0);
  // Virtual-memory stitching (GMLake, anchors.md §1.1): maps the physical pages mapped at
  // [source, source + size) a second time at `addr` (inside a reserved range), as cuMemMap of the
  // same allocation handles does. No new memory, so reserved bytes do not change. The source
  // pages must stay mapped while an alias of them is mapped.
  void map_alias(Addr addr, Bytes size, Addr source);
  void unmap_alias(Addr addr, Bytes size);

  // True when every byte of [addr, addr + size) is backed by memory: inside a live malloc range,
  // mapped pages or mapped aliases. For invariant checks, not for policies.
  virtual bool is_backed(Addr addr, Bytes size) const = 0;

  Bytes reserved() const { return reserved_; }
  Bytes peak_reserved() const { return peak_reserved_; }
  const DeviceCounters& counters() const { return counters_; }
  std::uint64_t device_allocs() const { return counters_.malloc_calls + counters_.map_calls; }
  std::uint64_t device_frees() const { return counters_.free_calls + counters_.unmap_calls; }

  void add_listener(DeviceListener* listener) { listeners_.push_back(listener); }
  void remove_listener(DeviceListener* listener);

  // Wall-clock seconds spent inside a real driver's calls since the device was made (steady_clock
  // around each call: CudaDevice); nullopt on a device without a driver (sim). Not deterministic.
  virtual std::optional<double> measured_seconds() const { return std::nullopt; }

  // ---- time (device_time.cpp) ----
  void set_cost_model(const CostModel& model) {
    costs_ = model;
    handle_costs_ = {};
  }
  const CostModel& cost_model() const { return costs_; }
  const DeviceTime& time() const { return time_; }
  void reset_time() { time_ = {}; }
  // cudaDeviceSynchronize: what a policy's out-of-memory flush and empty_cache cost besides the
  // frees and unmaps they make (which are charged as device calls anyway).
  void synchronize();
  // An API call a policy makes that is not one of the calls above (cudaMallocAsync from the pool,
  // cudaMemPoolTrimTo), moving `bytes`; a stall when it synchronises the device.
  void charge(ApiCall call, Bytes bytes, bool stalls = false);
  // For a stream-ordered pool (cudaMallocAsync): the driver maps and unmaps the pool's memory
  // inside cudaMallocAsync / cudaMemPoolTrimTo, whose own figures the policy charges, so the
  // VMM calls below are not charged again.
  void set_vmm_calls_inside_pool_calls() { vmm_billed_ = false; }

 protected:
  virtual std::optional<Addr> do_malloc(Bytes size, Addr at) = 0;
  virtual Bytes do_free(Addr addr) = 0;  // returns the bytes released
  virtual std::optional<Addr> do_reserve_range(Bytes size, Addr at) = 0;
  virtual void do_release_range(Addr addr) = 0;
  virtual bool do_map(Addr addr, Bytes size) = 0;
  virtual void do_unmap(Addr addr, Bytes size) = 0;
  virtual void do_map_alias(Addr addr, Bytes size, Addr source) = 0;
  virtual void do_unmap_alias(Addr addr, Bytes size) = 0;
  // Bytes a successful malloc of `size` adds to reserved (the driver's own rounding).
  virtual Bytes malloc_footprint(Bytes size) const = 0;

 private:
  void notify(DeviceCall call, Addr addr, Bytes size);
  void add_reserved(Bytes bytes);
  // The API calls behind each Device call (device_time.cpp cites the real allocators).
  void time_malloc(Bytes size);
  void time_free(Bytes size);
  void time_reserve(Addr addr, Bytes size);
  void time_release(Addr addr);
  void time_map(Bytes size, Bytes handle, bool ok);
  void time_unmap(Bytes size, Bytes handle);
  void time_map_alias(Bytes size);
  void time_unmap_alias(Bytes size);
  std::uint64_t pages(Bytes size, Bytes handle = 0) const;
  void charge_times(ApiCall call, std::uint64_t count, Bytes bytes, bool stalls = false);

  Bytes reserved_ = 0;
  Bytes peak_reserved_ = 0;
  DeviceCounters counters_;
  std::vector<DeviceListener*> listeners_;
  CostModel costs_ = CostModel::defaults();
  // The per-handle figures time_map charged last, for that handle size: a policy maps handles of
  // one size after another, and each figure costs a conversion and a division to compute.
  struct HandleCosts {
    Bytes handle = 0;  // 0: none yet
    double create_us = 0;
    double map_us = 0;
  };
  HandleCosts handle_costs_;
  DeviceTime time_;
  bool vmm_billed_ = true;
  std::map<Addr, Bytes> reserved_ranges_;  // for cuMemAddressFree's size
};

}  // namespace fraglab
