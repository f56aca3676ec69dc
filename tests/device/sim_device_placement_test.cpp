// SimDevice placement with ranges at requested addresses in the bump pointer's way, against a
// reference written from the model in include/fraglab/sim_device.hpp alone: a range that asks for
// no address goes to the lowest address at or above the bump pointer, aligned (2 MiB for a page
// or more, else 512 bytes), that overlaps no live range; the bump pointer then moves to its end.
// The reference scans every live range for that address; the device keeps a known-free window
// after the bump pointer (place()), which must give the same addresses whatever the order of
// requested-address placements, frees and releases.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "fraglab/sim_device.hpp"

namespace fraglab {
namespace {

constexpr Bytes kPage = 2 * MiB;

Bytes round_up(Bytes v, Bytes a) { return (v + a - 1) / a * a; }

struct Reference {
  Addr next = SimDevice::kBaseAddress;
  std::map<Addr, Bytes> live;  // address -> size (footprint or reserved range)

  bool overlaps(Addr addr, Bytes size) const {
    for (const auto& [a, s] : live) {
      if (a < addr + size && addr < a + s) return true;
    }
    return false;
  }
  Addr place(Bytes size) {
    const Bytes alignment = size >= kPage ? kPage : 512;
    Addr addr = round_up(next, alignment);
    // Step past the first overlapping range (lowest start first) until nothing overlaps.
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& [a, s] : live) {
        if (a < addr + size && addr < a + s) {
          addr = round_up(a + s, alignment);
          moved = true;
          break;
        }
      }
    }
    next = addr + size;
    return addr;
  }
};

TEST(SimDevicePlacement, BumpPlacementsAmongRequestedRangesMatchAScanOfEveryRange) {
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return rng() % n; };
    SimDevice device({.capacity = 1024 * GiB, .external = 0});
    Reference ref;
    std::map<Addr, bool> vmm;  // live ranges: address -> reserved range (vs malloc)
    for (int step = 0; step < 2000; ++step) {
      const std::uint64_t what = pick(10);
      if (what < 3) {
        // A range at a requested address near the bump pointer (above, below or across it).
        const Bytes size = pick(2) == 0 ? (1 + pick(8)) * kPage : round_up(1 + pick(3 * MiB), 512);
        const Addr at = round_up(ref.next + pick(64 * MiB) - std::min<Addr>(ref.next, 8 * MiB), 512);
        const bool free = at != 0 && !ref.overlaps(at, size);
        const bool as_range = size % kPage == 0 && at % kPage == 0 && pick(2) == 0;
        const auto got = as_range ? device.reserve_range(size, at) : device.malloc(size, at);
        ASSERT_TRUE(got);
        const Addr want = free ? at : ref.place(size);
        ASSERT_EQ(*got, want);
        ref.live[want] = size;
        vmm[want] = as_range;
      } else if (what < 7) {
        // A placement by the bump pointer: a malloc or an address range.
        const bool as_range = pick(4) == 0;
        const Bytes size = as_range ? (1 + pick(6)) * kPage : round_up(1 + pick(pick(2) == 0 ? 40 * MiB : 20000), 512);
        const auto got = as_range ? device.reserve_range(size) : device.malloc(size);
        ASSERT_TRUE(got);
        ASSERT_EQ(*got, ref.place(size));
        ref.live[*got] = size;
        vmm[*got] = as_range;
      } else if (!ref.live.empty()) {
        // Free or release a live range: the one nearest above the bump pointer half the time
        // (the end of the device's free window), else any.
        auto it = ref.live.lower_bound(ref.next);
        if (it == ref.live.end() || pick(2) == 0) {
          it = std::next(ref.live.begin(), static_cast<std::ptrdiff_t>(pick(ref.live.size())));
        }
        if (vmm[it->first]) {
          device.release_range(it->first);
        } else {
          device.free(it->first);
        }
        vmm.erase(it->first);
        ref.live.erase(it);
      }
    }
  }
}

}  // namespace
}  // namespace fraglab
