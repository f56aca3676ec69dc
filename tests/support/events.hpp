// Event builders shared by the test suites: one line per event in a hand-built trace.
#pragma once

#include <string_view>
#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab::test {

inline Event alloc(AllocId id, Bytes size, StreamId stream = 0) {
  Event e;
  e.op = Op::Alloc;
  e.id = id;
  e.size = size;
  e.stream = stream;
  return e;
}

// An alloc as a real run recorded it: with the address it got.
inline Event alloc_at(AllocId id, Bytes size, Addr addr, StreamId stream = 0) {
  Event e = alloc(id, size, stream);
  e.addr = addr;
  e.has_addr = true;
  return e;
}

// free, free_requested, free_completed of an id.
inline Event with_op(Op op, AllocId id) {
  Event e;
  e.op = op;
  e.id = id;
  return e;
}

// An observed segment_alloc / segment_free / segment_map / segment_unmap.
inline Event segment(Op op, Addr addr, Bytes size, StreamId stream = 0) {
  Event e;
  e.op = op;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  e.has_addr = true;
  return e;
}

// An observed oom entry: the rounded request and what cudaMemGetInfo called free.
inline Event oom(Bytes rounded, Bytes device_free, StreamId stream = 0) {
  Event e;
  e.op = Op::Oom;
  e.size = rounded;
  e.addr = device_free;
  e.stream = stream;
  return e;
}

// A recorded run built by hand: one device, allocator settings known (PyTorch's defaults).
inline Trace recorded_run(std::vector<Event> events) {
  Trace t;
  t.name = "hand-built";
  t.allocator_conf_known = true;
  t.events = std::move(events);
  validate_trace(t, "hand-built");
  return t;
}

}  // namespace fraglab::test
