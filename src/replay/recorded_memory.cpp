// recorded_memory: see include/fraglab/recorded_memory.hpp.
#include "fraglab/recorded_memory.hpp"

#include <algorithm>

namespace fraglab {

RecordedMemory recorded_memory(const Trace& trace) {
  RecordedMemory m;
  m.reserved_at_start = trace.initial.reserved_bytes();
  Bytes reserved = m.reserved_at_start;
  m.peak_reserved = reserved;
  for (const Event& e : trace.events) {
    if (e.op == Op::SegmentAlloc || e.op == Op::SegmentMap) reserved += e.size;
    if (e.op == Op::SegmentFree || e.op == Op::SegmentUnmap) reserved -= e.size;
    m.peak_reserved = std::max(m.peak_reserved, reserved);
    if (e.op == Op::Oom) {
      ++m.ooms;
      const Bytes at_oom = reserved + e.addr;  // reserved now + what cudaMemGetInfo called free (addr = device_free)
      m.available_at_oom = m.available_at_oom ? std::min(*m.available_at_oom, at_oom) : at_oom;
    }
  }
  return m;
}

}  // namespace fraglab
