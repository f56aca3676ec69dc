// CudaDevice: a Device whose memory is real GPU memory, reserved through the CUDA driver
// (cuda_driver.hpp): malloc/free are cuMemAlloc/cuMemFree (what cudaMalloc/cudaFree call), the
// VMM calls are cuMemAddressReserve/Free, and per 2 MiB page cuMemCreate + cuMemMap +
// cuMemSetAccess, cuMemUnmap + cuMemRelease; an alias retains the source page's handle
// (cuMemRetainAllocationHandle) and maps it again. No kernel runs and no byte of the memory is
// touched. Every driver call is timed (CallStats).
//
// Addresses: the policy sees the addresses a SimDevice of the same capacity would give (a shadow
// SimDevice places every range and keeps the byte accounting), and this class translates them to
// the driver's pointers. Policies order blocks by address, so their decisions, and every result,
// are those of `--device sim` of the same capacity; the only difference a real GPU can make is
// the driver refusing memory (out of memory) before the accounting does, which the policy then
// sees as an ordinary failed cudaMalloc / map.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/cuda/cuda_driver.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::cuda {

// The driver calls that are timed, in the cost model's vocabulary.
enum class CudaCall : std::uint8_t {
  MemAlloc,
  MemFree,
  AddressReserve,
  AddressFree,
  MemCreate,
  MemRelease,
  MemMap,
  MemUnmap,
  MemSetAccess,
  RetainHandle,
  CtxSynchronize,
};
inline constexpr std::size_t kCudaCallKinds = 11;
const char* call_name(CudaCall call);  // "cuMemAlloc", ...

struct CallStats {
  std::uint64_t calls = 0;
  double total_us = 0;
  double max_us = 0;
};

// What the device is, read once from the driver (cuMemGetInfo, cuDeviceGetName, ...).
struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA A100-SXM4-80GB"
  int driver_version = 0;
  Bytes total = 0;
  Bytes free = 0;
  Bytes granularity = 0;  // cuMemGetAllocationGranularity, minimum
};

// Opens device `ordinal` (its primary context) and reads its info. `what` names the option in
// messages ("--device 'cuda:3'"); throws InputError on a bad ordinal or a failing driver.
CudaDeviceInfo query_device(const CudaDriver& driver, int ordinal, const std::string& what);

// Holds device `ordinal`'s primary context retained while it lives. A DeviceSpec keeps one, so
// that the context is created once per command, not once per replay: a real driver destroys the
// primary context when its last retain is released, and creating it costs time and memory.
class PrimaryContext {
 public:
  PrimaryContext(std::shared_ptr<const CudaDriver> driver, int ordinal);  // throws InputError
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

 private:
  std::shared_ptr<const CudaDriver> driver_;
  CUdevice device_ = 0;
};

class CudaDevice final : public Device {
 public:
  // Retains the primary context of `ordinal`. `memory`: the capacity and the memory held outside
  // the allocator that the accounting uses, the DeviceSpec's (cuMemGetInfo when it was parsed), so
  // every run of one command counts the same device; the driver may still refuse memory sooner.
  CudaDevice(std::shared_ptr<const CudaDriver> driver, int ordinal, SimDeviceConfig memory, const std::string& what);
  ~CudaDevice() override;  // unmaps, releases and frees everything still held

  std::string kind() const override { return "cuda:" + std::to_string(info_.ordinal); }
  Bytes capacity() const override { return shadow_.capacity(); }
  Bytes granularity() const override { return shadow_.granularity(); }
  Bytes free_memory() const override { return shadow_.free_memory(); }
  bool is_backed(Addr addr, Bytes size) const override { return shadow_.is_backed(addr, size); }

  const CudaDeviceInfo& info() const { return info_; }
  const CallStats& stats(CudaCall call) const { return stats_[static_cast<std::size_t>(call)]; }
  // The time of every timed driver call so far (Σ CallStats::total_us), in seconds.
  std::optional<double> measured_seconds() const override;
  // Waits for the device (cuCtxSynchronize), timed like every call.
  void synchronize();
  // Live driver objects, for tests: malloc'ed pointers, reserved ranges, mapped own pages, alias pages.
  std::size_t live_mallocs() const { return mallocs_.size(); }
  std::size_t live_ranges() const { return ranges_.size(); }
  std::size_t live_pages() const { return pages_.size(); }

 protected:
  std::optional<Addr> do_malloc(Bytes size, Addr at) override;
  Bytes do_free(Addr addr) override;
  std::optional<Addr> do_reserve_range(Bytes size, Addr at) override;
  void do_release_range(Addr addr) override;
  bool do_map(Addr addr, Bytes size) override;
  void do_unmap(Addr addr, Bytes size) override;
  void do_map_alias(Addr addr, Bytes size, Addr source) override;
  void do_unmap_alias(Addr addr, Bytes size) override;
  Bytes malloc_footprint(Bytes size) const override;

 private:
  struct Range {
    CUdeviceptr real;
    Bytes size;
  };
  struct Alias {
    Bytes size;
    std::vector<CUmemGenericAllocationHandle> handles;  // retained, one per page
  };
  template <class Call>
  CUresult timed(CudaCall kind, Call&& call);
  void check(CUresult result, const char* call, Addr addr, Bytes size) const;
  CUdeviceptr real_address(Addr addr) const;  // inside a reserved range
  void unmap_pages(CUdeviceptr real, std::size_t pages);
  void release_everything() noexcept;

  std::shared_ptr<const CudaDriver> driver_;
  const DriverTable& api_;
  CudaDeviceInfo info_;
  CUdevice device_ = 0;
  SimDevice shadow_;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  std::unordered_map<Addr, CUdeviceptr> mallocs_;                        // policy address -> pointer
  std::map<Addr, Range> ranges_;                                         // policy range start -> reservation
  std::unordered_map<CUdeviceptr, CUmemGenericAllocationHandle> pages_;  // own mapped pages
  std::map<Addr, Alias> aliases_;                                        // policy alias start -> handles
  std::array<CallStats, kCudaCallKinds> stats_{};
};

}  // namespace fraglab::cuda
