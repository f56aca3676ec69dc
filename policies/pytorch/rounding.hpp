// Request rounding and segment sizing (allocator-model §1.2-§1.5).
//
// Invariants:
//  - round_size(n) >= 512 and, except for 1.13's divisions==1 quirk (§1.2), a multiple of 512;
//  - the pool is chosen on the *rounded* size: <= 1 MiB (inclusive) -> small (§2, trap §14.1);
//  - divisions are looked up on the *unrounded* request: slot clamp(floor(log2(n)) - 20, 0, 15),
//    so slot 0 covers everything below 2 MiB (§1.4).
#pragma once

#include <array>

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
std::size_t division_slot(Bytes size);
// §1.3. `version` selects 1.13's guard (size <= 4 or divisions <= 1 -> size unchanged).
Bytes roundup_power2_next_division(Bytes size, Bytes divisions, Version version);
// §1.2: the block size a request is served with.
Bytes round_size(Bytes size, const RoundingRules& rules);
// §1.5: bytes obtained from the device on a miss for a rounded request.
Bytes get_allocation_size(Bytes rounded, Bytes large_segment_size);
inline PoolKind pool_for(Bytes rounded) { return rounded <= kSmallSize ? PoolKind::Small : PoolKind::Large; }

}  // namespace fraglab::cca
