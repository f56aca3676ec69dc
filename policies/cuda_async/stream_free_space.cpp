// StreamFreeSpace: see stream_free_space.hpp for the kinds of free bytes and the invariants.
#include "cuda_async/stream_free_space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>

namespace fraglab::cuda_async {
namespace {

// True when a range of `set` overlaps [lo, hi).
bool overlaps(const FreeRanges& set, Addr lo, Addr hi) {
  const FreeRanges::Range* last = set.last_starting_below(hi);
  return last != nullptr && last->end() > lo;
}

// The end of the last range of `set` that ends after `floor` and at or before `top`, or `floor`.
Addr last_end_below(const FreeRanges& set, Addr floor, Addr top) {
  const FreeRanges::Range* last = set.last_starting_below(top);
  return last == nullptr ? floor : std::max(floor, last->end());
}

}  // namespace

FreeRanges& StreamFreeSpace::pending_of(StreamId stream) {
  if (last_pending_ < pending_.size() && pending_[last_pending_].stream == stream)
    return pending_[last_pending_].ranges;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].stream == stream) {
      last_pending_ = i;
      return pending_[i].ranges;
    }
  }
  pending_.push_back({stream, FreeRanges(FreeRanges::SizeIndex::None)});
  last_pending_ = pending_.size() - 1;
  return pending_.back().ranges;
}

void StreamFreeSpace::add_pending(Addr addr, Bytes size, StreamId stream) {
  all_.insert(addr, size);
  pending_of(stream).insert(addr, size);
}

void StreamFreeSpace::add_shared(Addr addr, Bytes size) {
  all_.insert(addr, size);
  shared_.insert(addr, size);
}

void StreamFreeSpace::add_awaiting_sync(Addr addr, Bytes size) {
  all_.insert(addr, size);
  awaiting_.insert(addr, size);
}

void StreamFreeSpace::synchronize() {
  for (Pending& p : pending_) {
    for (const auto& [addr, size] : p.ranges.by_address()) shared_.insert(addr, size);
    p.ranges.clear();
  }
  for (const auto& [addr, size] : awaiting_.by_address()) shared_.insert(addr, size);
  awaiting_.clear();
}

bool StreamFreeSpace::others_restricted(StreamId stream) const {
  if (!awaiting_.empty()) return true;
  for (const Pending& p : pending_) {
    if (p.stream != stream && !p.ranges.empty()) return true;
  }
  return false;
}

bool StreamFreeSpace::blocked(Addr addr, Bytes size, StreamId stream) const {
  if (overlaps(awaiting_, addr, addr + size)) return true;
  for (const Pending& p : pending_) {
    if (p.stream != stream && overlaps(p.ranges, addr, addr + size)) return true;
  }
  return false;
}

std::optional<StreamFreeSpace::Fit> StreamFreeSpace::best_fit(Bytes size, StreamId stream) const {
  std::optional<FreeRanges::Range> whole = all_.best_fit(size);
  if (!whole) return std::nullopt;
  if (!others_restricted(stream)) return Fit{whole->addr, Source::AnyKind};
  // Candidates compared as best fit compares ranges: smallest, then lowest address.
  std::optional<FreeRanges::Range> best;
  Source source = Source::AnyKind;
  auto consider = [&](std::optional<FreeRanges::Range> candidate, Source from) {
    if (candidate && (!best || std::tie(candidate->size, candidate->addr) < std::tie(best->size, best->addr))) {
      best = candidate;
      source = from;
    }
  };
  if (!blocked(whole->addr, size, stream)) consider(whole, Source::AnyKind);
  consider(shared_.best_fit(size), Source::Shared);
  for (const Pending& p : pending_) {
    if (p.stream == stream) consider(p.ranges.best_fit(size), Source::OwnPending);
  }
  if (!best) return std::nullopt;
  return Fit{best->addr, source};
}

std::optional<StreamFreeSpace::Fit> StreamFreeSpace::best_fit_any(Bytes size) const {
  std::optional<FreeRanges::Range> whole = all_.best_fit(size);
  if (!whole) return std::nullopt;
  return Fit{whole->addr, Source::AnyKind};
}

Addr StreamFreeSpace::growth_start(Addr top, StreamId stream) const {
  if (all_.empty()) return top;
  const FreeRanges::Range& tail = all_.by_address().back();
  if (tail.end() != top) return top;
  Addr start = tail.addr;
  start = last_end_below(awaiting_, start, top);
  for (const Pending& p : pending_) {
    if (p.stream != stream) start = last_end_below(p.ranges, start, top);
  }
  return start;
}

bool StreamFreeSpace::take(Addr addr, Bytes size, StreamId stream, Source source) {
  all_.erase(addr, size);
  const Addr end = addr + size;
  if (source == Source::Shared) {
    shared_.erase(addr, size);
    return false;
  }
  if (source == Source::OwnPending) {
    pending_of(stream).erase(addr, size);
    return false;
  }
  shared_.erase_within(addr, end);
  bool waited = awaiting_.erase_within(addr, end);
  for (Pending& p : pending_) {
    if (p.ranges.erase_within(addr, end) && p.stream != stream) waited = true;
  }
  return waited;
}

std::vector<const FreeRanges*> StreamFreeSpace::restricted_for(StreamId stream) const {
  std::vector<const FreeRanges*> out{&awaiting_};
  for (const Pending& p : pending_) {
    if (p.stream != stream) out.push_back(&p.ranges);
  }
  return out;
}

Bytes StreamFreeSpace::pending_bytes() const {
  Bytes bytes = 0;
  for (const Pending& p : pending_) bytes += p.ranges.total();
  return bytes;
}

void StreamFreeSpace::audit(kit::AuditLog& log) const {
  std::vector<const FreeRanges*> kinds{&shared_, &awaiting_};
  for (const Pending& p : pending_) kinds.push_back(&p.ranges);
  Bytes sum = 0;
  std::map<Addr, Bytes> pieces;  // every range of every kind: disjoint, so keyed by address
  for (const FreeRanges* kind : kinds) {
    kind->audit(log);
    sum += kind->total();
    for (const auto& [addr, size] : kind->by_address()) {
      const std::optional<FreeRanges::Range> in = all_.containing(addr);
      log.require(in && addr + size <= in->end() && pieces.emplace(addr, size).second,
                  [&] { return fmt::format("free range 0x{:x} of some kind is outside all_ or in two kinds", addr); });
    }
  }
  Addr end = 0;
  for (const auto& [addr, size] : pieces) {
    log.require(addr >= end, [&] { return fmt::format("free kinds overlap at 0x{:x}", addr); });
    end = addr + size;
  }
  log.require(sum == all_.total(),
              [&] { return fmt::format("the free kinds hold {} bytes, all_ {}", sum, all_.total()); });
}

}  // namespace fraglab::cuda_async
