// The memory budget (fraglab/memory_budget.hpp).
#include "fraglab/memory_budget.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>

namespace fraglab {

namespace {
std::atomic<Bytes> budget{0};  // 0: not set, use the default
}  // namespace

Bytes default_memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return Bytes{16} * GiB;  // unknown machine: a modest default
  return static_cast<Bytes>(pages) / 4 * 3 * static_cast<Bytes>(page_size);
}

Bytes memory_budget() {
  const Bytes b = budget.load(std::memory_order_relaxed);
  if (b != 0) return b;
  static const Bytes fallback = default_memory_budget();
  return fallback;
}

void set_memory_budget(Bytes bytes) { budget.store(bytes, std::memory_order_relaxed); }

void check_memory_estimate(Bytes estimate, std::string_view what) {
  const Bytes limit = memory_budget();
  if (estimate > limit)
    throw InputError(fmt::format("{}: needs about {}, more than the memory budget of {} (--max-memory)", what,
                                 format_bytes(estimate), format_bytes(limit)));
}

}  // namespace fraglab
