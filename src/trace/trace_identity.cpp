// The request hash of include/fraglab/trace_identity.hpp (the byte stream is specified there).
#include "fraglab/trace_identity.hpp"

#include <fmt/format.h>

#include <unordered_map>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {
namespace {

class Fnv1a64 {
 public:
  void byte(std::uint8_t b) {
    state_ ^= b;
    state_ *= 0x100000001b3ull;
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));  // little-endian
  }
  void text(std::string_view s) {
    for (char c : s) byte(static_cast<std::uint8_t>(c));
  }
  std::uint64_t value() const { return state_; }

 private:
  std::uint64_t state_ = 0xcbf29ce484222325ull;
};

constexpr std::uint64_t kUnknownOrdinal = ~std::uint64_t{0};

}  // namespace

std::string request_hash(const Trace& trace) {
  Fnv1a64 h;
  h.text("fraglab-requests-v1");
  std::unordered_map<std::uint64_t, std::uint64_t, SeededHash> ordinal_of;  // live id -> ordinal
  std::uint64_t next = 0;
  for (const InitialAllocation& a : trace.initial.allocations) {
    h.byte('I');
    h.u64(a.requested);
    h.u64(a.stream);
    h.u64(a.free_requested ? 1 : 0);
    ordinal_of[a.id] = next++;
  }
  auto ordinal = [&](std::uint64_t id, bool release) {
    auto it = ordinal_of.find(id);
    if (it == ordinal_of.end()) return kUnknownOrdinal;
    const std::uint64_t n = it->second;
    if (release) ordinal_of.erase(it);  // ids may be reused once freed
    return n;
  };
  for (const Event& e : trace.events) {
    switch (e.op) {
      case Op::Alloc:
        h.byte('A');
        h.u64(e.size);
        h.u64(e.stream);
        ordinal_of[e.id] = next++;
        break;
      case Op::Free:
        h.byte('F');
        h.u64(ordinal(e.id, true));
        break;
      case Op::FreeRequested:
        h.byte('R');
        h.u64(ordinal(e.id, false));
        break;
      case Op::FreeCompleted:
        h.byte('C');
        h.u64(ordinal(e.id, true));
        break;
      case Op::EmptyCache:
        h.byte('E');
        break;
      default:
        break;  // marks and observed events are not requests
    }
  }
  return fmt::format("fnv1a64:{:016x}", h.value());
}

TraceIdentity trace_identity(const Trace& trace) {
  return {trace.name, static_cast<std::uint64_t>(trace.events.size()), request_hash(trace)};
}

std::string describe(const TraceIdentity& identity) {
  return fmt::format("{} ({} events, requests {})", identity.name, identity.events, identity.request_hash);
}

}  // namespace fraglab
