// Rounding (allocator-model §1.2-§1.5). Written from the spec's description; see rounding.hpp.
#include "pytorch/rounding.hpp"

#include <algorithm>
#include <bit>

namespace fraglab::cca {

std::size_t division_slot(Bytes size) {
  if (size == 0) return 0;
  const int log2 = 63 - std::countl_zero(size);
  const int slot = log2 - 20;  // 2^20 = 1 MiB: intervals start at 1 MiB (slot 0 = all < 2 MiB)
  if (slot < 0) return 0;
  return std::min<std::size_t>(static_cast<std::size_t>(slot), kRoundUpPowerOfTwoIntervals - 1);
}

Bytes roundup_power2_next_division(Bytes size, Bytes divisions, Version version) {
  if (version < Version::V2_0 && (size <= 4 || divisions <= 1)) return size;  // 1.13 guard (§1.3)
  if (std::has_single_bit(size)) return size;
  const Bytes floor2 = std::bit_floor(size);
  const int shift = 63 - std::countl_zero(divisions == 0 ? Bytes{1} : divisions);
  const Bytes step = floor2 >> shift;
  if (step == 0) return floor2 << 1;
  const Bytes down = size & ~(step - 1);
  return down == size ? size : down + step;
}

Bytes round_size(Bytes size, const RoundingRules& rules) {
  auto round512 = [](Bytes n) { return kMinBlockSize * ((n + kMinBlockSize - 1) / kMinBlockSize); };
  if (size < kMinBlockSize) return kMinBlockSize;
  // "size > 512 * d" without overflow for absurd d (d is a validated power of two).
  auto above = [size](Bytes d) { return d <= kUnlimited / kMinBlockSize && size > kMinBlockSize * d; };
  if (!has_interval_divisions(rules.version)) {
    // 1.13: one global value, bypass threshold, and "d > 0" (d == 1 -> size unrounded).
    if (size > rules.bypass_threshold) return round512(size);
    const Bytes d = rules.divisions[0];
    if (d > 0 && above(d)) return roundup_power2_next_division(size, d, rules.version);
    return round512(size);
  }
  const Bytes d = rules.divisions[division_slot(size)];
  if (d > 1 && above(d)) return roundup_power2_next_division(size, d, rules.version);
  return round512(size);
}

Bytes get_allocation_size(Bytes rounded, Bytes large_segment_size) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return large_segment_size;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace fraglab::cca
