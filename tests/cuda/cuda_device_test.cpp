// CudaDevice on the fake driver, in this process: page accounting against the driver's ledger,
// error paths, out-of-memory, cleanup. Expected ledger values follow from the CUDA driver API's
// rules as the fake implements them (fake/fake_cuda_driver.cpp): one cuMemCreate + cuMemMap per
// 2 MiB page, memory freed when a handle has neither references nor mappings.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "cuda/fake_driver_env.hpp"
#include "device/cuda/calibrate.hpp"
#include "device/cuda/cuda_device.hpp"
#include "fraglab/device_spec.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

using testing::error_of;
using testing::FakeDriverHandle;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("FRAGLAB_CUDA_DRIVER", testing::kFakeDriver, 1); }
  void TearDown() override {
    // Every test leaves the driver as it found it: nothing held, no context retained.
    const FakeCudaLedger l = fake.ledger();
    EXPECT_EQ(l.used_bytes, 0u);
    EXPECT_EQ(l.live_allocs, 0u);
    EXPECT_EQ(l.live_reservations, 0u);
    EXPECT_EQ(l.live_handles, 0u);
    EXPECT_EQ(l.live_mappings, 0u);
    EXPECT_EQ(l.context_refs, 0u);
  }
  FakeDriverHandle fake;
};

TEST_F(CudaDeviceTest, SpecReadsTheDevicesMemory) {
  const DeviceSpec spec = parse_device_spec("cuda:0");
  EXPECT_TRUE(spec.is_cuda());
  EXPECT_EQ(spec.kind(), "cuda:0");
  EXPECT_EQ(spec.capacity(), 80 * GiB);  // the fake's default total
  EXPECT_EQ(spec.external(), 0u);
  EXPECT_EQ(parse_device_spec("cuda").cuda_ordinal, 0);
  // The spec keeps the primary context retained (once), and so every device made from it.
  EXPECT_EQ(fake.ledger().context_refs, 1u);
  {
    auto device = make_device(spec);
    EXPECT_EQ(fake.ledger().context_refs, 2u);
  }
  EXPECT_EQ(fake.ledger().context_refs, 1u);
  // Memory others hold when the spec is read is outside the allocator.
  fake.take_memory(static_cast<std::int64_t>(3 * GiB));
  EXPECT_EQ(parse_device_spec("cuda:0").external(), 3 * GiB);
  fake.take_memory(-static_cast<std::int64_t>(3 * GiB));
}

TEST_F(CudaDeviceTest, BadOrdinalsAndMissingDriversAreOneLineErrors) {
  EXPECT_EQ(error_of([] { parse_device_spec("cuda:1"); }),
            "--device 'cuda:1': no CUDA device 1 (expected an ordinal from 0 to 0; the driver sees 1 device)");
  EXPECT_EQ(error_of([] { parse_device_spec("cuda:-1"); }),
            "--device 'cuda:-1': expected cuda or cuda:N, N a device ordinal (e.g. cuda:0)");
  ::setenv("FRAGLAB_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  const std::string missing = error_of([] { parse_device_spec("cuda:0"); });
  EXPECT_EQ(missing.rfind("--device 'cuda:0': no CUDA driver (/nonexistent/libcuda.so.1 cannot be loaded", 0), 0u)
      << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos);
}

TEST_F(CudaDeviceTest, MallocIsOneCuMemAllocOfTheRoundedSize) {
  auto device = make_device(parse_device_spec("cuda:0"));
  const std::optional<Addr> a = device->malloc(1000);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(fake.ledger().used_bytes, 1024u);  // 1000 rounded up to 512 B, as sim counts it
  EXPECT_EQ(fake.ledger().live_allocs, 1u);
  EXPECT_EQ(device->reserved(), 1024u);
  device->free(*a);
  EXPECT_EQ(fake.ledger().used_bytes, 0u);
  EXPECT_EQ(device->reserved(), 0u);
}

TEST_F(CudaDeviceTest, PagesAliasesAndTheirRelease) {
  auto device = make_device(parse_device_spec("cuda:0"));
  const FakeCudaLedger start = fake.ledger();
  const Addr base = *device->reserve_range(10 * MiB);
  EXPECT_EQ(fake.ledger().live_reservations, 1u);
  EXPECT_EQ(fake.ledger().used_bytes, 0u);  // address space only
  ASSERT_TRUE(device->map(base, 4 * MiB));
  FakeCudaLedger l = fake.ledger();
  EXPECT_EQ(l.creates - start.creates, 2u);  // two 2 MiB pages
  EXPECT_EQ(l.live_handles, 2u);
  EXPECT_EQ(l.live_mappings, 2u);
  EXPECT_EQ(l.used_bytes, 4 * MiB);
  // An alias maps the same two handles again: no new memory, one retain per page.
  device->map_alias(base + 6 * MiB, 4 * MiB, base);
  l = fake.ledger();
  EXPECT_EQ(l.retains - start.retains, 2u);
  EXPECT_EQ(l.live_handles, 2u);
  EXPECT_EQ(l.live_mappings, 4u);
  EXPECT_EQ(l.used_bytes, 4 * MiB);
  EXPECT_EQ(device->reserved(), 4 * MiB);
  device->unmap_alias(base + 6 * MiB, 4 * MiB);
  EXPECT_EQ(fake.ledger().live_mappings, 2u);
  EXPECT_EQ(fake.ledger().used_bytes, 4 * MiB);
  device->unmap(base, 2 * MiB);  // one page of the two
  EXPECT_EQ(fake.ledger().used_bytes, 2 * MiB);
  EXPECT_EQ(fake.ledger().live_handles, 1u);
  device->unmap(base + 2 * MiB, 2 * MiB);
  device->release_range(base);
  EXPECT_EQ(fake.ledger().live_reservations, 0u);
  EXPECT_EQ(fake.ledger().invalid, start.invalid);  // the backend never broke a driver rule
}

TEST_F(CudaDeviceTest, DestructorReleasesEverythingStillHeld) {
  {
    auto device = make_device(parse_device_spec("cuda:0"));
    ASSERT_TRUE(device->malloc(3 * MiB).has_value());
    const Addr base = *device->reserve_range(8 * MiB);
    ASSERT_TRUE(device->map(base, 4 * MiB));
    device->map_alias(base + 4 * MiB, 2 * MiB, base + 2 * MiB);
    EXPECT_EQ(fake.ledger().used_bytes, 7 * MiB);
    EXPECT_EQ(fake.ledger().context_refs, 1u);
  }
  // TearDown checks the ledger is empty.
}

TEST_F(CudaDeviceTest, DriverOutOfMemoryIsTheDevicesOutOfMemory) {
  auto device = make_device(parse_device_spec("cuda:0"));
  // Another process takes all but 3 MiB after the spec was read: the accounting still sees 80 GiB,
  // the driver refuses, and the policy sees a failed map / malloc, with nothing left behind.
  fake.take_memory(static_cast<std::int64_t>(80 * GiB - 3 * MiB));
  const FakeCudaLedger before = fake.ledger();
  const Addr base = *device->reserve_range(8 * MiB);
  EXPECT_FALSE(device->map(base, 4 * MiB));  // the first page fits, the second does not
  EXPECT_EQ(fake.ledger().out_of_memory - before.out_of_memory, 1u);
  EXPECT_EQ(fake.ledger().used_bytes, 0u);  // the first page was unmapped and released again
  EXPECT_EQ(fake.ledger().live_mappings, 0u);
  EXPECT_EQ(device->reserved(), 0u);
  EXPECT_EQ(device->counters().map_failures, 1u);
  EXPECT_FALSE(device->malloc(4 * MiB).has_value());
  EXPECT_EQ(device->counters().malloc_failures, 1u);
  ASSERT_TRUE(device->map(base, 2 * MiB));  // what is free still maps
  device->unmap(base, 2 * MiB);
  device->release_range(base);
  fake.take_memory(-static_cast<std::int64_t>(80 * GiB - 3 * MiB));
  EXPECT_EQ(fake.ledger().invalid, before.invalid);
}

TEST_F(CudaDeviceTest, PolicyMisuseIsCaughtBeforeTheDriver) {
  auto device = make_device(parse_device_spec("cuda:0"));
  const Addr base = *device->reserve_range(4 * MiB);
  ASSERT_TRUE(device->map(base, 2 * MiB));
  device->unmap(base, 2 * MiB);
  const FakeCudaLedger before = fake.ledger();
  EXPECT_THROW(device->unmap(base, 2 * MiB), std::logic_error);  // as on sim
  EXPECT_THROW(device->free(0x1234), std::logic_error);
  EXPECT_EQ(fake.ledger().invalid, before.invalid);  // the driver was not asked
  device->release_range(base);
}

TEST_F(CudaDeviceTest, FakeDriverFollowsTheDocumentedRules) {
  const auto driver = cuda::CudaDriver::load("test");
  const cuda::DriverTable& api = driver->api();
  CUcontext context = nullptr;
  ASSERT_EQ(api.cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.cuCtxSetCurrent(context), CUDA_SUCCESS);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr range = 0;
  ASSERT_EQ(api.cuMemAddressReserve(&range, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(api.cuMemCreate(&handle, 4 * MiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(api.cuMemCreate(&handle, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);  // not whole granules
  CUmemGenericAllocationHandle huge = 0;
  EXPECT_EQ(api.cuMemCreate(&huge, 81 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(api.cuMemMap(range + MiB, 2 * MiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);      // unaligned
  EXPECT_EQ(api.cuMemMap(range + 6 * MiB, 4 * MiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // past the range
  ASSERT_EQ(api.cuMemMap(range, 4 * MiB, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(api.cuMemMap(range + 2 * MiB, 2 * MiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
  EXPECT_EQ(api.cuMemUnmap(range, 2 * MiB), CUDA_ERROR_INVALID_VALUE);  // a sub-range of a mapping
  // Released while mapped: the memory stays until the mapping goes.
  ASSERT_EQ(api.cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(fake.ledger().used_bytes, 4 * MiB);
  ASSERT_EQ(api.cuMemUnmap(range, 4 * MiB), CUDA_SUCCESS);
  EXPECT_EQ(fake.ledger().used_bytes, 0u);
  EXPECT_EQ(api.cuMemUnmap(range, 4 * MiB), CUDA_ERROR_INVALID_VALUE);  // a double unmap
  CUmemGenericAllocationHandle retained = 0;
  EXPECT_EQ(api.cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(range)), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api.cuMemAddressFree(range, 8 * MiB), CUDA_SUCCESS);
  ASSERT_EQ(api.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(CudaDeviceTest, CalibrationMeasuresEveryCallAtEverySize) {
  const auto driver = cuda::CudaDriver::load("test");
  const Calibration c = cuda::measure_costs(*driver, 0, 3, "test");
  EXPECT_EQ(c.gpu, "fraglab fake CUDA device 0");
  ASSERT_FALSE(c.calls.empty());
  for (const CallFit& call : c.calls) {
    SCOPED_TRACE(call.name);
    EXPECT_EQ(call.medians.size(), 10u);  // 2 MiB, 4 MiB, ... 1 GiB
    EXPECT_EQ(call.medians.front().bytes, 2 * MiB);
    EXPECT_EQ(call.medians.back().bytes, GiB);
    EXPECT_EQ(call.samples, 30u);
    EXPECT_GE(call.fixed_us, 0.0);
    EXPECT_GE(call.per_gib_us, 0.0);
  }
}

}  // namespace
}  // namespace fraglab
