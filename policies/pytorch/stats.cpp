// Flattening DeviceStats into torch.cuda.memory_stats()'s sorted key list (allocator-model §8).
//
// The keys and their order never change: they are a table, sorted as Python sorts them (byte
// order), each key with the position of its value in values() below. A listing (one per replay,
// detailed_stats) then copies the keys instead of building and sorting them every time.
#include "pytorch/stats.hpp"

#include <array>
#include <string_view>

namespace fraglab::cca {
namespace {

// Every value, in a fixed order: the nine StatArrays (allocation, segment, active,
// inactive_split, allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes,
// requested_bytes), each all/small_pool/large_pool, each allocated/current/freed/peak; then
// oversize_allocations and oversize_segments (same four fields); then the six counters.
constexpr std::size_t kValues = 9 * 3 * 4 + 2 * 4 + 6;

struct Key {
  const char* name;
  std::size_t value;  // index into values()
};
constexpr Key kKeys[] = {
    {"active.all.allocated", 24},
    {"active.all.current", 25},
    {"active.all.freed", 26},
    {"active.all.peak", 27},
    {"active.large_pool.allocated", 32},
    {"active.large_pool.current", 33},
    {"active.large_pool.freed", 34},
    {"active.large_pool.peak", 35},
    {"active.small_pool.allocated", 28},
    {"active.small_pool.current", 29},
    {"active.small_pool.freed", 30},
    {"active.small_pool.peak", 31},
    {"active_bytes.all.allocated", 72},
    {"active_bytes.all.current", 73},
    {"active_bytes.all.freed", 74},
    {"active_bytes.all.peak", 75},
    {"active_bytes.large_pool.allocated", 80},
    {"active_bytes.large_pool.current", 81},
    {"active_bytes.large_pool.freed", 82},
    {"active_bytes.large_pool.peak", 83},
    {"active_bytes.small_pool.allocated", 76},
    {"active_bytes.small_pool.current", 77},
    {"active_bytes.small_pool.freed", 78},
    {"active_bytes.small_pool.peak", 79},
    {"allocated_bytes.all.allocated", 48},
    {"allocated_bytes.all.current", 49},
    {"allocated_bytes.all.freed", 50},
    {"allocated_bytes.all.peak", 51},
    {"allocated_bytes.large_pool.allocated", 56},
    {"allocated_bytes.large_pool.current", 57},
    {"allocated_bytes.large_pool.freed", 58},
    {"allocated_bytes.large_pool.peak", 59},
    {"allocated_bytes.small_pool.allocated", 52},
    {"allocated_bytes.small_pool.current", 53},
    {"allocated_bytes.small_pool.freed", 54},
    {"allocated_bytes.small_pool.peak", 55},
    {"allocation.all.allocated", 0},
    {"allocation.all.current", 1},
    {"allocation.all.freed", 2},
    {"allocation.all.peak", 3},
    {"allocation.large_pool.allocated", 8},
    {"allocation.large_pool.current", 9},
    {"allocation.large_pool.freed", 10},
    {"allocation.large_pool.peak", 11},
    {"allocation.small_pool.allocated", 4},
    {"allocation.small_pool.current", 5},
    {"allocation.small_pool.freed", 6},
    {"allocation.small_pool.peak", 7},
    {"inactive_split.all.allocated", 36},
    {"inactive_split.all.current", 37},
    {"inactive_split.all.freed", 38},
    {"inactive_split.all.peak", 39},
    {"inactive_split.large_pool.allocated", 44},
    {"inactive_split.large_pool.current", 45},
    {"inactive_split.large_pool.freed", 46},
    {"inactive_split.large_pool.peak", 47},
    {"inactive_split.small_pool.allocated", 40},
    {"inactive_split.small_pool.current", 41},
    {"inactive_split.small_pool.freed", 42},
    {"inactive_split.small_pool.peak", 43},
    {"inactive_split_bytes.all.allocated", 84},
    {"inactive_split_bytes.all.current", 85},
    {"inactive_split_bytes.all.freed", 86},
    {"inactive_split_bytes.all.peak", 87},
    {"inactive_split_bytes.large_pool.allocated", 92},
    {"inactive_split_bytes.large_pool.current", 93},
    {"inactive_split_bytes.large_pool.freed", 94},
    {"inactive_split_bytes.large_pool.peak", 95},
    {"inactive_split_bytes.small_pool.allocated", 88},
    {"inactive_split_bytes.small_pool.current", 89},
    {"inactive_split_bytes.small_pool.freed", 90},
    {"inactive_split_bytes.small_pool.peak", 91},
    {"max_split_size", 121},
    {"num_alloc_retries", 116},
    {"num_device_alloc", 119},
    {"num_device_free", 120},
    {"num_ooms", 117},
    {"num_sync_all_streams", 118},
    {"oversize_allocations.allocated", 108},
    {"oversize_allocations.current", 109},
    {"oversize_allocations.freed", 110},
    {"oversize_allocations.peak", 111},
    {"oversize_segments.allocated", 112},
    {"oversize_segments.current", 113},
    {"oversize_segments.freed", 114},
    {"oversize_segments.peak", 115},
    {"requested_bytes.all.allocated", 96},
    {"requested_bytes.all.current", 97},
    {"requested_bytes.all.freed", 98},
    {"requested_bytes.all.peak", 99},
    {"requested_bytes.large_pool.allocated", 104},
    {"requested_bytes.large_pool.current", 105},
    {"requested_bytes.large_pool.freed", 106},
    {"requested_bytes.large_pool.peak", 107},
    {"requested_bytes.small_pool.allocated", 100},
    {"requested_bytes.small_pool.current", 101},
    {"requested_bytes.small_pool.freed", 102},
    {"requested_bytes.small_pool.peak", 103},
    {"reserved_bytes.all.allocated", 60},
    {"reserved_bytes.all.current", 61},
    {"reserved_bytes.all.freed", 62},
    {"reserved_bytes.all.peak", 63},
    {"reserved_bytes.large_pool.allocated", 68},
    {"reserved_bytes.large_pool.current", 69},
    {"reserved_bytes.large_pool.freed", 70},
    {"reserved_bytes.large_pool.peak", 71},
    {"reserved_bytes.small_pool.allocated", 64},
    {"reserved_bytes.small_pool.current", 65},
    {"reserved_bytes.small_pool.freed", 66},
    {"reserved_bytes.small_pool.peak", 67},
    {"segment.all.allocated", 12},
    {"segment.all.current", 13},
    {"segment.all.freed", 14},
    {"segment.all.peak", 15},
    {"segment.large_pool.allocated", 20},
    {"segment.large_pool.current", 21},
    {"segment.large_pool.freed", 22},
    {"segment.large_pool.peak", 23},
    {"segment.small_pool.allocated", 16},
    {"segment.small_pool.current", 17},
    {"segment.small_pool.freed", 18},
    {"segment.small_pool.peak", 19},
};
static_assert(std::size(kKeys) == kValues, "one key per value");

void put(std::int64_t*& out, const Stat& s) {
  *out++ = s.allocated;
  *out++ = s.current;
  *out++ = s.freed;
  *out++ = s.peak;
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> DeviceStats::listing(bool with_requested_bytes) const {
  std::array<std::int64_t, kValues> values{};
  std::int64_t* out = values.data();
  for (const StatArray* a : {&allocation, &segment, &active, &inactive_split, &allocated_bytes, &reserved_bytes,
                             &active_bytes, &inactive_split_bytes, &requested_bytes}) {
    for (const Stat& s : {a->all(), a->of(PoolKind::Small), a->of(PoolKind::Large)}) put(out, s);
  }
  put(out, oversize_allocations);
  put(out, oversize_segments);
  for (const std::int64_t counter :
       {num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc, num_device_free, max_split_size}) {
    *out++ = counter;
  }

  std::vector<std::pair<std::string, std::int64_t>> list;
  list.reserve(kValues);
  for (const Key& k : kKeys) {
    // 1.13 had no requested_bytes (its 12 keys are left out).
    if (!with_requested_bytes && std::string_view(k.name).starts_with("requested_bytes.")) continue;
    list.emplace_back(k.name, values[k.value]);
  }
  return list;
}

}  // namespace fraglab::cca
