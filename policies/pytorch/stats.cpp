// Flattening DeviceStats into torch.cuda.memory_stats()'s sorted key list (allocator-model §8).
#include "pytorch/stats.hpp"

#include <algorithm>

namespace fraglab::cca {
namespace {

void add_stat(std::vector<std::pair<std::string, std::int64_t>>& out, const std::string& prefix, const Stat& s) {
  out.emplace_back(prefix + ".allocated", s.allocated);
  out.emplace_back(prefix + ".current", s.current);
  out.emplace_back(prefix + ".freed", s.freed);
  out.emplace_back(prefix + ".peak", s.peak);
}

void add_array(std::vector<std::pair<std::string, std::int64_t>>& out, const std::string& name, const StatArray& a) {
  add_stat(out, name + ".all", a.by_type[0]);
  add_stat(out, name + ".small_pool", a.by_type[1]);
  add_stat(out, name + ".large_pool", a.by_type[2]);
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> DeviceStats::listing(bool with_requested_bytes) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  out.reserve(128);
  add_array(out, "allocation", allocation);
  add_array(out, "segment", segment);
  add_array(out, "active", active);
  add_array(out, "inactive_split", inactive_split);
  add_array(out, "allocated_bytes", allocated_bytes);
  add_array(out, "reserved_bytes", reserved_bytes);
  add_array(out, "active_bytes", active_bytes);
  add_array(out, "inactive_split_bytes", inactive_split_bytes);
  if (with_requested_bytes) add_array(out, "requested_bytes", requested_bytes);
  add_stat(out, "oversize_allocations", oversize_allocations);
  add_stat(out, "oversize_segments", oversize_segments);
  out.emplace_back("num_alloc_retries", num_alloc_retries);
  out.emplace_back("num_ooms", num_ooms);
  out.emplace_back("num_sync_all_streams", num_sync_all_streams);
  out.emplace_back("num_device_alloc", num_device_alloc);
  out.emplace_back("num_device_free", num_device_free);
  out.emplace_back("max_split_size", max_split_size);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace fraglab::cca
