// What a recorded run tells about the memory its allocator could obtain: reserved bytes over the
// trace (from the start state and the segment events) and, at each recorded `oom`, reserved at
// that moment + the device_free bytes the OOM message reported. Shared by validation (the
// available bytes it replays with) and the CLI (the capacity it assumes when none is given).
#pragma once

#include <cstdint>
#include <optional>

#include "fraglab/trace.hpp"

namespace fraglab {

struct RecordedMemory {
  Bytes reserved_at_start = 0;
  Bytes peak_reserved = 0;
  std::uint64_t ooms = 0;
  // The least, over the recorded ooms, of reserved + device_free: what the allocator could have
  // held at most. nullopt without an oom event.
  std::optional<Bytes> available_at_oom;
};

RecordedMemory recorded_memory(const Trace& trace);

}  // namespace fraglab
