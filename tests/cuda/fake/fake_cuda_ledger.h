// The ledger of the fake CUDA driver (fake_cuda_driver.cpp): what it holds now and what it was
// asked, for tests to check the backend's page accounting, leaks and error paths. Read in-process
// with fake_cuda_ledger() (dlsym), or at the process's exit from the file named by
// FRAGLAB_FAKE_CUDA_LEDGER (one line: "key=value ..." of the fields below).
#pragma once

#include <cstdint>

extern "C" {

struct FakeCudaLedger {
  std::uint64_t used_bytes;         // physical memory held: cuMemAlloc'ed bytes + live cuMemCreate allocations
  std::uint64_t external_bytes;     // memory taken by fake_cuda_take_memory (another process)
  std::uint64_t live_allocs;        // cuMemAlloc'ed pointers not freed
  std::uint64_t live_reservations;  // cuMemAddressReserve'd ranges not freed
  std::uint64_t live_handles;       // cuMemCreate allocations whose memory is not freed yet
  std::uint64_t live_mappings;      // cuMemMap'ed ranges not unmapped
  std::uint64_t context_refs;       // primary context retains minus releases
  std::uint64_t peak_used_bytes;
  std::uint64_t creates;        // successful cuMemCreate calls
  std::uint64_t maps;           // successful cuMemMap calls
  std::uint64_t retains;        // successful cuMemRetainAllocationHandle calls
  std::uint64_t out_of_memory;  // calls answered CUDA_ERROR_OUT_OF_MEMORY
  std::uint64_t invalid;        // calls answered any other error
};

// The ledger now.
FakeCudaLedger fake_cuda_ledger();
// Takes (or, negative, gives back) memory behind the backend's back, as another process would.
void fake_cuda_take_memory(std::int64_t bytes);
}
