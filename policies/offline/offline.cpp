// offline: the static plan an allocator could follow if it knew the whole trace in advance — the
// "optimal end" of the policy comparison (anchors.md §1.7). prepare() sees every request with its
// live interval and gives each one a fixed offset in one arena by greedy-by-size best fit
// (greedy_plan.hpp: Pisarchyk & Lee arXiv 2001.03288; XLA GlobalDecreasingSizeBestFitHeap);
// allocate() then hands out arena + offset, call by call.
//
// Model:
//  - one device malloc of the plan's heap size, made in prepare(), i.e. before the initial state
//    is adopted: the arena is part of the start state (reserved_at_start = heap size, no device
//    calls during the events) and is held to the end; reserved = heap size throughout;
//  - allocate() number k is planned_requests(trace)[k] (the Replayer's call order,
//    fraglab/planned_requests.hpp); a call the plan does not know is a logic_error;
//  - frees hand nothing back (the plan already knows every lifetime); empty_cache() does nothing;
//  - block size = the request rounded up to `alignment` (at least one unit, so a 0-byte request
//    still gets an address of its own).
// Invariants: live blocks never overlap (the plan gives overlapping lifetimes disjoint ranges);
// every block lies inside the arena; same trace and options, same addresses.
//
// Out of memory: a plan larger than the device cannot be held at all; every allocate() then
// fails (num_ooms counts each) with the one-line message below. There is no cache to flush, so
// no retry. The plan is not re-made smaller: a static plan either fits or it does not.
//
// Simplified / guessed: XLA also tries other orders (temporal, ChooseBestHeapAlgorithm) and
// colocates aliased buffers; we make one greedy pass in XLA's spatial order. Streams are ignored
// (a planned block is never reused before the free completes, so cross-stream use is safe).
//
// Reading the metrics: reserved peaks before event 0, so the Replayer's fragmentation_at_peak
// (taken where reserved first peaks) sees the start state and says little here; the plan's
// quality is plan_overhead_ppm (heap over the no-fragmentation lower bound) and peak_utilization.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "fraglab/planned_requests.hpp"
#include "fraglab/policy_kit.hpp"
#include "offline/default_init_allocator.hpp"
#include "offline/greedy_plan.hpp"

namespace fraglab {
namespace {

constexpr Bytes kMaxAlignment = GiB;

struct OfflineOptions {
  Bytes alignment;  // 512 by default: PyTorch's kMinBlockSize (allocator-model §1.1), blocks are 512-aligned
};

OfflineOptions parse_options(std::string_view text) {
  return OfflineOptions{kit::OptionReader::of("offline", text)
                            .get<Bytes>("alignment", fmt::format("a power of two from 1 to {} (bytes)", kMaxAlignment),
                                        [](std::string_view v) -> std::optional<Bytes> {
                                          const std::optional<Bytes> b = kit::parse_whole(v, kMaxAlignment);
                                          if (!b || !std::has_single_bit(*b)) return std::nullopt;
                                          return b;
                                        })};
}

class OfflinePolicy final : public kit::DirectDefaults<OfflinePolicy, kit::RetryingPolicy> {
 public:
  OfflinePolicy(OfflineOptions options, Device& device) : options_(options), device_(device) {}

  void prepare(const Trace& trace) override {
    if (arena_) device_.free(*arena_);  // a second replay through the same policy re-plans
    arena_.reset();
    const std::vector<PlannedRequest> requests = planned_requests(trace);
    // The calls' sizes are noted last: while none is, allocate() knows no call (see allocate_into),
    // so a prepare() that throws leaves no half-made plan to follow.
    requested_.clear();
    planned_calls_ = 0;
    plan_ = offline::plan_greedy_by_size(requests, options_.alignment);
    live_.resize(requests.size());       // (not zero-filled: a call writes its flag before segments() reads it)
    requested_.resize(requests.size());  // (every one written below: not zero-filled first)
    Bytes* requested = requested_.data();
    for (const PlannedRequest& request : requests) *requested++ = request.size;
    planned_calls_ = requests.size();
    next_call_ = 0;
    prepared_ = true;
    if (plan_.heap_size == 0) return;  // no requests: no arena
    arena_ = device_.malloc(plan_.heap_size);
    if (!arena_) free_when_refused_ = device_.free_memory();
  }

  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    Block block;
    if (!allocate_into(size, stream, block)) return std::nullopt;
    return block;
  }

  // The Replayer's call: the block written in place, not through an optional (policy.hpp).
  bool allocate_into(Bytes size, StreamId stream, Block& out) override {
    // (Before prepare() the plan has no requests: not_in_plan tells that case apart.)
    if (next_call_ >= planned_calls_ || requested_[next_call_] != size) [[unlikely]] {
      not_in_plan(size);
    }
    const std::size_t k = next_call_++;
    if (!arena_) [[unlikely]] {  // no cache to flush: no retry
      refuse(size);
      return false;
    }
    live_[k] = 1;
    out = Block{*arena_ + plan_.offsets[k], plan_.sizes[k], size, stream, k};
    return true;
  }

  // The block stays taken until the free completes (the plan's interval ends there).
  void free_requested(const Block& /*block*/) override {}
  void free_completed(const Block& block) override {
    if (block.cookie < planned_calls_) live_[block.cookie] = 0;  // (live_ has one flag per planned call)
  }

  // The plan's promise: the live blocks lie in the arena without overlapping (the segment view
  // then tiles it).
  std::vector<std::string> audit() const override {
    kit::AuditLog log("offline");
    kit::audit_segments(log, segments());
    return log.take();
  }

  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    const double overhead = static_cast<double>(plan_.heap_size - plan_.lower_bound);
    const std::int64_t overhead_ppm =
        plan_.lower_bound == 0 ? 0 : std::llround(overhead * 1e6 / static_cast<double>(plan_.lower_bound));
    return {
        {"plan_heap_bytes", static_cast<std::int64_t>(plan_.heap_size)},
        {"lower_bound_bytes", static_cast<std::int64_t>(plan_.lower_bound)},
        {"plan_overhead_ppm", overhead_ppm},  // (heap - lower bound) / lower bound, parts per million
        {"planned_buffers", static_cast<std::int64_t>(requested_.size())},
        {"alignment_bytes", static_cast<std::int64_t>(options_.alignment)},
    };
  }

  // One arena segment: the live blocks (until their free completes) and the gaps between them.
  std::vector<SegmentView> segments() const override {
    if (!arena_) return {};
    std::vector<std::size_t> live;
    for (std::size_t k = 0; k < next_call_; ++k) {  // (the calls made so far: each wrote its flag)
      if (live_[k]) live.push_back(k);
    }
    std::sort(live.begin(), live.end(),
              [&](std::size_t a, std::size_t b) { return plan_.offsets[a] < plan_.offsets[b]; });
    SegmentView view{*arena_, plan_.heap_size, 0, "arena", false, {}};
    Bytes covered = 0;
    for (std::size_t k : live) {
      if (plan_.offsets[k] > covered) view.blocks.push_back({*arena_ + covered, plan_.offsets[k] - covered, false});
      view.blocks.push_back({*arena_ + plan_.offsets[k], plan_.sizes[k], true});
      covered = plan_.offsets[k] + plan_.sizes[k];
    }
    if (covered < plan_.heap_size) view.blocks.push_back({*arena_ + covered, plan_.heap_size - covered, false});
    return {view};
  }

 private:
  // The calls the plan does not know (out of line: the hot path of allocate_into keeps fewer
  // registers without their messages).
  [[noreturn, gnu::cold, gnu::noinline]] void not_in_plan(Bytes size) {
    if (!prepared_) {
      throw std::logic_error("offline: allocate() before prepare(): the offline policy plans from the whole trace");
    }
    if (next_call_ >= requested_.size()) {
      throw std::logic_error(
          fmt::format("offline: allocate() call {} ({} bytes) is not in the plan, which has {} requests", next_call_,
                      size, requested_.size()));
    }
    const std::size_t k = next_call_++;  // (counted, as a call the plan knows, and not live)
    live_[k] = 0;
    throw std::logic_error(fmt::format(
        "offline: allocate() call {} asks for {} bytes but the plan's request {} has {}: the calls do not follow "
        "planned_requests(trace)",
        k, size, k, requested_[k]));
  }
  [[gnu::cold, gnu::noinline]] void refuse(Bytes size) {
    out_of_memory(fmt::format(
        "offline: the plan needs {} bytes of one arena; the device has {} free (request of {} bytes; {} of {} bytes "
        "reserved)",
        plan_.heap_size, free_when_refused_, size, device_.reserved(), device_.capacity()));
  }

  OfflineOptions options_;
  Device& device_;
  bool prepared_ = false;
  // Per planned request: the bytes allocate() must ask for.
  std::vector<Bytes, offline::DefaultInitAllocator<Bytes>> requested_;
  offline::GreedyPlan plan_;
  // Per planned request: handed out, free not completed (written by its call: see segments()).
  std::vector<std::uint8_t, offline::DefaultInitAllocator<std::uint8_t>> live_;
  std::size_t planned_calls_ = 0;  // requested_.size(), kept as a count for allocate_into's test
  std::size_t next_call_ = 0;      // index of the next allocate() call in the plan
  std::optional<Addr> arena_;
  Bytes free_when_refused_ = 0;  // device free memory when the arena malloc failed
};

const PolicyRegistration registration{PolicyInfo{
    "offline",
    "offline static plan: the whole trace's requests packed into one arena by greedy-by-size best fit",
    "Pisarchyk & Lee (arXiv 2001.03288) greedy-by-size offsets, in XLA GlobalDecreasingSizeBestFitHeap's "
    "order (size desc, lifetime desc, then request order) with best-fit gaps among time-overlapping requests. "
    "Sees the whole trace first; one arena malloc'd before event 0 and held to the end; "
    "frees return nothing. Simplified: one greedy pass (no search, no aliasing); streams ignored (a block "
    "is reused only after its free completes). detailed_stats gives the no-fragmentation lower bound.",
    {
        {"alignment", "512", "bytes each request is rounded up to (a power of two, 1 to 1 GiB)"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<OfflinePolicy>(parse_options(options), device);
    }}};

}  // namespace
}  // namespace fraglab
