// The time half of Device: which CUDA API calls each Device call stands for, and which of them
// synchronise the device (stall time). README "Device time" repeats these rules.
//
// Sources:
//  [A] PyTorch's c10/cuda/CUDACachingAllocator.cpp: a segment is one cudaMalloc and one cudaFree
//      (docs/allocator-model.md §5.1, §7); an expandable segment (ExpandableSegment) reserves its
//      address range with cuMemAddressReserve, maps each 2 MiB page with cuMemCreate + cuMemMap
//      and then calls cuMemSetAccess over the range mapped (mapAndSetAccess), and unmaps
//      (unmapHandles) after cudaStreamSynchronize of its stream (cudaDeviceSynchronize when it
//      has none) with cuMemUnmap + cuMemRelease per page; the destructor frees the range with
//      cuMemAddressFree. Quoted in pytorch/pytorch issue #196258
//      (https://github.com/pytorch/pytorch/issues/196258, CUDACachingAllocator.cpp#L1008-L1021 at
//      bfa6fd4) and issue #188008 (map one page at a time, then cuMemSetAccess).
//  [G] GMLake (antgroup/glake; anchors.md §1.1): a stitched block maps the physical handles of
//      existing blocks a second time, cuMemMap + cuMemSetAccess, with no cuMemCreate.
//  [S] cudaFree synchronises the device (cupy/cupy pull request #2898; an implementation detail
//      per cupy/cupy issue #3777); cudaDeviceSynchronize does by definition.
//
// The same rules apply to every policy that makes these Device calls (the arena policies use
// the VMM calls as PyTorch's expandable segments do): a page mapped is created and mapped, a page
// unmapped is unmapped and released after a synchronisation, as [A] does to not release memory
// that queued work may still use.
#include <algorithm>

#include "fraglab/device.hpp"

namespace fraglab {

std::uint64_t Device::pages(Bytes size, Bytes handle) const {
  const Bytes page = std::max<Bytes>(handle == 0 ? granularity() : handle, 1);
  return (size + page - 1) / page;
}

void Device::charge(ApiCall call, Bytes bytes, bool stalls) { charge_times(call, 1, bytes, stalls); }

// `count` calls of `bytes` each, in one addition (a range of many pages costs one step).
void Device::charge_times(ApiCall call, std::uint64_t count, Bytes bytes, bool stalls) {
  const double us = static_cast<double>(count) * costs_.microseconds(call, bytes);
  time_.device_us += us;
  if (stalls) time_.stall_us += us;
}

void Device::synchronize() { charge(ApiCall::CudaDeviceSynchronize, 0, /*stalls=*/true); }

// A failed cudaMalloc is a call too (the out-of-memory answer takes the driver's time).
void Device::time_malloc(Bytes size) { charge(ApiCall::CudaMalloc, size); }

void Device::time_free(Bytes size) { charge(ApiCall::CudaFree, size, /*stalls=*/true); }  // [S]

void Device::time_reserve(Addr addr, Bytes size) {
  reserved_ranges_[addr] = size;
  if (vmm_billed_) charge(ApiCall::CuMemAddressReserve, size);
}

void Device::time_release(Addr addr) {
  const auto it = reserved_ranges_.find(addr);
  const Bytes size = it == reserved_ranges_.end() ? 0 : it->second;
  if (it != reserved_ranges_.end()) reserved_ranges_.erase(it);
  if (vmm_billed_) charge(ApiCall::CuMemAddressFree, size);
}

// [A] mapAndSetAccess: per handle (a page of the segment's size; `handle` 0 = granularity())
// cuMemCreate + cuMemMap, then one cuMemSetAccess over the range. A refused map is charged one
// cuMemCreate of a handle: the call that ran out of memory (the handles a real driver would
// create before it are not known here).
void Device::time_map(Bytes size, Bytes handle, bool ok) {
  if (!vmm_billed_) return;
  const Bytes page = handle == 0 ? granularity() : handle;
  if (!ok) {
    charge(ApiCall::CuMemCreate, page);
    return;
  }
  if (handle_costs_.handle != page || page == 0) {
    handle_costs_ = {page, costs_.microseconds(ApiCall::CuMemCreate, page),
                     costs_.microseconds(ApiCall::CuMemMap, page)};
  }
  // charge_times() of both, with the figures kept: the same sums.
  const auto count = static_cast<double>(pages(size, page));
  time_.device_us += count * handle_costs_.create_us;
  time_.device_us += count * handle_costs_.map_us;
  charge(ApiCall::CuMemSetAccess, size);
}

// [A] unmapHandles: a synchronisation, then per handle cuMemUnmap + cuMemRelease.
void Device::time_unmap(Bytes size, Bytes handle) {
  if (!vmm_billed_) return;
  synchronize();
  const Bytes page = handle == 0 ? granularity() : handle;
  charge_times(ApiCall::CuMemUnmap, pages(size, page), page);
  charge_times(ApiCall::CuMemRelease, pages(size, page), page);
}

// [G] the existing handles mapped again: per page cuMemMap, one cuMemSetAccess.
void Device::time_map_alias(Bytes size) {
  charge_times(ApiCall::CuMemMap, pages(size), granularity());
  charge(ApiCall::CuMemSetAccess, size);
}

// [G] an alias unmapped: per page cuMemUnmap; the handles stay (their own pages keep them).
void Device::time_unmap_alias(Bytes size) { charge_times(ApiCall::CuMemUnmap, pages(size), granularity()); }

}  // namespace fraglab
