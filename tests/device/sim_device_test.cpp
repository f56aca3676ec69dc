// SimDevice: capacity, placement, VMM calls and the reserved-bytes accounting of Device.
#include <gtest/gtest.h>

#include "fraglab/sim_device.hpp"

namespace fraglab {
namespace {

struct Recorder : DeviceListener {
  std::vector<std::tuple<DeviceCall, Addr, Bytes>> calls;
  void on_device_call(DeviceCall call, Addr addr, Bytes size) override { calls.emplace_back(call, addr, size); }
};

TEST(SimDevice, MallocPlacesRangesDeterministicallyAndCountsReserved) {
  SimDevice device({.capacity = 1 * GiB, .external = 0});
  // First range at the base; a 20 MiB range is page aligned, so the next one starts right after.
  auto a = device.malloc(20 * MiB);
  auto b = device.malloc(2 * MiB);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, SimDevice::kBaseAddress);
  EXPECT_EQ(*b, SimDevice::kBaseAddress + 20 * MiB);
  EXPECT_EQ(device.reserved(), 22 * MiB);
  device.free(*a);
  EXPECT_EQ(device.reserved(), 2 * MiB);
  EXPECT_EQ(device.peak_reserved(), 22 * MiB);
  EXPECT_EQ(device.counters().malloc_calls, 2u);
  EXPECT_EQ(device.counters().free_calls, 1u);
  // Addresses are not reused by the bump pointer: the same calls always give the same addresses.
  auto c = device.malloc(20 * MiB);
  EXPECT_EQ(*c, SimDevice::kBaseAddress + 22 * MiB);
}

TEST(SimDevice, SmallMallocsAreRoundedTo512Bytes) {
  SimDevice device;
  auto a = device.malloc(1);
  auto b = device.malloc(513);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*b - *a, 512u);  // 1 byte occupies one 512-byte unit
  EXPECT_EQ(device.reserved(), 512u + 1024u);
}

TEST(SimDevice, MallocFailsPastCapacityMinusExternal) {
  SimDevice device({.capacity = 100 * MiB, .external = 30 * MiB});
  EXPECT_TRUE(device.malloc(60 * MiB));
  EXPECT_FALSE(device.malloc(12 * MiB));  // 60 + 12 > 70
  EXPECT_TRUE(device.malloc(10 * MiB));   // exactly 70
  EXPECT_EQ(device.counters().malloc_failures, 1u);
  EXPECT_EQ(device.reserved(), 70 * MiB);
}

TEST(SimDevice, AnAbsurdSizeFailsInsteadOfWrappingAround) {
  SimDevice device;
  EXPECT_FALSE(device.malloc(~Bytes{0}).has_value());
  EXPECT_FALSE(device.malloc(~Bytes{0} - 100).has_value());
  EXPECT_FALSE(device.reserve_range(~Bytes{0}).has_value());
  EXPECT_EQ(device.reserved(), 0u);
}

TEST(SimDevice, HonoursRequestedAddressWhenFree) {
  SimDevice device;
  const Addr wanted = 0x7f1234400000ull;
  auto a = device.malloc(20 * MiB, wanted);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, wanted);
  // Overlapping request: placed elsewhere.
  auto b = device.malloc(2 * MiB, wanted + MiB);
  ASSERT_TRUE(b);
  EXPECT_NE(*b, wanted + MiB);
}

TEST(SimDevice, BumpPointerSkipsRangesPlacedAtRequestedAddresses) {
  SimDevice device;
  ASSERT_TRUE(device.malloc(4 * MiB, SimDevice::kBaseAddress + 2 * MiB));
  auto a = device.malloc(4 * MiB);  // would overlap [base+2, base+6): placed after it
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, SimDevice::kBaseAddress + 6 * MiB);
}

// The edges of the address space's bookkeeping (fraglab/address_ranges.hpp), worked out from the
// model in sim_device.hpp: a requested range is honoured when it overlaps no live range, so one
// may touch its neighbours on both sides and fill a hole exactly; a freed range's addresses are
// free again, at either end of the address space; a failed malloc leaves no trace.
TEST(SimDevice, RequestedRangesMayTouchNeighboursAndFillHolesExactly) {
  const Addr base = SimDevice::kBaseAddress;
  SimDevice device({.capacity = 64 * MiB, .external = 0});
  ASSERT_EQ(device.malloc(4 * MiB, base + 8 * MiB), base + 8 * MiB);
  ASSERT_EQ(device.malloc(2 * MiB, base + 14 * MiB), base + 14 * MiB);
  // Adjacent on both sides: [12, 14) between [8, 12) and [14, 16) is exactly the hole.
  EXPECT_EQ(device.malloc(2 * MiB, base + 12 * MiB), base + 12 * MiB);
  // Ends right where [8, 12) begins.
  EXPECT_EQ(device.malloc(2 * MiB, base + 6 * MiB), base + 6 * MiB);
  // One 512-byte unit into a neighbour: refused, placed by the bump pointer instead (from the base:
  // [0, 6) is free, and a 2 MiB range fits at the base).
  EXPECT_EQ(device.malloc(2 * MiB, base + 16 * MiB - 512), base);
  // Freed at the low end and at the high end: both addresses are free again.
  device.free(base);
  device.free(base + 14 * MiB);
  EXPECT_EQ(device.malloc(2 * MiB, base), base);
  EXPECT_EQ(device.malloc(2 * MiB, base + 14 * MiB), base + 14 * MiB);
  EXPECT_EQ(device.reserved(), 12 * MiB);
  // The bump pointer stands at base + 2 MiB, and [2, 6) is free: 4 MiB fit there exactly; the next
  // 4 MiB fit nowhere before the end of the last range, [14, 16).
  EXPECT_EQ(device.malloc(4 * MiB), base + 2 * MiB);
  EXPECT_EQ(device.malloc(4 * MiB), base + 16 * MiB);
}

TEST(SimDevice, AFailedMallocLeavesTheAddressSpaceAsItWas) {
  const Addr base = SimDevice::kBaseAddress;
  SimDevice device({.capacity = 10 * MiB, .external = 0});
  ASSERT_EQ(device.malloc(4 * MiB), base);
  EXPECT_FALSE(device.malloc(8 * MiB, base + 4 * MiB));  // out of memory: 4 + 8 > 10
  EXPECT_FALSE(device.malloc(8 * MiB));
  // Nothing was placed: the bump pointer and the free range at base + 4 MiB are where they were.
  EXPECT_EQ(device.malloc(2 * MiB, base + 4 * MiB), base + 4 * MiB);
  EXPECT_EQ(device.malloc(4 * MiB), base + 6 * MiB);
  EXPECT_FALSE(device.malloc(512));  // exactly full
  device.free(base + 4 * MiB);
  device.free(base);
  EXPECT_EQ(device.reserved(), 4 * MiB);
  EXPECT_FALSE(device.is_backed(base, 512));
  EXPECT_TRUE(device.is_backed(base + 6 * MiB, 4 * MiB));
}

TEST(SimDevice, VmmMapAndUnmapCountReservedInPages) {
  SimDevice device({.capacity = 64 * MiB, .external = 0});
  Recorder rec;
  device.add_listener(&rec);
  auto range = device.reserve_range(100 * MiB);  // address space only: nothing reserved
  ASSERT_TRUE(range);
  EXPECT_EQ(device.reserved(), 0u);
  EXPECT_TRUE(device.map(*range, 20 * MiB));
  EXPECT_TRUE(device.map(*range + 20 * MiB, 40 * MiB));
  EXPECT_FALSE(device.map(*range + 60 * MiB, 20 * MiB));  // 80 MiB > 64 MiB capacity
  EXPECT_EQ(device.reserved(), 60 * MiB);
  device.unmap(*range + 10 * MiB, 20 * MiB);  // a hole in the middle of the merged run
  EXPECT_EQ(device.reserved(), 40 * MiB);
  EXPECT_EQ(device.device_allocs(), 2u);
  EXPECT_EQ(device.device_frees(), 1u);
  EXPECT_EQ(device.counters().map_failures, 1u);
  ASSERT_EQ(rec.calls.size(), 3u);
  EXPECT_EQ(rec.calls[2], std::make_tuple(DeviceCall::Unmap, *range + 10 * MiB, 20 * MiB));
  EXPECT_THROW(device.unmap(*range + 10 * MiB, 2 * MiB), std::logic_error);  // not mapped any more
  EXPECT_THROW(device.release_range(*range), std::logic_error);              // pages still mapped
  device.unmap(*range, 10 * MiB);
  device.unmap(*range + 30 * MiB, 30 * MiB);
  device.release_range(*range);
  EXPECT_EQ(device.reserved(), 0u);
}

// Mapped pages are kept as maximal runs (sim_device.cpp's invariants): a map joins the run ending
// where it starts and the one starting where it ends; an unmap leaves a head and a tail. An unmap
// must lie inside one run, so unmapping across the joints shows they were merged.
TEST(SimDevice, MappedRunsJoinAndSplitAtTheirEdges) {
  constexpr Bytes P = SimDevice::kPage;
  SimDevice device({.capacity = 64 * MiB, .external = 0});
  const Addr r = *device.reserve_range(20 * P);
  ASSERT_TRUE(device.map(r + 4 * P, 2 * P));
  ASSERT_TRUE(device.map(r + 8 * P, 2 * P));
  ASSERT_TRUE(device.map(r + 6 * P, 2 * P));  // joins both neighbours: [4, 10)
  ASSERT_TRUE(device.map(r + 2 * P, 2 * P));  // joins the run above only: [2, 10)
  EXPECT_EQ(device.reserved(), 8 * P);
  EXPECT_TRUE(device.is_backed(r + 2 * P, 8 * P));
  device.unmap(r + 2 * P, P);  // the head: [3, 10) is left
  device.unmap(r + 9 * P, P);  // the tail: [3, 9)
  device.unmap(r + 5 * P, P);  // the middle: [3, 5) and [6, 9)
  EXPECT_EQ(device.reserved(), 5 * P);
  EXPECT_FALSE(device.is_backed(r + 2 * P, P));
  EXPECT_TRUE(device.is_backed(r + 3 * P, 2 * P));
  EXPECT_FALSE(device.is_backed(r + 5 * P, P));
  EXPECT_TRUE(device.is_backed(r + 6 * P, 3 * P));
  EXPECT_FALSE(device.is_backed(r + 9 * P, P));
  EXPECT_THROW(device.unmap(r + 3 * P, 6 * P), std::logic_error);  // across the hole: two runs
  ASSERT_TRUE(device.map(r + 5 * P, P));                           // fills the hole: [3, 9) again
  device.unmap(r + 3 * P, 6 * P);
  EXPECT_EQ(device.reserved(), 0u);
  device.release_range(r);
}

TEST(SimDevice, MisuseIsALogicError) {
  SimDevice device;
  EXPECT_THROW(device.free(0x1234), std::logic_error);
  auto range = device.reserve_range(10 * MiB);
  EXPECT_THROW(device.map(*range, 3 * MiB), std::logic_error);            // not whole pages
  EXPECT_THROW(device.map(*range + 8 * MiB, 4 * MiB), std::logic_error);  // past the range end
}

TEST(SimDevice, AMapOverMappedPagesOrAnAliasIsALogicError) {
  constexpr Bytes P = SimDevice::kPage;
  SimDevice device({.capacity = 64 * MiB, .external = 0});
  const Addr r = *device.reserve_range(10 * P);
  ASSERT_TRUE(device.map(r + 2 * P, 2 * P));                     // [2, 4)
  EXPECT_THROW(device.map(r + P, 2 * P), std::logic_error);      // over its first page
  EXPECT_THROW(device.map(r + 3 * P, 2 * P), std::logic_error);  // over its last page
  EXPECT_THROW(device.map(r + 2 * P, P), std::logic_error);      // inside it
  EXPECT_THROW(device.map(r, 6 * P), std::logic_error);          // around it
  device.map_alias(r + 6 * P, P, r + 2 * P);                     // [6, 7) shows page 2
  EXPECT_THROW(device.map(r + 6 * P, P), std::logic_error);      // over the alias
  EXPECT_THROW(device.map(r + 5 * P, 2 * P), std::logic_error);  // over its start
  EXPECT_EQ(device.reserved(), 2 * P);
  EXPECT_TRUE(device.map(r + 4 * P, P));  // touching the run and not the alias: [2, 5)
  EXPECT_TRUE(device.map(r + 7 * P, P));  // right after the alias
  EXPECT_EQ(device.reserved(), 4 * P);
}

// Stitching (GMLake): pages mapped in two ranges are aliased into a third; the alias costs no
// memory, and the pages it shows cannot be unmapped under it.
TEST(SimDevice, AliasesMapPagesTwiceWithoutReservingMore) {
  SimDevice device({.capacity = 64 * MiB, .external = 0});
  auto a = device.reserve_range(4 * MiB);
  auto b = device.reserve_range(2 * MiB);
  auto stitched = device.reserve_range(6 * MiB);
  ASSERT_TRUE(a && b && stitched);
  ASSERT_TRUE(device.map(*a, 4 * MiB));
  ASSERT_TRUE(device.map(*b, 2 * MiB));
  Recorder rec;
  device.add_listener(&rec);
  device.map_alias(*stitched, 4 * MiB, *a);
  device.map_alias(*stitched + 4 * MiB, 2 * MiB, *b);
  EXPECT_EQ(device.reserved(), 6 * MiB);  // 4 + 2 MiB of pages; the alias adds nothing
  EXPECT_EQ(device.physical_in_use(), 6 * MiB);
  EXPECT_EQ(device.counters().alias_map_calls, 2u);
  EXPECT_EQ(device.device_allocs(), 2u);                        // the two maps; aliases are not new memory
  EXPECT_TRUE(device.is_backed(*stitched + 1 * MiB, 4 * MiB));  // spans both aliases
  EXPECT_THROW(device.unmap(*b, 2 * MiB), std::logic_error);    // still aliased
  EXPECT_THROW(device.release_range(*stitched), std::logic_error);
  EXPECT_THROW(device.map_alias(*stitched, 2 * MiB, *b), std::logic_error);  // overlaps an alias
  device.unmap_alias(*stitched + 4 * MiB, 2 * MiB);
  device.unmap(*b, 2 * MiB);
  EXPECT_FALSE(device.is_backed(*stitched + 1 * MiB, 4 * MiB));
  EXPECT_EQ(device.reserved(), 4 * MiB);
  ASSERT_EQ(rec.calls.size(), 4u);
  EXPECT_EQ(rec.calls[2], std::make_tuple(DeviceCall::UnmapAlias, *stitched + 4 * MiB, 2 * MiB));
  EXPECT_THROW(device.map_alias(*stitched + 4 * MiB, 2 * MiB, *b), std::logic_error);  // source gone
}

TEST(SimDevice, IsBackedCoversMallocRangesAndMappedPagesOnly) {
  SimDevice device;
  auto m = device.malloc(1000);
  auto r = device.reserve_range(6 * MiB);
  ASSERT_TRUE(m && r && device.map(*r, 2 * MiB) && device.map(*r + 4 * MiB, 2 * MiB));
  EXPECT_TRUE(device.is_backed(*m, 1000));
  EXPECT_TRUE(device.is_backed(*m + 512, 512));  // the 1024-byte footprint
  EXPECT_FALSE(device.is_backed(*m, 2000));
  EXPECT_TRUE(device.is_backed(*r, 2 * MiB));
  EXPECT_FALSE(device.is_backed(*r + 1 * MiB, 2 * MiB));  // runs into the unmapped middle page
  EXPECT_TRUE(device.is_backed(*r + 4 * MiB, 1));
  EXPECT_FALSE(device.is_backed(SimDevice::kBaseAddress - 4096, 16));
}

TEST(SimDeviceSpec, ParsesCapacityAndExternal) {
  EXPECT_EQ(parse_sim_device("sim").capacity, 80 * GiB);
  EXPECT_EQ(parse_sim_device("sim:40GiB").capacity, 40 * GiB);
  const auto c = parse_sim_device("sim:40GiB,external:512MiB");
  EXPECT_EQ(c.capacity, 40 * GiB);
  EXPECT_EQ(c.external, 512 * MiB);
  EXPECT_EQ(parse_sim_device("sim:capacity:1.5GB").capacity, 1500000000u);
  EXPECT_THROW(parse_sim_device("gpu"), InputError);
  EXPECT_THROW(parse_sim_device("sim:lots"), InputError);
  EXPECT_THROW(parse_sim_device("sim:1GiB,external:2GiB"), InputError);
  EXPECT_THROW(parse_sim_device("sim:1GiB,colour:red"), InputError);
  EXPECT_THROW(parse_sim_device("sim:0"), InputError);
}

// The error text of a spec parse_sim_device rejects.
std::string spec_error(const char* spec) {
  try {
    parse_sim_device(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SimDeviceSpec, SizesNeedAUnit) {
  // "sim:40" was 40 bytes; now an error showing the forms with the user's number:
  // 40 GiB = 40 * 1073741824 = 42949672960 bytes.
  const std::string bare = spec_error("sim:40");
  for (const char* form : {"'sim:40'", "capacity", "40GiB", "40GB", "42949672960B"}) {
    EXPECT_NE(bare.find(form), std::string::npos) << bare;
  }
  EXPECT_EQ(bare.find('\n'), std::string::npos) << "one line";
  // 1.5 GiB = 1610612736 bytes.
  EXPECT_NE(spec_error("sim:1.5").find("1.5GiB, 1.5GB, 1610612736B"), std::string::npos) << spec_error("sim:1.5");
  EXPECT_NE(spec_error("sim:40GiB,external:512").find("external '512' has no unit"), std::string::npos);
  // A unit that is not one: the same kind of error.
  EXPECT_NE(spec_error("sim:40GBi").find("42949672960B"), std::string::npos) << spec_error("sim:40GBi");
  EXPECT_NE(spec_error("sim:40gigs").find("unknown unit"), std::string::npos) << spec_error("sim:40gigs");
  // Every form the error shows is accepted (units are case-insensitive).
  EXPECT_EQ(parse_sim_device("sim:40GB").capacity, 40'000'000'000u);
  EXPECT_EQ(parse_sim_device("sim:42949672960B").capacity, 40 * GiB);
  EXPECT_EQ(parse_sim_device("sim:40gib").capacity, 40 * GiB);
  EXPECT_EQ(parse_sim_device("sim:40GiB,external:0").external, 0u);  // zero needs no unit
}

TEST(SimDeviceSpec, SizesOfAnExabyteOrMoreAreTooLargeNotAnUnknownUnit) {
  // 1e30 GiB overflows every integer type; 1024 TiB = 2^50 is fine, 2^60 bytes is the first refused.
  const std::string huge = spec_error("sim:1e30GiB");
  EXPECT_NE(huge.find("too large"), std::string::npos) << huge;
  EXPECT_EQ(huge.find("unknown unit"), std::string::npos) << huge;
  EXPECT_NE(spec_error("sim:80GiB,external:1e30GiB").find("external: '1e30GiB' is too large"), std::string::npos);
  EXPECT_NE(spec_error("sim:1152921504606846976B").find("too large"), std::string::npos);
  EXPECT_EQ(parse_sim_device("sim:1152921504606846975B").capacity, (Bytes{1} << 60) - 1);
  EXPECT_EQ(parse_sim_device("sim:1024TiB").capacity, Bytes{1} << 50);
  EXPECT_NE(spec_error("sim:2EiB").find("unknown unit"), std::string::npos);
}

TEST(SimDeviceSpec, NamesCapacity) {
  EXPECT_FALSE(names_capacity("sim"));
  EXPECT_FALSE(names_capacity("sim:external:1GiB"));
  EXPECT_TRUE(names_capacity("sim:40GiB"));
  EXPECT_TRUE(names_capacity("sim:capacity:40GiB,external:1GiB"));
  EXPECT_TRUE(names_capacity("sim:external:1GiB,40GiB"));
}

}  // namespace
}  // namespace fraglab

namespace fraglab {
namespace {

TEST(SimDevice, AddressHintsAreUsedOnceInOrder) {
  SimDevice device;
  device.hint_next_malloc(0x7f5500000000ull);
  device.hint_next_malloc(0x7f5600000000ull);
  EXPECT_EQ(*device.malloc(2 * MiB), 0x7f5500000000ull);
  EXPECT_EQ(*device.malloc(2 * MiB, 0x7f5700000000ull), 0x7f5700000000ull);  // explicit address wins
  EXPECT_EQ(*device.malloc(2 * MiB), 0x7f5600000000ull);
  EXPECT_EQ(*device.malloc(2 * MiB), SimDevice::kBaseAddress);  // hints used up: bump pointer
  device.hint_next_range(0x7f6000000000ull);
  EXPECT_EQ(*device.reserve_range(40 * MiB), 0x7f6000000000ull);
}

}  // namespace
}  // namespace fraglab

namespace fraglab {
namespace {

TEST(SimDevice, FreeMemoryIsWhatNoOneHolds) {
  SimDevice device({.capacity = 100 * MiB, .external = 30 * MiB});
  EXPECT_EQ(device.free_memory(), 70 * MiB);
  ASSERT_TRUE(device.malloc(20 * MiB));
  auto range = device.reserve_range(40 * MiB);
  ASSERT_TRUE(device.map(*range, 20 * MiB));
  EXPECT_EQ(device.free_memory(), 30 * MiB);  // 100 - 30 external - 20 malloc - 20 mapped
}

}  // namespace
}  // namespace fraglab
