// FreeRanges and MappedPages (policies/common/): the flat sorted arrays behind bestfit and
// cuda_async, checked against reference implementations that keep one flag per unit of address
// space (so coalescing, best fit and the mapped runs are derived by scanning, not by the code
// under test).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "common/free_ranges.hpp"
#include "common/mapped_pages.hpp"
#include "fraglab/rng.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::test {
namespace {

// Free space as one flag per unit of kUnit bytes over [kLo, kLo + kUnits * kUnit).
constexpr Addr kLo = 1 << 20;
constexpr Bytes kUnit = 512;
constexpr std::size_t kUnits = 256;

struct ReferenceFree {
  std::vector<bool> free = std::vector<bool>(kUnits, false);

  // Maximal runs of free units, in address order.
  std::vector<FreeRanges::Range> ranges() const {
    std::vector<FreeRanges::Range> out;
    for (std::size_t i = 0; i < kUnits;) {
      if (!free[i]) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < kUnits && free[j]) ++j;
      out.push_back({kLo + i * kUnit, (j - i) * kUnit});
      i = j;
    }
    return out;
  }
  // Smallest run of at least `size`, lowest address among equal sizes: a linear scan.
  std::optional<FreeRanges::Range> best_fit(Bytes size) const {
    std::optional<FreeRanges::Range> best;
    for (const FreeRanges::Range& r : ranges()) {
      if (r.size >= size && (!best || r.size < best->size)) best = r;
    }
    return best;
  }
};

std::size_t unit_of(Addr addr) { return (addr - kLo) / kUnit; }

void expect_same(const FreeRanges& set, const ReferenceFree& ref) {
  const std::vector<FreeRanges::Range> want = ref.ranges();
  ASSERT_EQ(set.by_address(), want);
  Bytes total = 0, largest = 0;
  for (const FreeRanges::Range& r : want) {
    total += r.size;
    largest = std::max(largest, r.size);
  }
  EXPECT_EQ(set.total(), total);
  EXPECT_EQ(set.largest(), largest);
  EXPECT_EQ(set.count(), want.size());
  for (Bytes size : {kUnit, 2 * kUnit, 3 * kUnit, 7 * kUnit, 32 * kUnit, kUnits * kUnit}) {
    EXPECT_EQ(set.best_fit(size), ref.best_fit(size)) << "best fit of " << size;
  }
  kit::AuditLog log("free_ranges_test");
  set.audit(log);
  EXPECT_TRUE(log.take().empty());
}

TEST(FreeRanges, InsertMergesWithBothNeighboursAndBestFitPrefersTheLowestAmongEqualSizes) {
  FreeRanges set;
  set.insert(1000, 100);
  set.insert(1200, 100);  // equal size, higher address
  set.insert(1500, 50);
  EXPECT_EQ(set.best_fit(60), (FreeRanges::Range{1000, 100}));
  EXPECT_EQ(set.best_fit(10), (FreeRanges::Range{1500, 50}));
  EXPECT_EQ(set.insert(1100, 100), (FreeRanges::Range{1000, 300}));  // touches both: one range
  EXPECT_EQ(set.count(), 2u);
  set.erase(1050, 10);  // splits [1000, 1300) in two
  EXPECT_EQ(set.by_address(), (std::vector<FreeRanges::Range>{{1000, 50}, {1060, 240}, {1500, 50}}));
  EXPECT_EQ(set.best_fit(50), (FreeRanges::Range{1000, 50}));  // 50 at 1000 before 50 at 1500
  EXPECT_EQ(set.total(), 340u);
  EXPECT_EQ(set.containing(1299), (FreeRanges::Range{1060, 240}));
  EXPECT_EQ(set.containing(1300), std::nullopt);
  EXPECT_THROW(set.insert(1040, 20), std::logic_error);  // overlaps [1000, 1050)
  EXPECT_THROW(set.erase(1040, 20), std::logic_error);   // [1050, 1060) is not free
}

// Random inserts, erases and erase_within calls, with and without the size index (best fit by
// scanning must pick the same range as the index).
void random_operations_match_the_reference(FreeRanges::SizeIndex size_index) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    FreeRanges set(size_index);
    ReferenceFree ref;
    for (int step = 0; step < 400; ++step) {
      const std::size_t at = rng.below(kUnits);
      const std::size_t len = 1 + rng.below(std::min<std::size_t>(8, kUnits - at));
      const auto first = ref.free.begin() + static_cast<std::ptrdiff_t>(at);
      const auto last = first + static_cast<std::ptrdiff_t>(len);
      const bool all_free = std::all_of(first, last, [](bool f) { return f; });
      const bool none_free = std::none_of(first, last, [](bool f) { return f; });
      if (rng.below(4) == 0) {  // whatever of [at, at + len) is free goes, in pieces or not at all
        EXPECT_EQ(set.erase_within(kLo + at * kUnit, kLo + (at + len) * kUnit), !none_free);
        std::fill(first, last, false);
      } else if (none_free) {
        set.insert(kLo + at * kUnit, len * kUnit);
        std::fill(first, last, true);
      } else if (all_free) {
        set.erase(kLo + at * kUnit, len * kUnit);
        std::fill(first, last, false);
      } else {
        continue;
      }
      expect_same(set, ref);
      const std::size_t probe = rng.below(kUnits);
      const std::optional<FreeRanges::Range> in = set.containing(kLo + probe * kUnit + 1);
      EXPECT_EQ(in.has_value(), static_cast<bool>(ref.free[probe]));
      if (in) {
        EXPECT_TRUE(unit_of(in->addr) <= probe && probe < unit_of(in->end()));
      }
      if (::testing::Test::HasFailure()) return;
    }
    set.clear();
    EXPECT_TRUE(set.empty());
    EXPECT_EQ(set.total(), 0u);
  }
}

TEST(FreeRanges, RandomOperationsMatchAPerUnitReference) {
  random_operations_match_the_reference(FreeRanges::SizeIndex::Kept);
}

TEST(FreeRanges, RandomOperationsMatchAPerUnitReferenceWithoutTheSizeIndex) {
  random_operations_match_the_reference(FreeRanges::SizeIndex::None);
}

// MappedPages against one flag per page; the device's reserved bytes must follow too.
TEST(MappedPages, RandomMapsAndUnmapsMatchAPerPageReference) {
  constexpr Bytes kPage = SimDevice::kPage;
  constexpr std::size_t kPages = 64;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    SimDevice device(SimDeviceConfig{1 * GiB, 0});  // 512 pages: never refuses here
    const Addr base = *device.reserve_range(kPages * kPage);
    MappedPages pages(device);
    std::vector<bool> mapped(kPages, false);
    for (int step = 0; step < 300; ++step) {
      const std::size_t lo = rng.below(kPages);
      const std::size_t hi = lo + 1 + rng.below(std::min<std::size_t>(6, kPages - lo));
      const Addr a = base + lo * kPage, b = base + hi * kPage;
      switch (rng.below(3)) {
        case 0:
          ASSERT_TRUE(pages.map_missing(a, b));
          std::fill(mapped.begin() + lo, mapped.begin() + hi, true);
          break;
        case 1: {
          const auto was = std::count(mapped.begin() + lo, mapped.begin() + hi, true);
          EXPECT_EQ(pages.unmap_within(a, b), static_cast<Bytes>(was) * kPage);
          std::fill(mapped.begin() + lo, mapped.begin() + hi, false);
          break;
        }
        default: {
          // Highest mapped pages of [lo, hi) first, whole pages until the budget is met.
          const Bytes budget = (1 + rng.below(3)) * kPage - rng.below(2) * (kPage / 2);
          Bytes want = 0;
          for (std::size_t p = hi; p-- > lo && want < budget;) {
            if (mapped[p]) {
              mapped[p] = false;
              want += kPage;
            }
          }
          EXPECT_EQ(pages.unmap_from_top(a, b, budget, kPage), want);
        }
      }
      std::vector<std::pair<Addr, Addr>> runs;
      for (std::size_t p = 0; p < kPages;) {
        if (!mapped[p]) {
          ++p;
          continue;
        }
        std::size_t q = p;
        while (q < kPages && mapped[q]) ++q;
        runs.emplace_back(base + p * kPage, base + q * kPage);
        p = q;
      }
      ASSERT_EQ(pages.runs(), runs);
      const auto count = static_cast<Bytes>(std::count(mapped.begin(), mapped.end(), true));
      EXPECT_EQ(pages.mapped_bytes(), count * kPage);
      EXPECT_EQ(device.reserved(), count * kPage);
      EXPECT_EQ(pages.mapped_within(a, b),
                static_cast<Bytes>(std::count(mapped.begin() + lo, mapped.begin() + hi, true)) * kPage);
    }
  }
}

}  // namespace
}  // namespace fraglab::test
