// CudaDriver: the CUDA driver API calls fraglab makes, as one table of function pointers resolved
// at run time (dlopen + dlsym), never linked: the same binary runs where no driver is installed and
// says so. FRAGLAB_CUDA_DRIVER=/path/lib.so loads another library instead of libcuda.so.1 (the
// tests load their fake driver, tests/cuda/fake_cuda_driver.cpp, this way).
//
// Types and versioned names come from the toolkit's cuda.h: cuMemAlloc is #defined there as
// cuMemAlloc_v2, so the member below and the symbol looked up are both the _v2 entry point. The
// stream-ordered pool calls (cuMemAllocAsync, ...) are only for `fraglab calibrate`.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

namespace fraglab::cuda {

// X(name) for every call of the table.
// clang-format off
#define FRAGLAB_CUDA_DRIVER_CALLS(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) \
  X(cuCtxSynchronize) \
  X(cuMemGetInfo) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemGetAllocationGranularity) \
  X(cuMemAddressReserve) \
  X(cuMemAddressFree) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuMemMap) \
  X(cuMemUnmap) \
  X(cuMemSetAccess) \
  X(cuMemRetainAllocationHandle) \
  X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolSetAttribute) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuMemPoolTrimTo) \
  X(cuStreamSynchronize) \
  X(cuGetErrorString)
// clang-format on

struct DriverTable {
#define FRAGLAB_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
  FRAGLAB_CUDA_DRIVER_CALLS(FRAGLAB_CUDA_MEMBER)
#undef FRAGLAB_CUDA_MEMBER
};

class CudaDriver {
 public:
  // Loads the driver library (FRAGLAB_CUDA_DRIVER, else libcuda.so.1) and resolves every call.
  // Throws InputError "--device 'cuda...': no CUDA driver (...)" when it is missing or incomplete,
  // and when cuInit fails (no GPU).
  static std::shared_ptr<const CudaDriver> load(const std::string& what);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  const DriverTable& api() const { return table_; }
  const std::string& library() const { return library_; }
  // "CUDA_ERROR_OUT_OF_MEMORY"-like text of a result, for messages.
  std::string error_text(CUresult result) const;

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;  // dlopen handle, never closed (see ~CudaDriver)
  std::string library_;
  DriverTable table_;
};

}  // namespace fraglab::cuda
