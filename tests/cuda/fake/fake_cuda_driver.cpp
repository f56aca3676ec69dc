// A fake CUDA driver: the calls of src/device/cuda/cuda_driver.hpp's table, built as a shared
// library the backend loads through FRAGLAB_CUDA_DRIVER instead of libcuda.so.1. No GPU: it keeps
// a ledger of what it hands out and answers as the CUDA driver API documentation says the driver
// does (quoted at each rule from the Driver API reference, "Virtual Memory Management" and
// "Memory Management", docs.nvidia.com/cuda/cuda-driver-api/, group__CUDA__VA and group__CUDA__MEM).
// Where the documentation leaves a case open, the fake is strict (an error), so a backend that
// relies on it fails here rather than on someone's GPU; such rules say "fake:".
//
// Environment: FRAGLAB_FAKE_CUDA_TOTAL (bytes of memory, default 80 GiB), FRAGLAB_FAKE_CUDA_USED
// (bytes already held by others when it starts, default 0), FRAGLAB_FAKE_CUDA_DEVICES (default 1),
// FRAGLAB_FAKE_CUDA_NO_GPU=1 (cuInit answers CUDA_ERROR_NO_DEVICE), FRAGLAB_FAKE_CUDA_LEDGER=FILE
// (the ledger written there when the library is unloaded or the process ends),
// FRAGLAB_FAKE_CUDA_CALL_DELAY_US=N (every call that takes the ledger's lock, every memory call
// among them, sleeps N microseconds first: the backend's measured time in driver calls,
// measured_device_time_s, then has a known lower bound).
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "fake_cuda_ledger.h"

namespace {

constexpr size_t kGranularity = size_t{2} << 20;  // 2 MiB, as on current NVIDIA GPUs
constexpr CUdeviceptr kBase = 0x7f0000000000ull;

std::uint64_t env_bytes(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

struct Handle {
  size_t size;
  std::uint64_t refs;      // cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease
  std::uint64_t mappings;  // live cuMemMap ranges of it
};
struct Mapping {
  size_t size;
  CUmemGenericAllocationHandle handle;
};

struct State {
  std::mutex mutex;
  std::uint64_t total = env_bytes("FRAGLAB_FAKE_CUDA_TOTAL", std::uint64_t{80} << 30);
  std::uint64_t external = env_bytes("FRAGLAB_FAKE_CUDA_USED", 0);
  int devices = static_cast<int>(env_bytes("FRAGLAB_FAKE_CUDA_DEVICES", 1));
  bool initialised = false;
  FakeCudaLedger ledger{};
  CUdeviceptr next = kBase;
  std::map<CUdeviceptr, size_t> allocs;        // cuMemAlloc
  std::map<CUdeviceptr, size_t> reservations;  // cuMemAddressReserve
  std::unordered_map<CUmemGenericAllocationHandle, Handle> handles;
  std::map<CUdeviceptr, Mapping> mappings;  // by start address
  CUmemGenericAllocationHandle next_handle = 1;
  std::uint64_t context_refs = 0;
  // The default memory pool of the stream-ordered allocator (one, device 0's): memory freed into
  // it stays reserved (counted as used) until a synchronisation finds more than the release
  // threshold held, or cuMemPoolTrimTo.
  std::multimap<size_t, bool> pool_free;      // cached chunks, by size
  std::map<CUdeviceptr, size_t> pool_allocs;  // handed out by cuMemAllocAsync
  std::uint64_t pool_reserved = 0;            // bytes the pool holds (cached + handed out)
  std::uint64_t release_threshold = 0;        // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, default 0
  void release_cached(std::uint64_t keep) {
    for (auto it = pool_free.begin(); it != pool_free.end() && pool_reserved > keep;) {
      pool_reserved -= it->first;
      use(-static_cast<std::int64_t>(it->first));
      it = pool_free.erase(it);
    }
  }

  std::uint64_t free_bytes() const {
    const std::uint64_t held = ledger.used_bytes + external;
    return held >= total ? 0 : total - held;
  }
  void use(std::int64_t bytes) {
    ledger.used_bytes += static_cast<std::uint64_t>(bytes);
    if (ledger.used_bytes > ledger.peak_used_bytes) ledger.peak_used_bytes = ledger.used_bytes;
  }
  CUresult fail(CUresult result) {
    ++(result == CUDA_ERROR_OUT_OF_MEMORY ? ledger.out_of_memory : ledger.invalid);
    return result;
  }
  // Address space is handed out by a bump pointer, as SimDevice places ranges.
  CUdeviceptr place(size_t size, size_t alignment) {
    const CUdeviceptr addr = (next + alignment - 1) / alignment * alignment;
    next = addr + size;
    return addr;
  }
  bool overlaps(const std::map<CUdeviceptr, size_t>& ranges, CUdeviceptr addr, size_t size) const {
    auto it = ranges.lower_bound(addr);
    if (it != ranges.end() && it->first < addr + size) return true;
    return it != ranges.begin() && std::prev(it)->first + std::prev(it)->second > addr;
  }
  // The reservation [addr, addr + size) lies entirely in, or end().
  std::map<CUdeviceptr, size_t>::const_iterator reservation_of(CUdeviceptr addr, size_t size) const {
    auto it = reservations.upper_bound(addr);
    if (it == reservations.begin()) return reservations.end();
    --it;
    return addr + size <= it->first + it->second ? it : reservations.end();
  }
  bool mapped_overlap(CUdeviceptr addr, size_t size) const {
    auto it = mappings.lower_bound(addr);
    if (it != mappings.end() && it->first < addr + size) return true;
    return it != mappings.begin() && std::prev(it)->first + std::prev(it)->second.size > addr;
  }
  void drop_if_unused(CUmemGenericAllocationHandle id) {
    auto it = handles.find(id);
    if (it == handles.end() || it->second.refs != 0 || it->second.mappings != 0) return;
    use(-static_cast<std::int64_t>(it->second.size));
    handles.erase(it);
  }
  FakeCudaLedger snapshot() const {
    FakeCudaLedger l = ledger;
    l.external_bytes = external;
    l.live_allocs = allocs.size();
    l.live_reservations = reservations.size();
    l.live_handles = handles.size();
    l.live_mappings = mappings.size();
    l.context_refs = context_refs;
    l.live_allocs += pool_allocs.size();
    return l;
  }
};

State& state() {
  // Never destroyed: the ledger is written at exit, after function-local statics may be gone.
  static State* const s = new State();
  return *s;
}

thread_local CUcontext current_context = nullptr;
// The primary context: one per device, a fake pointer.
CUcontext primary_context(CUdevice device) {
  return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + device));
}

// Writes the ledger to FRAGLAB_FAKE_CUDA_LEDGER when the library goes away.
struct LedgerAtExit {
  ~LedgerAtExit() {
    const char* path = std::getenv("FRAGLAB_FAKE_CUDA_LEDGER");
    if (path == nullptr || *path == '\0') return;
    const FakeCudaLedger l = state().snapshot();
    if (FILE* f = std::fopen(path, "w")) {
      std::fprintf(f,
                   "used_bytes=%llu live_allocs=%llu live_reservations=%llu live_handles=%llu live_mappings=%llu "
                   "context_refs=%llu peak_used_bytes=%llu creates=%llu maps=%llu retains=%llu out_of_memory=%llu "
                   "invalid=%llu\n",
                   static_cast<unsigned long long>(l.used_bytes), static_cast<unsigned long long>(l.live_allocs),
                   static_cast<unsigned long long>(l.live_reservations),
                   static_cast<unsigned long long>(l.live_handles), static_cast<unsigned long long>(l.live_mappings),
                   static_cast<unsigned long long>(l.context_refs), static_cast<unsigned long long>(l.peak_used_bytes),
                   static_cast<unsigned long long>(l.creates), static_cast<unsigned long long>(l.maps),
                   static_cast<unsigned long long>(l.retains), static_cast<unsigned long long>(l.out_of_memory),
                   static_cast<unsigned long long>(l.invalid));
      std::fclose(f);
    }
  }
};
LedgerAtExit ledger_at_exit;

// FRAGLAB_FAKE_CUDA_CALL_DELAY_US: the time every call takes, outside the lock.
void call_delay() {
  static const std::uint64_t us = env_bytes("FRAGLAB_FAKE_CUDA_CALL_DELAY_US", 0);
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

#define FAKE_LOCK                \
  call_delay();                  \
  State& s = state();            \
  std::lock_guard lock(s.mutex); \
  if (!s.initialised) return s.fail(CUDA_ERROR_NOT_INITIALIZED)

bool valid_device(const State& s, CUdevice device) { return device >= 0 && device < s.devices; }

bool pinned_on_device(const State& s, const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && valid_device(s, prop->location.id);
}

}  // namespace

extern "C" {

FakeCudaLedger fake_cuda_ledger() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.snapshot();
}

void fake_cuda_take_memory(std::int64_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.external = static_cast<std::uint64_t>(static_cast<std::int64_t>(s.external) + bytes);
}

}  // extern "C"

// ---- initialisation, devices, contexts (group__CUDA__INITIALIZE, __DEVICE, __PRIMARY_CTX, __CTX) ----

CUresult cuInit(unsigned int flags) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  // "Flags parameter should be 0": anything else is CUDA_ERROR_INVALID_VALUE.
  if (flags != 0) return s.fail(CUDA_ERROR_INVALID_VALUE);
  const char* no_gpu = std::getenv("FRAGLAB_FAKE_CUDA_NO_GPU");
  if ((no_gpu != nullptr && std::strcmp(no_gpu, "1") == 0) || s.devices <= 0) return s.fail(CUDA_ERROR_NO_DEVICE);
  s.initialised = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  FAKE_LOCK;
  if (count == nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  *count = s.devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_LOCK;
  // "ordinal: Device number to get handle for", in [0, cuDeviceGetCount()): else CUDA_ERROR_INVALID_DEVICE.
  if (device == nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(s, ordinal)) return s.fail(CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  FAKE_LOCK;
  if (name == nullptr || len <= 0) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(s, device)) return s.fail(CUDA_ERROR_INVALID_DEVICE);
  std::snprintf(name, static_cast<size_t>(len), "fraglab fake CUDA device %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  FAKE_LOCK;
  if (context == nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(s, device)) return s.fail(CUDA_ERROR_INVALID_DEVICE);
  ++s.context_refs;
  *context = primary_context(device);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  FAKE_LOCK;
  if (!valid_device(s, device)) return s.fail(CUDA_ERROR_INVALID_DEVICE);
  // "Releases the primary context interop on the device" once per retain; fake: a release
  // without a retain is an error.
  if (s.context_refs == 0) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  --s.context_refs;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  FAKE_LOCK;
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  FAKE_LOCK;
  if (current_context == nullptr) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS:
      *text = "no error";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *text = "invalid argument";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *text = "out of memory";
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
      *text = "initialization error";
      break;
    case CUDA_ERROR_NO_DEVICE:
      *text = "no CUDA-capable device is detected";
      break;
    case CUDA_ERROR_INVALID_DEVICE:
      *text = "invalid device ordinal";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *text = "invalid device context";
      break;
    default:
      *text = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// ---- memory (group__CUDA__MEM) ----

CUresult cuMemGetInfo(size_t* free, size_t* total) {
  FAKE_LOCK;
  if (current_context == nullptr) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  if (free == nullptr || total == nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  *free = s.free_bytes();
  *total = s.total;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* pointer, size_t size) {
  FAKE_LOCK;
  if (current_context == nullptr) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  // cuMemAlloc: "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE."
  if (pointer == nullptr || size == 0) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (size > s.free_bytes()) return s.fail(CUDA_ERROR_OUT_OF_MEMORY);
  // "The allocated memory is suitably aligned for any kind of variable" (256 bytes in practice).
  *pointer = s.place(size, 256);
  s.allocs.emplace(*pointer, size);
  s.use(static_cast<std::int64_t>(size));
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr pointer) {
  FAKE_LOCK;
  if (current_context == nullptr) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  // "Frees the memory space pointed to by dptr, which must have been returned by a previous call
  // to cuMemAlloc()": fake: anything else is CUDA_ERROR_INVALID_VALUE.
  auto it = s.allocs.find(pointer);
  if (it == s.allocs.end()) return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.use(-static_cast<std::int64_t>(it->second));
  s.allocs.erase(it);
  return CUDA_SUCCESS;
}

// ---- virtual memory management (group__CUDA__VA) ----

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  FAKE_LOCK;
  if (granularity == nullptr || !pinned_on_device(s, prop)) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* pointer, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  FAKE_LOCK;
  // "size: Size of the reserved virtual address range requested"; "alignment: Alignment of the
  // reserved virtual address range requested"; "flags: Currently unused, must be zero".
  // fake: size must be a whole number of granules (what cuMemMap can fill), alignment 0 or a power of 2.
  if (pointer == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 || (alignment & (alignment - 1)) != 0)
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (size > (std::uint64_t{1} << 47)) return s.fail(CUDA_ERROR_OUT_OF_MEMORY);  // beyond a 48-bit VA
  const size_t align = alignment > kGranularity ? alignment : kGranularity;
  // "addr: Fixed starting address range requested": a hint, honoured when the range is free.
  if (addr != 0 && addr % align == 0 && !s.overlaps(s.reservations, addr, size) && !s.overlaps(s.allocs, addr, size)) {
    *pointer = addr;
  } else {
    *pointer = s.place(size, align);
  }
  s.reservations.emplace(*pointer, size);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr pointer, size_t size) {
  FAKE_LOCK;
  // "Frees a virtual address range reserved by cuMemAddressReserve. The size must match what was
  // given to memAddressReserve." fake: and nothing may still be mapped in it.
  auto it = s.reservations.find(pointer);
  if (it == s.reservations.end() || it->second != size || s.mapped_overlap(pointer, size))
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  FAKE_LOCK;
  // "size: Size of the allocation requested", which "must be a multiple of the granularity"
  // (cuMemGetAllocationGranularity); "flags: flags for future use, must be zero now".
  if (handle == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 || !pinned_on_device(s, prop))
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  // Memory is taken here, not at cuMemMap: CUDA_ERROR_OUT_OF_MEMORY when the device has too little.
  if (size > s.free_bytes()) return s.fail(CUDA_ERROR_OUT_OF_MEMORY);
  *handle = s.next_handle++;
  s.handles.emplace(*handle, Handle{size, 1, 0});
  s.use(static_cast<std::int64_t>(size));
  ++s.ledger.creates;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_LOCK;
  // "The memory allocation will be freed when all outstanding mappings to the memory are unmapped
  // and when all outstanding references to the handle ... are also released. The generic memory
  // handle can be freed when there are still outstanding mappings made with this handle."
  // "If handle is not a valid handle the behavior is undefined": fake: CUDA_ERROR_INVALID_VALUE.
  auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.refs == 0) return s.fail(CUDA_ERROR_INVALID_VALUE);
  --it->second.refs;
  s.drop_if_unused(handle);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr pointer, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  FAKE_LOCK;
  // "Maps bytes of memory represented by handle starting from byte offset to size to address
  // range [addr, addr+size]. This range must be an address reservation previously reserved with
  // cuMemAddressReserve, and offset + size must be less than the size of the memory allocation.
  // Both ptr, size, and offset must be a multiple of the value given via
  // cuMemGetAllocationGranularity with the CU_MEM_ALLOC_GRANULARITY_MINIMUM flag."
  // ("less than" read as "at most": a whole allocation is mapped at offset 0.)
  auto h = s.handles.find(handle);
  if (h == s.handles.end() || h->second.refs == 0 || flags != 0 || size == 0 || pointer % kGranularity != 0 ||
      size % kGranularity != 0 || offset % kGranularity != 0 || offset + size > h->second.size)
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (s.reservation_of(pointer, size) == s.reservations.end()) return s.fail(CUDA_ERROR_INVALID_VALUE);
  // fake: a range already mapped cannot be mapped again (cuMemUnmap: unmapping "convert[s] the
  // address range to an address reservation and can be used for a future calls to cuMemMap").
  if (s.mapped_overlap(pointer, size)) return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.mappings.emplace(pointer, Mapping{size, handle});
  ++h->second.mappings;
  ++s.ledger.maps;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr pointer, size_t size) {
  FAKE_LOCK;
  // "The range must be the entire contiguous address range that was mapped to. In other words,
  // cuMemUnmap cannot unmap a sub-range of an address range mapped by cuMemCreate / cuMemMap. Any
  // backing memory allocations will be freed if there are no existing mappings and there are no
  // unreleased memory handles." A range not mapped (a double unmap) is CUDA_ERROR_INVALID_VALUE.
  auto it = s.mappings.find(pointer);
  if (it == s.mappings.end() || it->second.size != size) return s.fail(CUDA_ERROR_INVALID_VALUE);
  const CUmemGenericAllocationHandle handle = it->second.handle;
  s.mappings.erase(it);
  --s.handles.at(handle).mappings;
  s.drop_if_unused(handle);
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr pointer, size_t size, const CUmemAccessDesc* desc, size_t count) {
  FAKE_LOCK;
  // "Set the access flags for each location specified in desc for the given virtual address
  // range": the range must be mapped ("all mappings start with no accessibility setup").
  if (desc == nullptr || count == 0 || size == 0) return s.fail(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(s, desc[i].location.id))
      return s.fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (CUdeviceptr at = pointer; at < pointer + size;) {
    auto it = s.mappings.upper_bound(at);
    if (it == s.mappings.begin()) return s.fail(CUDA_ERROR_INVALID_VALUE);
    --it;
    if (it->first + it->second.size <= at) return s.fail(CUDA_ERROR_INVALID_VALUE);
    at = it->first + it->second.size;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  FAKE_LOCK;
  // "Given an address addr, returns the allocation handle of the backing memory allocation. The
  // handle is guaranteed to be the same handle value used to map the memory. If the address
  // requested is not mapped, the function will fail. The returned handle must be released with
  // corresponding number of calls to cuMemRelease." "The address addr, can be any address in a
  // range previously mapped by cuMemMap, and not necessarily the start address."
  const auto at = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(addr));
  auto it = s.mappings.upper_bound(at);
  if (handle == nullptr || it == s.mappings.begin()) return s.fail(CUDA_ERROR_INVALID_VALUE);
  --it;
  if (it->first + it->second.size <= at) return s.fail(CUDA_ERROR_INVALID_VALUE);
  *handle = it->second.handle;
  ++s.handles.at(*handle).refs;
  ++s.ledger.retains;
  return CUDA_SUCCESS;
}

// ---- the stream-ordered allocator (group__CUDA__MALLOC__ASYNC) ----

namespace {
const CUmemoryPool kDefaultPool = reinterpret_cast<CUmemoryPool>(std::uintptr_t{0x2000});
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  FAKE_LOCK;
  if (pool == nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(s, device)) return s.fail(CUDA_ERROR_INVALID_DEVICE);
  *pool = kDefaultPool;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  FAKE_LOCK;
  // fake: only the release threshold ("CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: (value type = cuuint64_t)
  // Amount of reserved memory in bytes to hold onto before trying to release memory back to the OS").
  if (pool != kDefaultPool || value == nullptr || attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.release_threshold = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t size, CUstream stream) {
  FAKE_LOCK;
  if (current_context == nullptr) return s.fail(CUDA_ERROR_INVALID_CONTEXT);
  if (pointer == nullptr || size == 0 || stream != nullptr)
    return s.fail(CUDA_ERROR_INVALID_VALUE);  // fake: stream 0 only
  auto cached = s.pool_free.lower_bound(size);
  size_t chunk = 0;
  if (cached != s.pool_free.end()) {  // reuse memory the pool holds
    chunk = cached->first;
    s.pool_free.erase(cached);
  } else {
    chunk = (size + kGranularity - 1) / kGranularity * kGranularity;  // the pool grows by whole granules
    if (chunk > s.free_bytes()) return s.fail(CUDA_ERROR_OUT_OF_MEMORY);
    s.pool_reserved += chunk;
    s.use(static_cast<std::int64_t>(chunk));
  }
  *pointer = s.place(chunk, kGranularity);
  s.pool_allocs.emplace(*pointer, chunk);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  FAKE_LOCK;
  auto it = s.pool_allocs.find(pointer);
  if (it == s.pool_allocs.end() || stream != nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.pool_free.emplace(it->second, true);
  s.pool_allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_LOCK;
  if (current_context == nullptr || stream != nullptr) return s.fail(CUDA_ERROR_INVALID_VALUE);
  // "When more than the release threshold bytes of memory are held by the memory pool, the
  // allocator will try to release memory back to the OS on the next call to stream, event or
  // context synchronize."
  s.release_cached(s.release_threshold);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  FAKE_LOCK;
  // "Releases memory back to the OS until the pool contains fewer than minBytesToKeep reserved
  // bytes, or there is no more memory that the allocator can safely release."
  if (pool != kDefaultPool) return s.fail(CUDA_ERROR_INVALID_VALUE);
  s.release_cached(keep);
  return CUDA_SUCCESS;
}
