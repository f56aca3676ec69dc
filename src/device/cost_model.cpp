// The cost model's call names and default figures (fraglab/cost_model.hpp; README "Device time").
//
// Where the defaults come from. Each figure below names its source; where this project found no
// published figure for a call, the comment says so and which cited figure it is derived from.
// Replace them with measurements of your own GPU: `--cost-model FILE.json` (the format in the
// README; `fraglab calibrate` writes one where it is built).
//
//  [C] Cytnx-dev/Cytnx pull request #850 (comment of 2026-07-02,
//      https://github.com/Cytnx-dev/Cytnx/pull/850): a loop of cudaMalloc, one kernel launch and a
//      direct cudaFree took 14.0 us per iteration with a 0 us kernel, on a GTX 1660 SUPER / RTX 2080
//      Ti (driver and CUDA versions not stated there). The only per-call cudaMalloc/cudaFree
//      figure this project found published; it includes one kernel launch, so half of it per call
//      is an upper bound.
//  [P] pytorch/pytorch pull request #96995 (expandable segments,
//      https://github.com/pytorch/pytorch/pull/96995), the comment in CUDACachingAllocator.cpp:
//      the cost to map/unmap is proportional to the number of 2 MiB physical chunks, and changing
//      mappings "should be considered an expensive operation". No figure.
//  [S] cupy/cupy pull request #2898 (https://github.com/cupy/cupy/pull/2898): cudaFree (not
//      cudaMalloc) synchronises the device; cupy/cupy issue #3777 (NVIDIA's jrhemstad): that
//      synchronisation is an undocumented implementation detail of cudaFree.
#include "fraglab/cost_model.hpp"

namespace fraglab {
namespace {

constexpr std::array<std::string_view, kApiCallCount> kNames = {
    "cudaMalloc",        "cudaFree",       "cudaDeviceSynchronize", "cuMemAddressReserve",
    "cuMemAddressFree",  "cuMemCreate",    "cuMemRelease",          "cuMemMap",
    "cuMemUnmap",        "cuMemSetAccess", "cudaMallocAsync_hit",   "cudaMallocAsync_miss",
    "cudaMemPoolTrimTo",
};

// Half of [C]'s 14.0 us cudaMalloc + launch + cudaFree iteration.
constexpr double kMallocOrFreeUs = 7.0;

}  // namespace

std::string_view api_call_name(ApiCall call) { return kNames[static_cast<std::size_t>(call)]; }

std::optional<ApiCall> api_call_named(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<ApiCall>(i);
  return std::nullopt;
}

CostModel CostModel::defaults() {
  CostModel m;
  m.source = "fraglab defaults (src/device/cost_model.cpp)";
  // [C]: cudaMalloc and cudaFree, 7.0 us each. No published size dependence found: per_gib_us 0.
  m[ApiCall::CudaMalloc] = {kMallocOrFreeUs, 0};
  m[ApiCall::CudaFree] = {kMallocOrFreeUs, 0};
  // No published figure found for a synchronisation with nothing queued; derived: the same as
  // cudaFree, which synchronises the device [S]. The wait for queued work is not modelled.
  m[ApiCall::CudaDeviceSynchronize] = {kMallocOrFreeUs, 0};
  // The VMM calls: no published per-call figure found; derived: each costs what a cudaMalloc
  // costs [C], charged per 2 MiB page as [P] says their cost grows. A page mapped costs
  // cuMemCreate + cuMemMap (and the range one cuMemSetAccess), so a page costs more than a
  // segment of cudaMalloc, as [P] warns.
  for (ApiCall call : {ApiCall::CuMemAddressReserve, ApiCall::CuMemAddressFree, ApiCall::CuMemCreate,
                       ApiCall::CuMemRelease, ApiCall::CuMemMap, ApiCall::CuMemUnmap, ApiCall::CuMemSetAccess})
    m[call] = {kMallocOrFreeUs, 0};
  // cudaMallocAsync served from the pool: no published figure found; not estimated (0): give one
  // with --cost-model.
  m[ApiCall::CudaMallocAsyncHit] = {0, 0};
  // cudaMallocAsync that grows the pool, and cudaMemPoolTrimTo that shrinks it: no published
  // figure found; derived: the driver allocates / releases memory as cudaMalloc / cudaFree do [C].
  m[ApiCall::CudaMallocAsyncMiss] = {kMallocOrFreeUs, 0};
  m[ApiCall::CudaMemPoolTrimTo] = {kMallocOrFreeUs, 0};
  return m;
}

}  // namespace fraglab
