// SimDevice under long random call sequences, against a reference written from the model in
// include/fraglab/sim_device.hpp alone: a bump pointer that never reuses an address (512-byte
// units, 2 MiB alignment for ranges of a page or more), reserved = Σ malloc footprints + mapped
// pages, a malloc or map that would pass capacity − external fails and changes nothing. The
// reference keeps mapped memory page by page in a std::set, the device in merged runs.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "fraglab/sim_device.hpp"

namespace fraglab {
namespace {

constexpr Bytes kPage = 2 * MiB;

Bytes round_up(Bytes v, Bytes a) { return (v + a - 1) / a * a; }

struct Reference {
  Bytes limit = 0;
  Addr next = SimDevice::kBaseAddress;
  Bytes reserved = 0;
  std::map<Addr, Bytes> mallocs;  // address -> footprint
  std::set<Addr> mapped;          // mapped pages

  Addr place(Bytes size) {
    const Addr addr = round_up(next, size >= kPage ? kPage : 512);
    next = addr + size;
    return addr;
  }
};

TEST(SimDeviceRandom, MallocFreeMapUnmapMatchAPageByPageReference) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const Bytes capacity = 200 * MiB;
    const Bytes external = (seed % 3) * 8 * MiB;
    SimDevice device({.capacity = capacity, .external = external});
    Reference ref;
    ref.limit = capacity - external;
    // A few VMM ranges of 16 pages each, reserved up front (address space costs no memory).
    std::vector<Addr> ranges;
    for (int i = 0; i < 3; ++i) {
      const auto r = device.reserve_range(16 * kPage);
      ASSERT_TRUE(r);
      EXPECT_EQ(*r, ref.place(16 * kPage));
      ranges.push_back(*r);
    }
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    for (int step = 0; step < 3000; ++step) {
      switch (pick(4)) {
        case 0: {  // malloc: small sizes mostly, sometimes pages
          const Bytes size = pick(4) == 0 ? (1 + pick(60)) * MiB + pick(3) : 1 + pick(20000);
          const Bytes footprint = round_up(size, 512);
          const auto addr = device.malloc(size);
          if (ref.reserved + footprint > ref.limit) {
            EXPECT_FALSE(addr);
            break;
          }
          ASSERT_TRUE(addr);
          EXPECT_EQ(*addr, ref.place(footprint));
          ref.mallocs[*addr] = footprint;
          ref.reserved += footprint;
          break;
        }
        case 1: {  // free a random live malloc
          if (ref.mallocs.empty()) break;
          auto it = std::next(ref.mallocs.begin(), static_cast<std::ptrdiff_t>(pick(ref.mallocs.size())));
          device.free(it->first);
          ref.reserved -= it->second;
          ref.mallocs.erase(it);
          break;
        }
        case 2: {  // map a run of unmapped pages in a range
          const Addr range = ranges[pick(ranges.size())];
          const std::size_t first = pick(16);
          std::size_t pages = 0;
          while (first + pages < 16 && pages < 4 && !ref.mapped.contains(range + (first + pages) * kPage)) ++pages;
          if (pages == 0) break;
          const Addr addr = range + first * kPage;
          const bool ok = device.map(addr, pages * kPage);
          EXPECT_EQ(ok, ref.reserved + pages * kPage <= ref.limit);
          if (!ok) break;
          for (std::size_t p = 0; p < pages; ++p) ref.mapped.insert(addr + p * kPage);
          ref.reserved += pages * kPage;
          break;
        }
        default: {  // unmap a run of mapped pages (possibly the middle of a merged run)
          if (ref.mapped.empty()) break;
          const Addr addr = *std::next(ref.mapped.begin(), static_cast<std::ptrdiff_t>(pick(ref.mapped.size())));
          std::size_t pages = 1;
          // (within its range: the ranges lie back to back from kBaseAddress, 16 pages each)
          auto in_range = [&](Addr a) { return (a - SimDevice::kBaseAddress) % (16 * kPage) != 0; };
          while (pages < 3 && in_range(addr + pages * kPage) && ref.mapped.contains(addr + pages * kPage)) ++pages;
          device.unmap(addr, pages * kPage);
          for (std::size_t p = 0; p < pages; ++p) ref.mapped.erase(addr + p * kPage);
          ref.reserved -= pages * kPage;
          break;
        }
      }
      ASSERT_EQ(device.reserved(), ref.reserved) << "step " << step;
      ASSERT_EQ(device.physical_in_use(), ref.reserved) << "step " << step;
    }
    // Backing, page by page in the ranges, and at each live malloc.
    for (const Addr range : ranges) {
      for (Bytes p = 0; p < 16; ++p) {
        EXPECT_EQ(device.is_backed(range + p * kPage, kPage), ref.mapped.contains(range + p * kPage));
      }
    }
    for (const auto& [addr, footprint] : ref.mallocs) EXPECT_TRUE(device.is_backed(addr, footprint));
    // A mapped page already mapped cannot be mapped again; an unmapped one cannot be unmapped.
    if (!ref.mapped.empty()) {
      EXPECT_THROW(device.map(*ref.mapped.begin(), kPage), std::logic_error);
    }
    for (const Addr range : ranges) {
      if (!ref.mapped.contains(range)) {
        EXPECT_THROW(device.unmap(range, kPage), std::logic_error);
      }
    }
  }
}

}  // namespace
}  // namespace fraglab
