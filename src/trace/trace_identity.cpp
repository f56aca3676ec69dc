// The request hash of include/fraglab/trace_identity.hpp (the byte stream is specified there).
#include "fraglab/trace_identity.hpp"

#include <fmt/format.h>

#include <unordered_map>

#include "fraglab/seeded_hash.hpp"

namespace fraglab {
namespace {

constexpr std::uint64_t kUnknownOrdinal = ~std::uint64_t{0};

}  // namespace

RequestHasher::RequestHasher() { text("fraglab-requests-v1"); }

void RequestHasher::initial(const InitialAllocation& a) {
  byte('I');
  u64(a.requested);
  u64(a.stream);
  u64(a.free_requested ? 1 : 0);
  ordinal_of_[a.id] = next_++;
}

std::uint64_t RequestHasher::ordinal(std::uint64_t id, bool release) {
  auto it = ordinal_of_.find(id);
  if (it == ordinal_of_.end()) return kUnknownOrdinal;
  const std::uint64_t n = it->second;
  if (release) ordinal_of_.erase(it);  // ids may be reused once freed
  return n;
}

void RequestHasher::add(const Event& e) {
  switch (e.op) {
    case Op::Alloc:
      byte('A');
      u64(e.size);
      u64(e.stream);
      ordinal_of_[e.id] = next_++;
      break;
    case Op::Free:
      byte('F');
      u64(ordinal(e.id, true));
      break;
    case Op::FreeRequested:
      byte('R');
      u64(ordinal(e.id, false));
      break;
    case Op::FreeCompleted:
      byte('C');
      u64(ordinal(e.id, true));
      break;
    case Op::EmptyCache:
      byte('E');
      break;
    default:
      break;  // marks and observed events are not requests
  }
}

std::string RequestHasher::value() const { return fmt::format("fnv1a64:{:016x}", state_); }

std::string request_hash(const Trace& trace) {
  RequestHasher h;
  for (const InitialAllocation& a : trace.initial.allocations) h.initial(a);
  for (const Event& e : trace.events) h.add(e);
  return h.value();
}

TraceIdentity trace_identity(const Trace& trace) {
  return {trace.name, static_cast<std::uint64_t>(trace.events.size()), request_hash(trace)};
}

std::string describe(const TraceIdentity& identity) {
  return fmt::format("{} ({} events, requests {})", identity.name, identity.events, identity.request_hash);
}

}  // namespace fraglab
