// measure_costs: times every driver call of the cost model on a GPU (`fraglab calibrate`).
#pragma once

#include <string>

#include "device/cuda/cuda_driver.hpp"
#include "fraglab/calibration.hpp"

namespace fraglab::cuda {

// Sizes 2 MiB, 4 MiB, ... 1 GiB (those that fit in half the device's free memory), `repeat`
// calls of each kind at each size: cudaMalloc / cudaFree (cuMemAlloc / cuMemFree underneath),
// cudaDeviceSynchronize (cuCtxSynchronize), cuMemAddressReserve / Free, and cuMemCreate,
// cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease of one allocation of that size, and the
// stream-ordered pool's cudaMallocAsync (cuMemAllocAsync) after a trim (miss) and again (hit) and
// cudaMemPoolTrimTo of what that left. Medians per
// size, fitted per call (fit_call). Throws InputError naming `what` when the driver fails.
Calibration measure_costs(const CudaDriver& driver, int ordinal, int repeat, const std::string& what);

}  // namespace fraglab::cuda
