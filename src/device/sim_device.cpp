// SimDevice: see include/fraglab/sim_device.hpp for the model.
//
// Invariants:
//  - ranges_ never overlap; a malloc range is backed entirely, a VMM range only where pages are
//    mapped;
//  - mapped_pages_ holds disjoint, non-adjacent runs (adjacent runs are merged), each inside one
//    VMM range, each a whole number of pages;
//  - physical_in_use_ = Σ malloc footprints + Σ mapped run sizes ≤ capacity − external;
//  - aliases_ never overlap each other or mapped runs, each lies inside one VMM range, and the
//    source of each lies inside one mapped run, which cannot be unmapped while the alias lives.
// Misuse by a policy (freeing an unknown address, unmapping what is not mapped) is a bug in the
// policy, not bad input: it throws std::logic_error.
#include "fraglab/sim_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fraglab {
namespace {

constexpr Bytes align_up(Bytes value, Bytes alignment) { return (value + alignment - 1) / alignment * alignment; }

// Whether an alias of `aliases` (start -> {size, source}) overlaps [addr, addr + size).
template <class Aliases>
bool overlaps_alias(const Aliases& aliases, Addr addr, Bytes size) {
  auto alias = aliases.lower_bound(addr);
  if (alias != aliases.end() && alias->first < addr + size) return true;
  return alias != aliases.begin() && std::prev(alias)->first + std::prev(alias)->second.size > addr;
}

}  // namespace

SimDevice::SimDevice(SimDeviceConfig config) : config_(config) {
  if (config_.external > config_.capacity) {
    throw InputError(
        fmt::format("device: external bytes ({}) exceed the capacity ({})", config_.external, config_.capacity));
  }
}

std::string SimDevice::kind() const { return "sim"; }

Bytes SimDevice::malloc_footprint(Bytes size) const {
  // Saturates instead of wrapping for absurd sizes (which then fail the capacity check).
  if (size > std::numeric_limits<Bytes>::max() - kMallocAlignment) return std::numeric_limits<Bytes>::max();
  return align_up(std::max<Bytes>(size, 1), kMallocAlignment);
}

bool SimDevice::range_is_free(Addr addr, Bytes size) const {
  if (addr == 0 || size == 0 || addr + size < addr) return false;
  const std::size_t next = ranges_.lower_bound(addr);
  if (next < ranges_.size() && ranges_[next].addr < addr + size) return false;
  return next == 0 || ranges_[next - 1].end() <= addr;
}

Addr SimDevice::place(Bytes size, Addr at) {
  if (at != kAnyAddress && range_is_free(at, size)) {
    // A range in the bump pointer's free window ends the window: the next bump placement
    // searches again (place_after_search).
    if (window_valid_ && at < window_end_ && at + size > next_address_) window_valid_ = false;
    return at;
  }
  const Bytes alignment = size >= kPage ? kPage : kMallocAlignment;
  const Addr addr = align_up(next_address_, alignment);
  // The usual case, without a search: the range fits in the window known to be free after the
  // bump pointer (up to the first range above it, or the end of the address space). A placement
  // there is the one the search below would find: it returns the lowest free aligned address
  // at or above the bump pointer, and nothing lies between the bump pointer and the window's end.
  if (window_valid_ && addr >= next_address_ && addr + size > addr && addr + size <= window_end_) {
    next_address_ = addr + size;
    return addr;
  }
  return place_after_search(size, addr, alignment);
}

Addr SimDevice::place_after_search(Bytes size, Addr addr, Bytes alignment) {
  // The bump pointer is past the end of the last range (ranges never overlap, so no range ends
  // later than the one that starts last): the window runs to the end of the address space.
  if (ranges_.empty() || ranges_.back().end() <= addr) {
    next_address_ = addr + size;
    window_end_ = ~Addr{0};
    window_valid_ = true;
    return addr;
  }
  // Skip past ranges placed at requested addresses that lie in the bump pointer's way.
  for (;;) {
    const std::size_t next = ranges_.lower_bound(addr);
    if (next > 0 && ranges_[next - 1].end() > addr) {
      addr = align_up(ranges_[next - 1].end(), alignment);
      continue;
    }
    if (next < ranges_.size() && ranges_[next].addr < addr + size) {
      addr = align_up(ranges_[next].end(), alignment);
      continue;
    }
    next_address_ = addr + size;
    // [next_address_, next's start) holds no range: the window of the next placements.
    window_end_ = next < ranges_.size() ? ranges_[next].addr : ~Addr{0};
    window_valid_ = true;
    return addr;
  }
}

std::optional<Addr> SimDevice::do_malloc(Bytes size, Addr at) {
  const Bytes footprint = malloc_footprint(size);
  if (footprint > config_.capacity - config_.external - physical_in_use_) return std::nullopt;
  if (at == kAnyAddress && !malloc_hints_.empty()) {
    at = malloc_hints_.front();
    malloc_hints_.pop_front();
  }
  const Addr addr = place(footprint, at);
  ranges_.insert(addr, footprint, false);
  physical_in_use_ += footprint;
  return addr;
}

Bytes SimDevice::do_free(Addr addr) {
  const std::size_t i = ranges_.find(addr);
  if (i == AddressRanges::npos || ranges_[i].vmm()) {
    throw std::logic_error(fmt::format("sim device: free of 0x{:x}, which malloc did not return", addr));
  }
  const Bytes footprint = ranges_[i].size();
  if (addr == window_end_) window_valid_ = false;  // the window's end goes (see place)
  ranges_.erase(i);
  physical_in_use_ -= footprint;
  return footprint;
}

std::optional<Addr> SimDevice::do_reserve_range(Bytes size, Addr at) {
  if (size > kMaxRange) return std::nullopt;  // more address space than a GPU's 48-bit VA
  const Bytes rounded = align_up(std::max<Bytes>(size, 1), kPage);
  if (at == kAnyAddress && !range_hints_.empty()) {
    at = range_hints_.front();
    range_hints_.pop_front();
  }
  const Addr addr = place(rounded, at);
  ranges_.insert(addr, rounded, true);
  return addr;
}

void SimDevice::do_release_range(Addr addr) {
  const std::size_t i = ranges_.find(addr);
  if (i == AddressRanges::npos || !ranges_[i].vmm()) {
    throw std::logic_error(fmt::format("sim device: release of 0x{:x}, not a reserved range", addr));
  }
  if (overlaps_mapping(addr, ranges_[i].size())) {
    throw std::logic_error(fmt::format("sim device: release of 0x{:x} while pages are mapped", addr));
  }
  if (addr == window_end_) window_valid_ = false;  // the window's end goes (see place)
  if (addr == last_vmm_range_.addr) last_vmm_range_ = {0, 0};
  ranges_.erase(i);
}

bool SimDevice::in_vmm_range(Addr addr, Bytes size) const {
  if (in_last_vmm_range(addr, size)) return true;
  const std::size_t next = ranges_.upper_bound(addr);
  if (next == 0) return false;
  const AddressRanges::Entry& range = ranges_[next - 1];
  if (!range.vmm() || addr + size > range.end()) return false;
  last_vmm_range_ = range;
  return true;
}

bool SimDevice::do_map(Addr addr, Bytes size) {
  // The usual call: whole pages right after the run the last map grew, up to growing_.max_end
  // (inside the run's reserved range, below the next run: no overlap, no join) with no alias.
  // Every check of map_after_search() passes then, and it would grow that run. size - 1 wraps
  // for a size of 0, and addr <= max_end, so neither a size 0 nor an overflow passes.
  if (addr == growing_.end && size % kPage == 0 && size - 1 < growing_.max_end - addr) {
    if (size > config_.capacity - config_.external - physical_in_use_) return false;
    physical_in_use_ += size;
    growing_.run->second += size;
    growing_.end += size;
    return true;
  }
  return map_after_search(addr, size);
}

bool SimDevice::map_after_search(Addr addr, Bytes size) {
  if (size == 0 || size % kPage != 0 || !in_vmm_range(addr, size)) {
    throw std::logic_error(
        fmt::format("sim device: map of {} bytes at 0x{:x}: not whole pages inside a reserved range", size, addr));
  }
  // overlaps_mapping(), with the search of the mapped runs kept for the insert below.
  auto next = mapped_pages_.lower_bound(addr);
  if ((next != mapped_pages_.end() && next->first < addr + size) ||
      (next != mapped_pages_.begin() && std::prev(next)->first + std::prev(next)->second > addr) ||
      overlaps_alias(aliases_, addr, size)) {
    throw std::logic_error(fmt::format("sim device: map at 0x{:x} overlaps mapped pages", addr));
  }
  if (size > config_.capacity - config_.external - physical_in_use_) return false;
  physical_in_use_ += size;
  // Merge with adjacent runs so the run set stays canonical. A run that grows at its end keeps
  // its node (a segment maps page after page upward); a new run goes in at the position found.
  const bool joins_next = next != mapped_pages_.end() && next->first == addr + size;
  auto run = next;
  if (next != mapped_pages_.begin() && std::prev(next)->first + std::prev(next)->second == addr) {
    run = std::prev(next);
    run->second += size;
    if (joins_next) {
      run->second += next->second;
      next = mapped_pages_.erase(next);
    }
  } else if (joins_next) {
    const Bytes length = size + next->second;
    next = mapped_pages_.erase(next);
    run = mapped_pages_.emplace_hint(next, addr, length);
  } else {
    run = mapped_pages_.emplace_hint(next, addr, size);
  }
  // in_vmm_range() above left last_vmm_range_ at the range that holds [addr, addr + size): the
  // run's last page lies in it unless the run joined a run of the range after it. That range
  // cannot go while the page is mapped, and an unmap forgets growing_.
  const Addr end = run->first + run->second;
  const Addr below_next = next == mapped_pages_.end() ? ~Addr{0} : next->first - 1;
  if (aliases_.empty() && last_vmm_range_.addr < end && end <= last_vmm_range_.end()) {
    growing_ = GrowingRun{run, end, std::min(below_next, last_vmm_range_.end())};
  } else {
    growing_ = GrowingRun{};
  }
  return true;
}

void SimDevice::do_unmap(Addr addr, Bytes size) {
  auto next = mapped_pages_.upper_bound(addr);
  if (size == 0 || size % kPage != 0 || next == mapped_pages_.begin()) {
    throw std::logic_error(fmt::format("sim device: unmap of {} bytes at 0x{:x}: not mapped", size, addr));
  }
  auto run = std::prev(next);
  growing_ = GrowingRun{};  // runs change: the next map searches
  if (aliased(addr, size)) {
    throw std::logic_error(fmt::format("sim device: unmap of {} bytes at 0x{:x} while an alias maps them", size, addr));
  }
  const Addr run_start = run->first;
  const Bytes run_size = run->second;
  if (addr + size > run_start + run_size) {
    throw std::logic_error(fmt::format("sim device: unmap of {} bytes at 0x{:x}: not mapped", size, addr));
  }
  // What stays of the run: its head keeps the run's node, its tail goes in right after it.
  if (addr > run_start) {
    run->second = addr - run_start;
  } else {
    next = mapped_pages_.erase(run);
  }
  if (addr + size < run_start + run_size)
    mapped_pages_.emplace_hint(next, addr + size, run_start + run_size - addr - size);
  physical_in_use_ -= size;
}

bool SimDevice::overlaps_mapping(Addr addr, Bytes size) const {
  auto next = mapped_pages_.lower_bound(addr);
  if (next != mapped_pages_.end() && next->first < addr + size) return true;
  if (next != mapped_pages_.begin() && std::prev(next)->first + std::prev(next)->second > addr) return true;
  return overlaps_alias(aliases_, addr, size);
}

bool SimDevice::aliased(Addr addr, Bytes size) const {
  // Sources may overlap one another (one page can back several stitched blocks over time), so
  // this scans; policies keep few aliases.
  for (const auto& [start, alias] : aliases_) {
    if (alias.source < addr + size && alias.source + alias.size > addr) return true;
  }
  return false;
}

void SimDevice::do_map_alias(Addr addr, Bytes size, Addr source) {
  if (size == 0 || size % kPage != 0 || !in_vmm_range(addr, size)) {
    throw std::logic_error(
        fmt::format("sim device: alias of {} bytes at 0x{:x}: not whole pages inside a reserved range", size, addr));
  }
  auto run = mapped_pages_.upper_bound(source);
  if (run == mapped_pages_.begin() || std::prev(run)->first + std::prev(run)->second < source + size) {
    throw std::logic_error(
        fmt::format("sim device: alias of 0x{:x}: source 0x{:x} (+{}) is not mapped", addr, source, size));
  }
  if (overlaps_mapping(addr, size)) {
    throw std::logic_error(fmt::format("sim device: alias at 0x{:x} overlaps mapped pages", addr));
  }
  aliases_.emplace(addr, Alias{size, source});
  growing_ = GrowingRun{};  // do_map's usual call assumes no alias
}

void SimDevice::do_unmap_alias(Addr addr, Bytes size) {
  auto it = aliases_.find(addr);
  if (it == aliases_.end() || it->second.size != size) {
    throw std::logic_error(fmt::format("sim device: unmap of alias 0x{:x} (+{}): no such alias", addr, size));
  }
  aliases_.erase(it);
}

bool SimDevice::is_backed(Addr addr, Bytes size) const {
  const std::size_t next = ranges_.upper_bound(addr);
  if (next == 0) return false;
  const AddressRanges::Entry& range = ranges_[next - 1];
  if (addr + size > range.end()) return false;
  if (!range.vmm()) return true;
  // Inside a VMM range: walk the mapped runs and aliases that cover it, in address order.
  Addr at = addr;
  while (at < addr + size) {
    auto run = mapped_pages_.upper_bound(at);
    if (run != mapped_pages_.begin() && std::prev(run)->first + std::prev(run)->second > at) {
      at = std::prev(run)->first + std::prev(run)->second;
      continue;
    }
    auto alias = aliases_.upper_bound(at);
    if (alias != aliases_.begin() && std::prev(alias)->first + std::prev(alias)->second.size > at) {
      at = std::prev(alias)->first + std::prev(alias)->second.size;
      continue;
    }
    return false;
  }
  return true;
}

namespace {

// Bytes per unit ("GiB", "gb", "" or "b" for bytes; case-insensitive), 0 for an unknown unit.
double byte_unit_scale(std::string_view unit_text) {
  std::string unit(unit_text);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "b") return 1;
  if (unit == "kib" || unit == "k") return 1024.0;
  if (unit == "mib" || unit == "m") return 1024.0 * 1024;
  if (unit == "gib" || unit == "g") return 1024.0 * 1024 * 1024;
  if (unit == "tib" || unit == "t") return 1024.0 * 1024 * 1024 * 1024;
  if (unit == "kb") return 1e3;
  if (unit == "mb") return 1e6;
  if (unit == "gb") return 1e9;
  if (unit == "tb") return 1e12;
  return 0;
}

}  // namespace

Bytes parse_byte_size(std::string_view text, std::string_view what) {
  auto fail = [&]() -> Bytes {
    throw InputError(fmt::format("{}: '{}' is not a byte size (expected e.g. 80GiB, 512MiB, 1.5GB, 4096)", what, text));
  };
  if (text.empty()) return fail();
  double number = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || number < 0 || !std::isfinite(number)) return fail();
  const double scale = byte_unit_scale(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  if (scale == 0) return fail();
  // Sizes of 2^60 bytes and more are impossible everywhere in fraglab (no device has an exabyte;
  // the trace readers refuse them too), which keeps every sum of sizes far from overflowing.
  constexpr Bytes kTooLarge = Bytes{1} << 60;
  auto too_large = [&]() -> Bytes {
    throw InputError(fmt::format("{}: '{}' is too large (expected less than 1 EiB, 2^60 bytes)", what, text));
  };
  // A whole number is computed in integers, exactly (a double holds only 53 bits of it).
  Bytes whole = 0;
  const auto [whole_end, whole_ec] = std::from_chars(begin, end, whole);
  if (whole_end == ptr && whole_ec == std::errc::result_out_of_range) return too_large();
  if (whole_end == ptr && whole_ec == std::errc()) {
    const auto unit_bytes = static_cast<Bytes>(scale);
    if (whole != 0 && unit_bytes > (kTooLarge - 1) / whole) return too_large();
    return whole * unit_bytes;
  }
  const double bytes = number * scale;
  if (bytes >= static_cast<double>(kTooLarge)) return too_large();
  return static_cast<Bytes>(std::llround(bytes));
}

namespace {

// A size inside a device spec must carry its unit: "sim:40" used to mean 40 bytes, which no one
// means, and the run then failed every cudaMalloc for a reason the output did not show. The
// error shows the accepted forms with the user's own number.
Bytes device_byte_size(std::string_view spec, std::string_view key, std::string_view value) {
  double number = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  const bool numeric = !value.empty() && ec == std::errc() && std::isfinite(number) && number >= 0;
  const std::string_view unit = numeric ? value.substr(static_cast<size_t>(ptr - value.data())) : value;
  auto fail = [&](std::string_view why) -> Bytes {
    const std::string n = numeric ? std::string(value.substr(0, value.size() - unit.size())) : std::string("40");
    const double x = numeric ? number : 40.0;
    throw InputError(
        fmt::format("--device '{}': {} '{}' {}; accepted forms: {}GiB, {}GB, {:.0f}B "
                    "(units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; K, M, G, T are KiB..TiB)",
                    spec, key, value, why, n, n, x * static_cast<double>(GiB)));
  };
  if (numeric && unit.empty() && number != 0) return fail("has no unit");
  if (!numeric) return fail("is not a size");
  if (byte_unit_scale(unit) == 0) return fail("has an unknown unit");
  try {
    return parse_byte_size(value, key);
  } catch (const InputError& e) {  // too large
    throw InputError(fmt::format("--device '{}': {}", spec, e.what()));
  }
}

}  // namespace

bool names_capacity(std::string_view spec) {
  std::string_view rest = spec.size() > 4 ? spec.substr(4) : std::string_view{};
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos || item.substr(0, colon) == "capacity") return true;
  }
  return false;
}

SimDeviceConfig parse_sim_device(std::string_view spec) {
  SimDeviceConfig config;
  auto bad = [&](std::string_view why) {
    throw InputError(
        fmt::format("--device '{}': {} (expected sim[:CAPACITY][,external:BYTES], "
                    "e.g. sim:40GiB,external:1GiB)",
                    spec, why));
  };
  if (spec.substr(0, 3) != "sim" || (spec.size() > 3 && spec[3] != ':')) bad("unknown device kind");
  std::string_view rest = spec.size() > 4 ? spec.substr(4) : std::string_view{};
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const size_t colon = item.find(':');
    std::string_view key = colon == std::string_view::npos ? std::string_view{"capacity"} : item.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? item : item.substr(colon + 1);
    if (key != "capacity" && key != "external")
      bad(fmt::format("unknown key '{}' (accepted: capacity, external)", key));
    const Bytes bytes = device_byte_size(spec, key, value);
    (key == "capacity" ? config.capacity : config.external) = bytes;
  }
  if (config.capacity == 0) bad("capacity must be positive");
  if (config.external > config.capacity) bad("external bytes exceed the capacity");
  return config;
}

}  // namespace fraglab
