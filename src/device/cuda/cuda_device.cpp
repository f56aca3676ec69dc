// CudaDevice: see cuda_device.hpp. The shadow SimDevice is asked first on every call: it checks
// the call is legal (the same std::logic_error as on sim for a policy's misuse) and places it;
// then the driver does the same on the GPU. A driver refusal for lack of memory undoes the
// shadow's step and is reported as the device's out-of-memory; any other driver error is a bug
// or a broken driver and throws.
#include "device/cuda/cuda_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace fraglab::cuda {
namespace {

constexpr Bytes align_up(Bytes value, Bytes alignment) { return (value + alignment - 1) / alignment * alignment; }

CUmemAllocationProp pinned_on(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

bool out_of_memory(CUresult result) { return result == CUDA_ERROR_OUT_OF_MEMORY; }

}  // namespace

const char* call_name(CudaCall call) {
  switch (call) {
    case CudaCall::MemAlloc:
      return "cuMemAlloc";
    case CudaCall::MemFree:
      return "cuMemFree";
    case CudaCall::AddressReserve:
      return "cuMemAddressReserve";
    case CudaCall::AddressFree:
      return "cuMemAddressFree";
    case CudaCall::MemCreate:
      return "cuMemCreate";
    case CudaCall::MemRelease:
      return "cuMemRelease";
    case CudaCall::MemMap:
      return "cuMemMap";
    case CudaCall::MemUnmap:
      return "cuMemUnmap";
    case CudaCall::MemSetAccess:
      return "cuMemSetAccess";
    case CudaCall::RetainHandle:
      return "cuMemRetainAllocationHandle";
    case CudaCall::CtxSynchronize:
      return "cuCtxSynchronize";
  }
  return "?";
}

CudaDeviceInfo query_device(const CudaDriver& driver, int ordinal, const std::string& what) {
  const DriverTable& api = driver.api();
  auto fail = [&](const char* call, CUresult result) {
    throw InputError(fmt::format("{}: {} failed: {}", what, call, driver.error_text(result)));
  };
  int count = 0;
  if (CUresult r = api.cuDeviceGetCount(&count); r != CUDA_SUCCESS) fail("cuDeviceGetCount", r);
  if (ordinal < 0 || ordinal >= count) {
    throw InputError(
        fmt::format("{}: no CUDA device {} (expected an ordinal from 0 to {}; the driver sees {} device{})", what,
                    ordinal, count - 1, count, count == 1 ? "" : "s"));
  }
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  CUdevice device = 0;
  if (CUresult r = api.cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS) fail("cuDeviceGet", r);
  std::array<char, 256> name{};
  if (CUresult r = api.cuDeviceGetName(name.data(), static_cast<int>(name.size()), device); r != CUDA_SUCCESS)
    fail("cuDeviceGetName", r);
  info.name = name.data();
  if (CUresult r = api.cuDriverGetVersion(&info.driver_version); r != CUDA_SUCCESS) fail("cuDriverGetVersion", r);
  const CUmemAllocationProp prop = pinned_on(device);
  size_t granularity = 0;
  if (CUresult r = api.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS)
    fail("cuMemGetAllocationGranularity", r);
  info.granularity = granularity;
  // cuMemGetInfo needs a current context: the device's primary one, retained for the question.
  CUcontext context = nullptr;
  if (CUresult r = api.cuDevicePrimaryCtxRetain(&context, device); r != CUDA_SUCCESS)
    fail("cuDevicePrimaryCtxRetain", r);
  size_t free = 0;
  size_t total = 0;
  CUresult r = api.cuCtxSetCurrent(context);
  if (r == CUDA_SUCCESS) r = api.cuMemGetInfo(&free, &total);
  api.cuDevicePrimaryCtxRelease(device);
  if (r != CUDA_SUCCESS) fail("cuMemGetInfo", r);
  info.total = total;
  info.free = free;
  // Policies work in 2 MiB pages (allocator-model §5: expandable segments map 2 MiB pages); each
  // is one cuMemCreate, legal when 2 MiB is a multiple of the driver's granularity.
  if (granularity == 0 || SimDevice::kPage % granularity != 0) {
    throw InputError(
        fmt::format("{}: the driver's allocation granularity is {} bytes; fraglab maps 2 MiB pages and "
                    "needs a granularity that divides 2 MiB",
                    what, granularity));
  }
  return info;
}

PrimaryContext::PrimaryContext(std::shared_ptr<const CudaDriver> driver, int ordinal) : driver_(std::move(driver)) {
  CUcontext context = nullptr;
  if (CUresult r = driver_->api().cuDeviceGet(&device_, ordinal); r != CUDA_SUCCESS)
    throw InputError(fmt::format("cuda:{}: cuDeviceGet failed: {}", ordinal, driver_->error_text(r)));
  if (CUresult r = driver_->api().cuDevicePrimaryCtxRetain(&context, device_); r != CUDA_SUCCESS)
    throw InputError(fmt::format("cuda:{}: cuDevicePrimaryCtxRetain failed: {}", ordinal, driver_->error_text(r)));
}

PrimaryContext::~PrimaryContext() { driver_->api().cuDevicePrimaryCtxRelease(device_); }

CudaDevice::CudaDevice(std::shared_ptr<const CudaDriver> driver, int ordinal, SimDeviceConfig memory,
                       const std::string& what)
    : driver_(std::move(driver)), api_(driver_->api()), info_(query_device(*driver_, ordinal, what)), shadow_(memory) {
  if (CUresult r = api_.cuDeviceGet(&device_, ordinal); r != CUDA_SUCCESS) check(r, "cuDeviceGet", 0, 0);
  CUcontext context = nullptr;
  if (CUresult r = api_.cuDevicePrimaryCtxRetain(&context, device_); r != CUDA_SUCCESS)
    check(r, "cuDevicePrimaryCtxRetain", 0, 0);
  if (CUresult r = api_.cuCtxSetCurrent(context); r != CUDA_SUCCESS) {
    api_.cuDevicePrimaryCtxRelease(device_);
    check(r, "cuCtxSetCurrent", 0, 0);
  }
  prop_ = pinned_on(device_);
  access_.location = prop_.location;
  access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

CudaDevice::~CudaDevice() {
  release_everything();
  api_.cuDevicePrimaryCtxRelease(device_);
}

template <class Call>
CUresult CudaDevice::timed(CudaCall kind, Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  const CUresult result = call();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  CallStats& stats = stats_[static_cast<std::size_t>(kind)];
  ++stats.calls;
  stats.total_us += us;
  stats.max_us = std::max(stats.max_us, us);
  return result;
}

std::optional<double> CudaDevice::measured_seconds() const {
  double us = 0;
  for (const CallStats& s : stats_) us += s.total_us;
  return us / 1e6;
}

void CudaDevice::check(CUresult result, const char* call, Addr addr, Bytes size) const {
  if (result == CUDA_SUCCESS) return;
  throw std::runtime_error(
      fmt::format("{}: {} of {} bytes at 0x{:x} failed: {}", kind(), call, size, addr, driver_->error_text(result)));
}

void CudaDevice::synchronize() {
  check(timed(CudaCall::CtxSynchronize, [&] { return api_.cuCtxSynchronize(); }), "cuCtxSynchronize", 0, 0);
}

Bytes CudaDevice::malloc_footprint(Bytes size) const {
  // The shadow's rounding (sim_device.hpp): reserved bytes are counted as on sim.
  if (size > std::numeric_limits<Bytes>::max() - SimDevice::kMallocAlignment) return std::numeric_limits<Bytes>::max();
  return align_up(std::max<Bytes>(size, 1), SimDevice::kMallocAlignment);
}

std::optional<Addr> CudaDevice::do_malloc(Bytes size, Addr at) {
  const std::optional<Addr> addr = shadow_.malloc(size, at);
  if (!addr) return std::nullopt;
  const Bytes bytes = malloc_footprint(size);
  CUdeviceptr real = 0;
  const CUresult r = timed(CudaCall::MemAlloc, [&] { return api_.cuMemAlloc(&real, bytes); });
  if (out_of_memory(r)) {
    shadow_.free(*addr);
    return std::nullopt;
  }
  if (r != CUDA_SUCCESS) shadow_.free(*addr);
  check(r, "cuMemAlloc", *addr, bytes);
  mallocs_.emplace(*addr, real);
  return addr;
}

Bytes CudaDevice::do_free(Addr addr) {
  const Bytes before = shadow_.reserved();
  shadow_.free(addr);  // throws on an address malloc did not return, as on sim
  auto it = mallocs_.find(addr);
  const CUdeviceptr real = it->second;
  mallocs_.erase(it);
  check(timed(CudaCall::MemFree, [&] { return api_.cuMemFree(real); }), "cuMemFree", addr, before - shadow_.reserved());
  return before - shadow_.reserved();
}

std::optional<Addr> CudaDevice::do_reserve_range(Bytes size, Addr at) {
  const std::optional<Addr> addr = shadow_.reserve_range(size, at);
  if (!addr) return std::nullopt;
  const Bytes rounded = align_up(std::max<Bytes>(size, 1), SimDevice::kPage);
  CUdeviceptr real = 0;
  const CUresult r =
      timed(CudaCall::AddressReserve, [&] { return api_.cuMemAddressReserve(&real, rounded, SimDevice::kPage, 0, 0); });
  if (r != CUDA_SUCCESS) {  // no address space that large: the device cannot give the range
    shadow_.release_range(*addr);
    if (out_of_memory(r) || r == CUDA_ERROR_INVALID_VALUE) return std::nullopt;
    check(r, "cuMemAddressReserve", *addr, rounded);
  }
  ranges_.emplace(*addr, Range{real, rounded});
  return addr;
}

void CudaDevice::do_release_range(Addr addr) {
  shadow_.release_range(addr);  // throws while pages are mapped, as on sim
  auto it = ranges_.find(addr);
  const Range range = it->second;
  ranges_.erase(it);
  check(timed(CudaCall::AddressFree, [&] { return api_.cuMemAddressFree(range.real, range.size); }), "cuMemAddressFree",
        addr, range.size);
}

CUdeviceptr CudaDevice::real_address(Addr addr) const {
  auto next = ranges_.upper_bound(addr);
  if (next == ranges_.begin()) throw std::logic_error(fmt::format("{}: 0x{:x} is in no reserved range", kind(), addr));
  const auto& [start, range] = *std::prev(next);
  if (addr - start >= range.size)
    throw std::logic_error(fmt::format("{}: 0x{:x} is in no reserved range", kind(), addr));
  return range.real + (addr - start);
}

bool CudaDevice::do_map(Addr addr, Bytes size) {
  if (!shadow_.map(addr, size)) return false;  // checks whole pages inside a range, unmapped
  const CUdeviceptr real = real_address(addr);
  const std::size_t pages = size / SimDevice::kPage;
  for (std::size_t i = 0; i < pages; ++i) {
    const CUdeviceptr page = real + i * SimDevice::kPage;
    CUmemGenericAllocationHandle handle = 0;
    const CUresult created =
        timed(CudaCall::MemCreate, [&] { return api_.cuMemCreate(&handle, SimDevice::kPage, &prop_, 0); });
    if (created != CUDA_SUCCESS) {
      unmap_pages(real, i);  // the pages mapped so far: the map fails whole
      shadow_.unmap(addr, size);
      if (out_of_memory(created)) return false;
      check(created, "cuMemCreate", addr + i * SimDevice::kPage, SimDevice::kPage);
    }
    CUresult r = timed(CudaCall::MemMap, [&] { return api_.cuMemMap(page, SimDevice::kPage, 0, handle, 0); });
    if (r == CUDA_SUCCESS) {
      pages_.emplace(page, handle);
      r = timed(CudaCall::MemSetAccess, [&] { return api_.cuMemSetAccess(page, SimDevice::kPage, &access_, 1); });
    } else {
      api_.cuMemRelease(handle);
    }
    if (r != CUDA_SUCCESS) {
      unmap_pages(real, pages_.count(page) != 0 ? i + 1 : i);
      shadow_.unmap(addr, size);
      check(r, "cuMemMap/cuMemSetAccess", addr + i * SimDevice::kPage, SimDevice::kPage);
    }
  }
  return true;
}

void CudaDevice::unmap_pages(CUdeviceptr real, std::size_t pages) {
  for (std::size_t i = 0; i < pages; ++i) {
    const CUdeviceptr page = real + i * SimDevice::kPage;
    auto it = pages_.find(page);
    if (it == pages_.end()) continue;
    const CUmemGenericAllocationHandle handle = it->second;
    pages_.erase(it);
    // Each page was mapped by its own cuMemMap, and cuMemUnmap must name a whole mapped range.
    check(timed(CudaCall::MemUnmap, [&] { return api_.cuMemUnmap(page, SimDevice::kPage); }), "cuMemUnmap", page,
          SimDevice::kPage);
    check(timed(CudaCall::MemRelease, [&] { return api_.cuMemRelease(handle); }), "cuMemRelease", page,
          SimDevice::kPage);
  }
}

void CudaDevice::do_unmap(Addr addr, Bytes size) {
  shadow_.unmap(addr, size);  // throws when not mapped or still aliased, as on sim
  unmap_pages(real_address(addr), size / SimDevice::kPage);
}

void CudaDevice::do_map_alias(Addr addr, Bytes size, Addr source) {
  shadow_.map_alias(addr, size, source);
  const CUdeviceptr real = real_address(addr);
  Alias alias{size, {}};
  const std::size_t pages = size / SimDevice::kPage;
  for (std::size_t i = 0; i < pages; ++i) {
    const CUdeviceptr page = real + i * SimDevice::kPage;
    const CUdeviceptr from = real_address(source + i * SimDevice::kPage);
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = timed(CudaCall::RetainHandle, [&] {
      return api_.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(from)));
    });
    if (r == CUDA_SUCCESS) {
      r = timed(CudaCall::MemMap, [&] { return api_.cuMemMap(page, SimDevice::kPage, 0, handle, 0); });
      if (r == CUDA_SUCCESS) {
        alias.handles.push_back(handle);
        r = timed(CudaCall::MemSetAccess, [&] { return api_.cuMemSetAccess(page, SimDevice::kPage, &access_, 1); });
      } else {
        api_.cuMemRelease(handle);
      }
    }
    if (r != CUDA_SUCCESS) {
      for (std::size_t j = 0; j < alias.handles.size(); ++j) {
        api_.cuMemUnmap(real + j * SimDevice::kPage, SimDevice::kPage);
        api_.cuMemRelease(alias.handles[j]);
      }
      shadow_.unmap_alias(addr, size);
      check(r, "alias cuMemRetainAllocationHandle/cuMemMap", addr + i * SimDevice::kPage, SimDevice::kPage);
    }
  }
  aliases_.emplace(addr, std::move(alias));
}

void CudaDevice::do_unmap_alias(Addr addr, Bytes size) {
  shadow_.unmap_alias(addr, size);
  auto it = aliases_.find(addr);
  const Alias alias = std::move(it->second);
  aliases_.erase(it);
  const CUdeviceptr real = real_address(addr);
  for (std::size_t i = 0; i < alias.handles.size(); ++i) {
    const CUdeviceptr page = real + i * SimDevice::kPage;
    check(timed(CudaCall::MemUnmap, [&] { return api_.cuMemUnmap(page, SimDevice::kPage); }), "cuMemUnmap", page,
          SimDevice::kPage);
    // The retained handle holds one reference (cuMemRetainAllocationHandle: "must be released
    // with corresponding number of calls to cuMemRelease").
    check(timed(CudaCall::MemRelease, [&] { return api_.cuMemRelease(alias.handles[i]); }), "cuMemRelease", page,
          SimDevice::kPage);
  }
}

void CudaDevice::release_everything() noexcept {
  // Aliases first (they hold references to pages), then pages, then the address ranges they lay
  // in, then cudaMalloc'ed memory. Errors are ignored: a destructor has no one to report to.
  for (const auto& [addr, alias] : aliases_) {
    const auto range = std::prev(ranges_.upper_bound(addr));
    const CUdeviceptr real = range->second.real + (addr - range->first);
    for (std::size_t i = 0; i < alias.handles.size(); ++i) {
      api_.cuMemUnmap(real + i * SimDevice::kPage, SimDevice::kPage);
      api_.cuMemRelease(alias.handles[i]);
    }
  }
  aliases_.clear();
  for (const auto& [page, handle] : pages_) {
    api_.cuMemUnmap(page, SimDevice::kPage);
    api_.cuMemRelease(handle);
  }
  pages_.clear();
  for (const auto& [addr, range] : ranges_) api_.cuMemAddressFree(range.real, range.size);
  ranges_.clear();
  for (const auto& [addr, real] : mallocs_) api_.cuMemFree(real);
  mallocs_.clear();
}

}  // namespace fraglab::cuda
