// Request rounding and segment sizing (allocator-model §1.2-§1.5).
//
// Invariants:
//  - round_size(n) >= 512 and, except for 1.13's divisions==1 quirk (§1.2), a multiple of 512;
//  - the pool is chosen on the *rounded* size: <= 1 MiB (inclusive) -> small (§2, trap §14.1);
//  - divisions are looked up on the *unrounded* request: slot clamp(floor(log2(n)) - 20, 0, 15),
//    so slot 0 covers everything below 2 MiB (§1.4).
// The three small functions are inline: malloc calls them on every request.
#pragma once

#include <algorithm>
#include <array>
#include <bit>

#include "pytorch/constants.hpp"
#include "pytorch/version.hpp"

namespace fraglab::cca {

using DivisionTable = std::array<Bytes, kRoundUpPowerOfTwoIntervals>;

struct RoundingRules {
  Version version = Version::Newest;
  DivisionTable divisions{};            // 1.13: every slot holds the single global value
  Bytes bypass_threshold = kUnlimited;  // 1.13 roundup_bypass_threshold_mb, in bytes
};

// Slot of the division table that applies to a request of `size` bytes (§1.4).
inline std::size_t division_slot(Bytes size) {
  if (size == 0) return 0;
  const int log2 = 63 - std::countl_zero(size);
  const int slot = log2 - 20;  // 2^20 = 1 MiB: intervals start at 1 MiB (slot 0 = all < 2 MiB)
  if (slot < 0) return 0;
  return std::min<std::size_t>(static_cast<std::size_t>(slot), kRoundUpPowerOfTwoIntervals - 1);
}
// §1.3. `version` selects 1.13's guard (size <= 4 or divisions <= 1 -> size unchanged).
Bytes roundup_power2_next_division(Bytes size, Bytes divisions, Version version);
// §1.2's default rounding: up to a multiple of 512, at least 512 (for 0 < size < 2^64 - 511).
inline Bytes round_up_512(Bytes size) { return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize); }
// True when `rules` round every request (0 < size < 2^64 - 511) as round_up_512 does: no interval's
// division is above 1 (2.0+), or 1.13's single value is 0 (§1.2). malloc tests this once per
// allocator instead of walking round_size's rules per request (the default configuration).
inline bool rounds_plainly(const RoundingRules& rules) {
  if (!has_interval_divisions(rules.version)) return rules.divisions[0] == 0;
  return std::all_of(rules.divisions.begin(), rules.divisions.end(), [](Bytes d) { return d <= 1; });
}
// §1.2: the block size a request is served with.
inline Bytes round_size(Bytes size, const RoundingRules& rules) {
  auto round512 = [](Bytes n) { return round_up_512(n); };
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
// §1.5: bytes obtained from the device on a miss for a rounded request.
inline Bytes get_allocation_size(Bytes rounded, Bytes large_segment_size) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return large_segment_size;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}
inline PoolKind pool_for(Bytes rounded) { return rounded <= kSmallSize ? PoolKind::Small : PoolKind::Large; }

}  // namespace fraglab::cca
