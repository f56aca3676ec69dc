// InvariantChecker: see include/fraglab/invariants.hpp for the invariants and why the exception
// for cache flushes exists.
//
// Device frees and unmaps are collected while an event runs and checked after it, once the
// event's own free has been applied: a policy releasing the block the program just freed is fine.
#include "fraglab/invariants.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fraglab {
namespace {

Bytes extent(Bytes size) { return std::max<Bytes>(size, 1); }  // a 0-byte block still has an address

std::string block_text(const Block& b) { return fmt::format("[0x{:x}, +{})", b.addr, b.size); }

}  // namespace

InvariantChecker::InvariantChecker(Device& device) : device_(device) { device_.add_listener(this); }

InvariantChecker::~InvariantChecker() { device_.remove_listener(this); }

void InvariantChecker::violation(const std::string& text) {
  ++violation_count_;
  if (violations_.size() >= kKeptViolations) return;
  if (event_ == nullptr) {
    violations_.push_back("initial state: " + text);
  } else {
    violations_.push_back(fmt::format("event {} ({} id={}): {}", event_index_, op_name(event_->op), event_->id, text));
  }
}

const InvariantChecker::Live* InvariantChecker::overlapping(Addr addr, Bytes size) const {
  auto next = by_address_.lower_bound(addr);
  if (next != by_address_.end() && next->first < addr + extent(size)) return &next->second;
  if (next != by_address_.begin()) {
    const Live& prev = std::prev(next)->second;
    if (prev.block.addr + extent(prev.block.size) > addr) return &prev;
  }
  return nullptr;
}

void InvariantChecker::add_block(AllocId id, const Block& block, Bytes requested, bool free_requested) {
  if (block.size < requested) {
    violation(fmt::format("block {} is smaller than the {} bytes requested", block_text(block), requested));
  }
  if (block.size > 0 && !device_.is_backed(block.addr, block.size)) {
    violation(fmt::format("block {} lies outside the memory the device backs", block_text(block)));
  }
  if (const Live* other = overlapping(block.addr, block.size)) {
    violation(fmt::format("block {} overlaps live block id={} {}{}", block_text(block), other->id,
                          block_text(other->block), other->free_requested ? " (free not completed)" : ""));
    return;  // keep the first holder
  }
  by_address_.emplace(block.addr, Live{block, id, free_requested});
  address_of_[id] = block.addr;
}

void InvariantChecker::remove_block(AllocId id) {
  auto it = address_of_.find(id);
  if (it == address_of_.end()) return;
  auto live = by_address_.find(it->second);
  if (live != by_address_.end() && live->second.id == id) by_address_.erase(live);
  address_of_.erase(it);
}

void InvariantChecker::on_initial_block(const InitialAllocation& allocation, const Block& block) {
  add_block(allocation.id, block, allocation.requested, allocation.free_requested);
}

void InvariantChecker::on_start(const Trace& /*trace*/, const Policy& policy) {
  policy_ = &policy;
  retries_seen_ = policy.counters().num_alloc_retries;
  ooms_at_start_ = policy.counters().num_ooms;
  ooms_seen_ = 0;
  pending_releases_.clear();  // calls made while the start state was rebuilt
  audit_policy();
}

void InvariantChecker::audit_policy() {
  for (const std::string& problem : policy_->audit()) violation(problem);
}

void InvariantChecker::on_device_call(DeviceCall call, Addr addr, Bytes size) {
  if (call == DeviceCall::Free || call == DeviceCall::Unmap || call == DeviceCall::UnmapAlias) {
    pending_releases_.push_back({call, addr, size});
  }
}

void InvariantChecker::on_event(const ReplayPoint& p) {
  const Event& e = *p.event;
  const std::uint64_t violations_before = violation_count_;
  event_ = p.event;
  event_index_ = p.event_index;
  anatomy_.on_event(p);
  if (e.op == Op::Free || e.op == Op::FreeCompleted) {
    remove_block(e.id);
    if (auto it = flushed_early_.find(e.id); it != flushed_early_.end()) {
      flushed_early_bytes_ -= it->second;
      flushed_early_.erase(it);
    }
  }
  if (e.op == Op::FreeRequested) {
    auto it = address_of_.find(e.id);
    if (it != address_of_.end()) by_address_[it->second].free_requested = true;
  }
  // empty_cache synchronises too (release_cached_blocks runs synchronize_and_free_events, allocator-model §5.3).
  const bool flushed =
      e.op == Op::EmptyCache || (policy_ != nullptr && policy_->counters().num_alloc_retries > retries_seen_);
  if (flushed) {
    // The flush synchronised every stream: blocks awaiting free completion are free from now on.
    for (auto it = by_address_.begin(); it != by_address_.end();) {
      if (it->second.free_requested) {
        flushed_early_[it->second.id] = it->second.block.size;
        flushed_early_bytes_ += it->second.block.size;
        address_of_.erase(it->second.id);
        it = by_address_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Release& r : pending_releases_) {
    const Live* under = overlapping(r.addr, r.size);
    if (under == nullptr) continue;
    // A policy that offloads (Policy::on_host) unmaps memory whose blocks now live on the host.
    if (r.call == DeviceCall::Unmap && policy_ != nullptr && policy_->on_host(r.addr)) continue;
    static constexpr const char* kNames[] = {"malloc", "free", "map", "unmap", "alias map", "alias unmap"};
    violation(fmt::format("device {} of [0x{:x}, +{}) under live block id={} {}", kNames[static_cast<int>(r.call)],
                          r.addr, r.size, under->id, block_text(under->block)));
  }
  pending_releases_.clear();
  if (e.op == Op::Alloc && p.block != nullptr) add_block(e.id, *p.block, e.size, false);
  if (p.reserved > device_.capacity()) {
    violation(fmt::format("reserved {} bytes exceeds the device capacity {}", p.reserved, device_.capacity()));
  }
  if (e.op == Op::Alloc && p.block == nullptr) ++ooms_seen_;
  if (policy_ == nullptr) return;
  retries_seen_ = policy_->counters().num_alloc_retries;
  // The Replayer counts the OOMs it sees; a policy's own count must agree (5.).
  const std::uint64_t counted = policy_->counters().num_ooms - ooms_at_start_;
  if (counted != ooms_seen_) {
    violation(fmt::format("the policy counts {} out-of-memory failures, the replay saw {}", counted, ooms_seen_));
  }
  audit_policy();
  // 7.: reserved − held − listed free pieces, the anatomy's `other`. Not after another finding on
  // the same event: memory released under a live block breaks it too, and one line says it.
  if (violation_count_ != violations_before) return;
  const Anatomy a = anatomy_of(*policy_, AnatomyInput{static_cast<std::int64_t>(p.event_index), p.reserved, p.requested,
                                                      p.held, anatomy_.stream()});
  // anatomy_of already counts the held bytes a policy keeps on the host (Policy::held_on_host)
  // apart, so `other` needs no allowance for them here.
  if (a.other + static_cast<std::int64_t>(flushed_early_bytes_) < 0) {
    violation(
        fmt::format("the held blocks ({} bytes) and the free pieces the policy lists ({} bytes) exceed the {} "
                    "bytes reserved",
                    p.held, a.cached_free_usable + a.stream_bound + a.oversize_locked + a.small_pool, p.reserved));
  }
}

void InvariantChecker::on_finish() {
  if (device_.peak_reserved() > device_.capacity()) {
    ++violation_count_;
    if (violations_.size() < kKeptViolations) {
      violations_.push_back(fmt::format("at the end: peak reserved {} bytes exceeds the device capacity {}",
                                        device_.peak_reserved(), device_.capacity()));
    }
  }
}

}  // namespace fraglab
