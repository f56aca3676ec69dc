// The CUDA streams a training step uses (wm §0 "stream"), and the raw stream values written into
// traces. The default stream is 0, as PyTorch snapshots record it; side streams get fixed,
// real-looking cudaStream_t values so the same options always give the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab::workload {

enum class Stream : std::uint8_t {
  Default,        // compute
  PreUnshard,     // FSDP1 low-precision shard cast (wm §3.1)
  Unshard,        // FSDP1 all-gather
  PostBackward,   // FSDP1 reduce-scatter
  AgCopyIn,       // FSDP2 all-gather copy-in (wm §3.2)
  AllGather,      // FSDP2 all-gather
  ReduceScatter,  // FSDP2 reduce-scatter
  DsAllGather,    // DeepSpeed ZeRO-3 parameter fetch (wm §4.1)
  DsReduce,       // DeepSpeed reduce_and_partition stream
  Count,
};
inline constexpr std::size_t kStreamCount = static_cast<std::size_t>(Stream::Count);

inline StreamId stream_id(Stream s) {
  if (s == Stream::Default) return 0;
  // 0x55d0c4a3f000 + 0x1d0 * k: distinct, 16-byte aligned, like heap pointers of cudaStream_t.
  return 0x55d0c4a3f000ull + 0x1d0ull * static_cast<std::uint64_t>(s);
}

inline std::size_t index_of(Stream s) { return static_cast<std::size_t>(s); }

}  // namespace fraglab::workload
