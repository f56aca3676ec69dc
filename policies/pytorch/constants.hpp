// PyTorch CUDACachingAllocator constants (allocator-model §1.1). Identical from 1.13 to newest; the one
// configurable size (large_segment_size, newest) lives in Config, not here.
#pragma once

#include <cstdint>
#include <limits>

#include "fraglab/policy_kit.hpp"
#include "fraglab/types.hpp"

namespace fraglab::cca {

inline constexpr Bytes kMinBlockSize = 512;        // every rounded size is >= this
inline constexpr Bytes kSmallSize = 1048576;       // rounded <= this -> small pool (inclusive)
inline constexpr Bytes kSmallBuffer = 2097152;     // small-pool segment / expandable page
inline constexpr Bytes kLargeBuffer = 20971520;    // default large segment / page / slack
inline constexpr Bytes kMinLargeAlloc = 10485760;  // below: a miss allocates a large segment
inline constexpr Bytes kRoundLarge = 2097152;      // >= kMinLargeAlloc: round segment to this
inline constexpr std::size_t kRoundUpPowerOfTwoIntervals = 16;
inline constexpr Bytes kUnlimited = std::numeric_limits<Bytes>::max();  // max_split_size default
inline constexpr Bytes kMaxRequest = kit::kImpossibleRequest;           // ">= 1 EB" requests fail up front (§5)

enum class PoolKind : std::uint8_t { Small = 0, Large = 1 };

inline constexpr const char* pool_name(PoolKind kind) { return kind == PoolKind::Small ? "small" : "large"; }

}  // namespace fraglab::cca
