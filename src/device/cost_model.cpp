// The cost model's call names and default figures (fraglab/cost_model.hpp; README "Device time").
//
// Where the defaults come from. Each figure below names its source with its GPU and driver; where
// this project found no published figure for a call, the comment says so and which cited figures
// it is derived from. Where an A100-class figure was published it is used (the study fraglab
// models ran on an A100 80 GB). Replace them with measurements of your own GPU: `--cost-model
// FILE.json` (the format in the README; `fraglab calibrate` writes one where it is built).
//
//  [V] vAttention (Prabhu et al., ASPLOS 2025; arXiv 2405.04437v3, Table 3, the 2 MB column:
//      stock CUDA, microseconds per call): cuMemAddressReserve 2, cuMemCreate 29, cuMemMap 2,
//      cuMemSetAccess 38, cuMemUnmap 34, cuMemRelease 23, cuMemAddressFree 1. GPU: the paper's
//      A100 80 GB testbed (its artifact, microsoft/vattention
//      scripts/artifact_asplos25/README.md: tested on A100 GPUs, needs CUDA 12.1 or later; its
//      modified driver module is NVIDIA 545.23.06, nvidia-vattn-uvm-driver/README.md); the
//      driver is not stated next to the table. This project read the table through a public
//      transcription of it and could not open the paper's table itself: check these seven
//      figures against the paper.
//  [K] ovg-project/kvcached, benchmarks/bench_vmm/README.md "Sample Output on A100" (84.5 GB
//      free, so an 80 GB A100; driver not stated): one thread, 4096 pages of 2 MB, averages
//      cuMemCreate 193.32, cuMemMap 1.45, cuMemSetAccess 35.99, cuMemUnmap 25.63 us, one 8 GB
//      cuMemAddressReserve 19 us. Not used as a default; it agrees with [V] within 30% on map,
//      set-access and unmap, and puts cuMemCreate 6.7 times higher: cuMemCreate is the least
//      certain figure here.
//  [J] JuliaGPU/CUDA.jl. Issue #279 (comment of 2020-07-08,
//      https://github.com/JuliaGPU/CUDA.jl/issues/279): `CUDA.synchronize()` with nothing
//      queued, median 465.6 ns over 10,000 samples; the CUDA.jl of that time defines it as
//      cuCtxSynchronize, the driver call behind cudaDeviceSynchronize. Pull request #746
//      (2021-03-02, https://github.com/JuliaGPU/CUDA.jl/pull/746): CUDA 11.2's stream-ordered
//      allocator (a per-device memory pool), 8.79 M allocations of a workload, 1.68 us per
//      allocation on average (1.19 us per free). GPU and driver not stated in either.
//  [C] Cytnx-dev/Cytnx pull request #850 (comment of 2026-07-02,
//      https://github.com/Cytnx-dev/Cytnx/pull/850): a loop of cudaMalloc, one kernel launch and a
//      direct cudaFree of a small array took 14.0 us per iteration with a 0 us kernel, on a GTX
//      1660 SUPER / RTX 2080 Ti (driver and CUDA versions not stated there). The only per-call
//      cudaMalloc/cudaFree figure this project found published; no A100 figure was found. It
//      includes one kernel launch, so half of it per call is an upper bound for a small array;
//      the segments an allocator cudaMallocs (2 MiB and more) may well cost more.
//  [P] pytorch/pytorch pull request #96995 (expandable segments,
//      https://github.com/pytorch/pytorch/pull/96995), the comment in CUDACachingAllocator.cpp:
//      the cost to map/unmap is proportional to the number of 2 MiB physical chunks (hence the
//      VMM calls are charged per page, src/device/device_time.cpp). No figure.
//  [S] cupy/cupy pull request #2898 (https://github.com/cupy/cupy/pull/2898): cudaFree (not
//      cudaMalloc) synchronises the device; cupy/cupy issue #3777 (NVIDIA's jrhemstad): that
//      synchronisation is an undocumented implementation detail of cudaFree.
//
// No size dependence (per_gib_us) was found published for an A100: every per_gib_us is 0.
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

// [V], 2 MB pages, A100 80 GB.
constexpr double kAddressReserveUs = 2.0;
constexpr double kAddressFreeUs = 1.0;
constexpr double kCreateUs = 29.0;
constexpr double kReleaseUs = 23.0;
constexpr double kMapUs = 2.0;
constexpr double kUnmapUs = 34.0;
constexpr double kSetAccessUs = 38.0;

// [J] #279: the median no-op synchronisation, 465.6 ns.
constexpr double kSynchronizeUs = 0.4656;
// [J] #746: the average stream-ordered allocation, 1.68 us.
constexpr double kPoolAllocUs = 1.68;

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
  // [C]: cudaMalloc and cudaFree, 7.0 us each (consumer GPUs; no A100 figure found).
  m[ApiCall::CudaMalloc] = {kMallocOrFreeUs, 0};
  m[ApiCall::CudaFree] = {kMallocOrFreeUs, 0};
  // [J] #279: a synchronisation with nothing queued, 0.4656 us (GPU not stated). The wait for
  // queued work is not modelled.
  m[ApiCall::CudaDeviceSynchronize] = {kSynchronizeUs, 0};
  // [V]: the VMM calls per 2 MB page (A100 80 GB); device_time.cpp charges them per page [P].
  m[ApiCall::CuMemAddressReserve] = {kAddressReserveUs, 0};
  m[ApiCall::CuMemAddressFree] = {kAddressFreeUs, 0};
  m[ApiCall::CuMemCreate] = {kCreateUs, 0};
  m[ApiCall::CuMemRelease] = {kReleaseUs, 0};
  m[ApiCall::CuMemMap] = {kMapUs, 0};
  m[ApiCall::CuMemUnmap] = {kUnmapUs, 0};
  m[ApiCall::CuMemSetAccess] = {kSetAccessUs, 0};
  // [J] #746: cudaMallocAsync served from the pool, 1.68 us (GPU not stated).
  m[ApiCall::CudaMallocAsyncHit] = {kPoolAllocUs, 0};
  // cudaMallocAsync that grows the pool, and cudaMemPoolTrimTo that shrinks it: no published
  // figure found. Derived: the pool's driver maps and unmaps physical memory as the VMM calls do,
  // so a miss is a hit [J] plus one page created, mapped and made accessible [V] (1.68 + 29 + 2 +
  // 38 = 70.68 us), and a trim one page unmapped and released [V] (34 + 23 = 57 us). How many
  // pages the driver maps per call is not published, so neither grows with the bytes.
  m[ApiCall::CudaMallocAsyncMiss] = {kPoolAllocUs + kCreateUs + kMapUs + kSetAccessUs, 0};
  m[ApiCall::CudaMemPoolTrimTo] = {kUnmapUs + kReleaseUs, 0};
  return m;
}

}  // namespace fraglab
