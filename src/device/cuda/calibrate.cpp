// measure_costs: see calibrate.hpp. Each call is timed alone (steady_clock around the one driver
// call); the calls that free or unmap are timed on what the calls before them made, so every
// repetition makes and undoes one object of the size.
#include "device/cuda/calibrate.hpp"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "device/cuda/cuda_device.hpp"
#include "fraglab/cost_model.hpp"

namespace fraglab::cuda {
namespace {

template <class Call>
double time_us(Call&& call, CUresult& result) {
  const auto start = std::chrono::steady_clock::now();
  result = call();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Calibration measure_costs(const CudaDriver& driver, int ordinal, int repeat, const std::string& what) {
  const DriverTable& api = driver.api();
  const CudaDeviceInfo info = query_device(driver, ordinal, what);
  CUdevice device = 0;
  CUcontext context = nullptr;
  auto must = [&](CUresult result, const char* call, Bytes bytes) {
    if (result != CUDA_SUCCESS) {
      throw InputError(fmt::format("{}: {} of {} bytes failed during calibration: {}", what, call, bytes,
                                   driver.error_text(result)));
    }
  };
  must(api.cuDeviceGet(&device, ordinal), "cuDeviceGet", 0);
  must(api.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain", 0);
  struct ReleaseContext {
    const DriverTable& api;
    CUdevice device;
    ~ReleaseContext() { api.cuDevicePrimaryCtxRelease(device); }
  } release_context{api, device};
  must(api.cuCtxSetCurrent(context), "cuCtxSetCurrent", 0);

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  // The stream-ordered pool keeps what is freed into it (release threshold: everything) until
  // trimmed, so an allocation after a trim is a miss and the same allocation again a hit.
  CUmemoryPool pool = nullptr;
  must(api.cuDeviceGetDefaultMemPool(&pool, device), "cuDeviceGetDefaultMemPool", 0);
  cuuint64_t keep_all = ~cuuint64_t{0};
  must(api.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all), "cuMemPoolSetAttribute", 0);
  struct RestorePool {
    const DriverTable& api;
    CUmemoryPool pool;
    ~RestorePool() {
      cuuint64_t none = 0;  // the default threshold again
      api.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none);
      api.cuMemPoolTrimTo(pool, 0);
    }
  } restore_pool{api, pool};

  std::map<std::string, std::vector<CallSample>> medians;
  std::map<std::string, std::uint64_t> samples;
  for (Bytes bytes = 2 * MiB; bytes <= GiB && bytes <= info.free / 2; bytes *= 2) {
    std::map<std::string, std::vector<double>> times;
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < repeat; ++i) {
      CUdeviceptr pointer = 0;
      times["cudaMalloc"].push_back(time_us([&] { return api.cuMemAlloc(&pointer, bytes); }, r));
      must(r, "cuMemAlloc", bytes);
      times["cudaFree"].push_back(time_us([&] { return api.cuMemFree(pointer); }, r));
      must(r, "cuMemFree", bytes);
      times["cudaDeviceSynchronize"].push_back(time_us([&] { return api.cuCtxSynchronize(); }, r));
      must(r, "cuCtxSynchronize", bytes);

      CUdeviceptr range = 0;
      times["cuMemAddressReserve"].push_back(
          time_us([&] { return api.cuMemAddressReserve(&range, bytes, info.granularity, 0, 0); }, r));
      must(r, "cuMemAddressReserve", bytes);
      CUmemGenericAllocationHandle handle = 0;
      times["cuMemCreate"].push_back(time_us([&] { return api.cuMemCreate(&handle, bytes, &prop, 0); }, r));
      must(r, "cuMemCreate", bytes);
      times["cuMemMap"].push_back(time_us([&] { return api.cuMemMap(range, bytes, 0, handle, 0); }, r));
      must(r, "cuMemMap", bytes);
      times["cuMemSetAccess"].push_back(time_us([&] { return api.cuMemSetAccess(range, bytes, &access, 1); }, r));
      must(r, "cuMemSetAccess", bytes);
      times["cuMemUnmap"].push_back(time_us([&] { return api.cuMemUnmap(range, bytes); }, r));
      must(r, "cuMemUnmap", bytes);
      times["cuMemRelease"].push_back(time_us([&] { return api.cuMemRelease(handle); }, r));
      must(r, "cuMemRelease", bytes);
      times["cuMemAddressFree"].push_back(time_us([&] { return api.cuMemAddressFree(range, bytes); }, r));
      must(r, "cuMemAddressFree", bytes);

      must(api.cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo", 0);
      for (const char* name : {"cudaMallocAsync_miss", "cudaMallocAsync_hit"}) {
        CUdeviceptr block = 0;
        times[name].push_back(time_us([&] { return api.cuMemAllocAsync(&block, bytes, nullptr); }, r));
        must(r, "cuMemAllocAsync", bytes);
        must(api.cuMemFreeAsync(block, nullptr), "cuMemFreeAsync", bytes);
        must(api.cuStreamSynchronize(nullptr), "cuStreamSynchronize", bytes);
      }
      times["cudaMemPoolTrimTo"].push_back(time_us([&] { return api.cuMemPoolTrimTo(pool, 0); }, r));
      must(r, "cuMemPoolTrimTo", bytes);
    }
    for (auto& [name, values] : times) {
      samples[name] += values.size();
      medians[name].push_back(CallSample{bytes, median(values)});
    }
  }
  if (medians.empty()) {
    throw InputError(
        fmt::format("{}: too little free memory to calibrate ({} bytes free; 4 MiB needed)", what, info.free));
  }
  Calibration calibration;
  calibration.gpu = info.name;
  calibration.driver = fmt::format("{}.{}", info.driver_version / 1000, info.driver_version % 1000 / 10);
  const std::vector<CallSample>& sizes = medians.begin()->second;
  calibration.source = fmt::format(
      "fraglab calibrate on {} (driver {}): {} calls per size at {} sizes from {} to {} bytes, medians, "
      "least squares",
      info.name, calibration.driver, repeat, sizes.size(), sizes.front().bytes, sizes.back().bytes);
  // Every call of the cost-model file, in its order (fraglab/cost_model.hpp names them).
  for (std::size_t i = 0; i < kApiCallCount; ++i) {
    const std::string name(api_call_name(static_cast<ApiCall>(i)));
    CallFit fit;
    fit.name = name;
    fit.samples = samples[name];
    fit.medians = medians[name];
    fit_call(fit);
    calibration.calls.push_back(std::move(fit));
  }
  return calibration;
}

}  // namespace fraglab::cuda
