// CostModel: how long each CUDA API call an allocator makes takes (README "Device time"). The
// Device (fraglab/device.hpp) charges every call it sees against it, so every policy is timed the
// same way; the figures are defaults from published measurements (src/device/cost_model.cpp cites
// each) or a `--cost-model FILE.json` (read_cost_model; the format is in the README).
//
// The time of one call of an API moving B bytes = fixed_us + per_gib_us * B / 2^30 microseconds.
// An estimate: calls are summed one after the other, with no overlap with computation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab {

// The API calls the cost model knows, in the order of the file format's "calls" keys.
enum class ApiCall : std::uint8_t {
  CudaMalloc,
  CudaFree,
  CudaDeviceSynchronize,
  CuMemAddressReserve,
  CuMemAddressFree,
  CuMemCreate,
  CuMemRelease,
  CuMemMap,
  CuMemUnmap,
  CuMemSetAccess,
  CudaMallocAsyncHit,
  CudaMallocAsyncMiss,
  CudaMemPoolTrimTo,
};
inline constexpr std::size_t kApiCallCount = 13;

// The file format's key of each call ("cudaMalloc", "cudaMallocAsync_hit", ...).
std::string_view api_call_name(ApiCall call);
std::optional<ApiCall> api_call_named(std::string_view name);

struct CallCost {
  double fixed_us = 0;
  double per_gib_us = 0;
};

struct CostModel {
  std::array<CallCost, kApiCallCount> calls{};
  std::string gpu;  // optional descriptions, from the file
  std::string driver;
  std::string source;

  // The published figures (cost_model.cpp cites each one).
  static CostModel defaults();
  const CallCost& operator[](ApiCall call) const { return calls[static_cast<std::size_t>(call)]; }
  CallCost& operator[](ApiCall call) { return calls[static_cast<std::size_t>(call)]; }
  // Microseconds of one call moving `bytes`.
  double microseconds(ApiCall call, Bytes bytes) const {
    const CallCost& c = (*this)[call];
    return c.fixed_us + c.per_gib_us * (static_cast<double>(bytes) / static_cast<double>(GiB));
  }
};

// The defaults with the calls `path` names replaced. Throws InputError, one line naming the file
// and the key, on anything but the format of the README ("Device time").
CostModel read_cost_model(const std::string& path);
// The same from the text of such a file (`path` only names it in messages).
CostModel parse_cost_model(std::string_view text, const std::string& path);

// "fnv1a64:<16 hex digits>" of the figures (every call's fixed_us and per_gib_us, not the
// descriptions): a sweep's results file records it (fraglab/sweep.hpp, SweepMeta) so that resume
// and merge refuse rows whose device_time_s other figures produced.
std::string cost_model_digest(const CostModel& model);

}  // namespace fraglab
