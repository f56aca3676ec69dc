// A trace's identity: what `fraglab check` baselines and sweep results files record so that a
// gate or a merge can tell when the trace under it silently changed.
//
// The request hash is FNV-1a 64 over a canonical byte stream of what the *program* asked for, so
// that it does not depend on how the trace was stored (a snapshot and its `fraglab convert` JSONL
// give the same hash) nor on the allocator that recorded it:
//   - the text "fraglab-requests-v1";
//   - every initial allocation (live when the trace starts), in the trace's order (by address):
//     'I', requested bytes, stream, free_requested (0/1);
//   - every event in order, except the observed ones (segment_*, oom: the recording allocator's
//     answers, not requests) and marks (labels, not requests):
//       alloc           'A', requested bytes, stream
//       free            'F', ordinal of the allocation freed
//       free_requested  'R', ordinal
//       free_completed  'C', ordinal
//       empty_cache     'E'
//     where the ordinal numbers allocations in the order they appear (initial allocations first,
//     from 0). Ids themselves are arbitrary (PyTorch uses addresses) and are not hashed, only the
//     pairing they express. A free of an id that is not live hashes as ordinal 2^64-1.
// Numbers are fed as 8 bytes little-endian, tags as one ASCII byte, so the value is the same on
// every platform. Printed as 16 lowercase hex digits after "fnv1a64:".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

struct TraceIdentity {
  std::string name;          // Trace::name
  std::uint64_t events = 0;  // Trace::events.size(), observed events included (as results JSON "events")
  std::string request_hash;  // "fnv1a64:0123456789abcdef"
  bool operator==(const TraceIdentity&) const = default;
};

std::string request_hash(const Trace& trace);

// The same hash fed one piece at a time (a trace streamed from its file, fraglab/trace_stream.hpp):
// the initial allocations in order, then every event in order; value() is what request_hash()
// gives for the whole trace.
class RequestHasher {
 public:
  RequestHasher();
  void initial(const InitialAllocation& allocation);
  void add(const Event& event);
  std::string value() const;

 private:
  void byte(std::uint8_t b) {  // FNV-1a 64
    state_ ^= b;
    state_ *= 0x100000001b3ull;
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));  // little-endian
  }
  void text(std::string_view s) {
    for (char c : s) byte(static_cast<std::uint8_t>(c));
  }
  std::uint64_t ordinal(std::uint64_t id, bool release);

  std::uint64_t state_ = 0xcbf29ce484222325ull;
  std::unordered_map<std::uint64_t, std::uint64_t, SeededHash> ordinal_of_;  // live id -> ordinal
  std::uint64_t next_ = 0;
};
TraceIdentity trace_identity(const Trace& trace);
// "NAME (N events, requests fnv1a64:...)" for messages.
std::string describe(const TraceIdentity& identity);

}  // namespace fraglab
