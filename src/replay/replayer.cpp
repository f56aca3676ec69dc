// The replay loop. It owns the measurement of requested and allocated bytes (the Device owns
// reserved bytes) and nothing else: no policy logic, no output.
//
// Invariants during the loop:
//  - requested = Σ requested bytes of live allocations (alloc .. free completed);
//  - allocated = Σ block sizes of live allocations whose free was not yet requested;
//  - held = Σ block sizes of live allocations (alloc .. free completed);
//  - an allocation that hit OOM is remembered so its later frees are ignored.
#include "fraglab/replay.hpp"
#include "fraglab/seeded_hash.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_map>

namespace fraglab {
namespace {

struct LiveAllocation {
  Block block;
  bool in_use = false;          // slot holds a live allocation
  bool free_requested = false;  // the program freed it; the block may not be reusable yet
  bool out_of_memory = false;   // the alloc failed: frees of this id are ignored
};

static_assert(std::is_trivially_destructible_v<LiveAllocation>, "LiveTable never destroys its dense slots");
static_assert(std::is_trivially_copyable_v<LiveAllocation>, "LiveTable moves its dense slots with memcpy");
static_assert(static_cast<int>(Op::Alloc) == 0 && static_cast<int>(Op::Free) == 1 &&
                  static_cast<int>(Op::FreeRequested) == 2 && static_cast<int>(Op::FreeCompleted) == 3,
              "Replayer::feed takes the ops up to FreeCompleted, past Alloc, for the frees");

// Live allocations by id: a flat array for ids below a limit of twice the trace's events and
// initial allocations (traces we write and snapshots number their allocations from 0, so all of
// theirs), a hash map for the others (hand-written traces may use any u64, e.g. 2^63: the limit
// bounds the array's memory). The array grows as ids reach it, so nothing scans the trace for its
// highest id first. A streamed replay (Replayer::start) does not know its events in advance: it
// keeps ids in pages of a paged table while they are dense (an id below twice the events seen so
// far), dropping each page once nothing in it is live, so it holds about what is live; other ids
// go to the hash map. Which table holds an id changes no result.
class LiveTable {
 public:
  struct Paged {};
  explicit LiveTable(Paged) : paged_(true) {}
  explicit LiveTable(const Trace& trace)
      : dense_limit_(2 * (trace.events.size() + trace.initial.allocations.size()) + 1024) {
    // Room for as many ids as there are events and initial allocations (a trace's allocs are fewer,
    // so its ids fit unless they skip): one allocation per run, no growth. Uninitialised: the slots
    // are constructed up to the highest id used so far (touch), as the replay reaches them, instead
    // of all of them up front (a fill of the whole table per run); a slot not constructed yet is not
    // in use for find().
    reserve(std::min<std::uint64_t>(dense_limit_, trace.events.size() + trace.initial.allocations.size() + 1));
  }
  LiveAllocation& operator[](AllocId id) { return paged_ ? paged_slot(id) : dense_at(id); }
  LiveAllocation* find(AllocId id) {
    if (!paged_) return dense_find(id);
    if ((id >> kPageBits) < pages_.size()) {
      Page* page = pages_[id >> kPageBits].get();
      if (page != nullptr && page->slots[id & kPageMask].in_use) return &page->slots[id & kPageMask];
    }
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  void erase(AllocId id) {
    if (!paged_) {
      dense_erase(id);
      return;
    }
    if ((id >> kPageBits) < pages_.size()) {
      std::unique_ptr<Page>& page = pages_[id >> kPageBits];
      if (page != nullptr && page->slots[id & kPageMask].in_use) {
        page->slots[id & kPageMask] = LiveAllocation{};
        if (--page->live == 0) release(page);
        return;
      }
    }
    sparse_.erase(id);
  }
  // Paged: the events seen so far, which bound the ids kept in pages.
  void seen(std::uint64_t events) { dense_bound_ = 2 * events + 1024; }
  // The dense table's own operator[], find and erase, for a caller that tested dense() once
  // (Replayer::feed picks its loop by it instead of testing it at every event).
  bool dense() const { return !paged_; }
  LiveAllocation& dense_at(AllocId id) { return touch(id); }
  LiveAllocation* dense_find(AllocId id) {
    if (id < constructed_) [[likely]]
      return slot(id).in_use ? &slot(id) : nullptr;
    return find_beyond(id);
  }
  void dense_erase(AllocId id) {
    if (id >= constructed_) [[unlikely]] {  // find() returned it: an id beyond the limit, in the hash map
      erase_beyond(id);
      return;
    }
    // Only the flags are reset: the block is read only while in_use, and the next alloc of this
    // id writes it (or marks the slot out_of_memory).
    LiveAllocation& live = slot(id);
    live.in_use = false;
    live.free_requested = false;
    live.out_of_memory = false;
  }

 private:
  static constexpr unsigned kPageBits = 12;
  static constexpr AllocId kPageMask = (AllocId{1} << kPageBits) - 1;
  struct Page {
    std::array<LiveAllocation, std::size_t{1} << kPageBits> slots{};
    std::uint32_t live = 0;  // slots in use
  };
  LiveAllocation& slot(AllocId id) {
    return std::launder(reinterpret_cast<LiveAllocation*>(storage_.get()))[id];  // NOLINT: see touch()
  }
  // Dense: the slot of `id`, constructing the slots up to it that were not yet (ids of a trace
  // mostly come in order, so this is a slot or a few at a time).
  LiveAllocation& touch(AllocId id) {
    if (id < constructed_) return slot(id);
    if (id >= capacity_) [[unlikely]]
      return touch_beyond(id);
    // The next id, usually; skipped ids out of line (the loop would otherwise be a memset call
    // per new id).
    if (id > constructed_) [[unlikely]]
      construct_up_to(id);
    // Only the flags are written, as dense_erase leaves a slot: its block is read only while
    // in_use, after the alloc that marks it in use wrote it (or marked it out_of_memory). The
    // storage is a byte array from new[], which implicitly creates the (implicit-lifetime)
    // LiveAllocation objects that slot() names; the block's 40 bytes are not zeroed per new id.
    LiveAllocation& fresh = slot(id);
    fresh.in_use = false;
    fresh.free_requested = false;
    fresh.out_of_memory = false;
    constructed_ = id + 1;
    return fresh;
  }
  [[gnu::noinline]] void construct_up_to(AllocId id) {
    for (; constructed_ < id; ++constructed_) {
      ::new (static_cast<void*>(storage_.get() + constructed_ * sizeof(LiveAllocation))) LiveAllocation{};
    }
  }
  // Dense, an id without room yet (kept out of line: the replay loop stays small). Below the limit
  // the array grows (doubling, at most to the limit); beyond it the id goes to the hash map.
  [[gnu::noinline]] LiveAllocation& touch_beyond(AllocId id) {
    if (id >= dense_limit_) return sparse_[id];
    reserve(std::min<std::uint64_t>(dense_limit_, std::max<std::uint64_t>(id + 1, 2 * capacity_)));
    return touch(id);
  }
  [[gnu::noinline]] LiveAllocation* find_beyond(AllocId id) {
    if (id < dense_limit_) return nullptr;  // its slot was never reached: never allocated
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  [[gnu::noinline]] void erase_beyond(AllocId id) { sparse_.erase(id); }
  // Dense: room for `slots` slots, keeping the constructed ones (trivially copyable).
  void reserve(std::uint64_t slots) {
    auto grown = std::make_unique_for_overwrite<std::byte[]>(slots * sizeof(LiveAllocation));
    if (constructed_ > 0) std::memcpy(grown.get(), storage_.get(), constructed_ * sizeof(LiveAllocation));
    storage_ = std::move(grown);
    capacity_ = slots;
  }
  LiveAllocation& paged_slot(AllocId id) {
    if (id >= dense_bound_) return sparse_[id];
    const std::size_t p = static_cast<std::size_t>(id >> kPageBits);
    if (p >= pages_.size()) pages_.resize(p + 1);
    if (pages_[p] == nullptr) pages_[p] = spare_ != nullptr ? std::move(spare_) : std::make_unique<Page>();
    LiveAllocation& slot = pages_[p]->slots[id & kPageMask];
    if (!slot.in_use) ++pages_[p]->live;  // the caller marks it in use
    return slot;
  }

  // A page whose last live slot was erased: kept as the spare that the next new page takes, not
  // freed. Every slot of it is reset (erase resets a slot), so it is a new page as it is. Without
  // it, a phase that frees each allocation before the next one (at most one live id in the newest
  // page) made and zero-filled a page of 4,096 slots per alloc.
  void release(std::unique_ptr<Page>& page) {
    if (spare_ == nullptr) {
      spare_ = std::move(page);
    } else {
      page.reset();
    }
  }

  bool paged_ = false;  // a streamed replay's table; else the dense one (ids beyond its limit in sparse_)
  std::uint64_t dense_bound_ = 1024;
  std::vector<std::unique_ptr<Page>> pages_;
  std::unique_ptr<Page> spare_;
  // Dense: ids below dense_limit_ have their slot in storage_, room for capacity_ slots, of which
  // the first constructed_ are constructed (LiveAllocation is trivially destructible: nothing to
  // destroy); the others are in sparse_.
  std::uint64_t dense_limit_ = 0;
  std::unique_ptr<std::byte[]> storage_;
  std::uint64_t capacity_ = 0;
  std::uint64_t constructed_ = 0;
  std::unordered_map<AllocId, LiveAllocation, SeededHash> sparse_;  // seeded: ids come from the trace
};

}  // namespace

std::string_view start_state_name(StartState s) { return s == StartState::Cold ? "cold" : "recorded"; }

Replayer::Replayer(const Trace& trace, Policy& policy, Device& device, ReplayOptions options)
    : trace_(trace), policy_(policy), device_(device), options_(options) {}

// The state of one run between start() and finish().
struct Replayer::Run {
  explicit Run(LiveTable table) : live(std::move(table)) {}
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  ReplayResult result;
  LiveTable live;
  Bytes requested = 0;
  Bytes allocated = 0;
  Bytes held = 0;
  Bytes best_reserved = 0;    // the highest reserved seen after an event
  Bytes lowest_reserved = 0;  // the least reserved seen so far
  std::uint64_t index = 0;    // events replayed so far
  bool stopped = false;       // stop_on_oom ended the run
};

Replayer::~Replayer() = default;

ReplayResult Replayer::run(std::string policy_spec) {
  begin(std::move(policy_spec), false);
  feed(trace_.events);
  return finish();
}

void Replayer::start(std::string policy_spec) { begin(std::move(policy_spec), true); }

void Replayer::begin(std::string policy_spec, bool streamed) {
  run_ = streamed ? std::make_unique<Run>(LiveTable(LiveTable::Paged{})) : std::make_unique<Run>(LiveTable(trace_));
  ReplayResult& result = run_->result;
  result.policy = std::move(policy_spec);
  Metrics& m = result.metrics;

  if (!options_.detailed_stats) policy_.skip_detailed_stats();  // before any request
  policy_.prepare(trace_);

  LiveTable& live = run_->live;
  Bytes& requested = run_->requested;
  Bytes& allocated = run_->allocated;
  Bytes& held = run_->held;
  result.start_state = options_.start_state;
  const std::vector<std::optional<Block>> initial_blocks = options_.start_state == StartState::Cold
                                                               ? policy_.allocate_initial(trace_.initial)
                                                               : policy_.adopt(trace_.initial);
  for (size_t i = 0; i < trace_.initial.allocations.size(); ++i) {
    const InitialAllocation& a = trace_.initial.allocations[i];
    LiveAllocation& slot = live[a.id];
    slot.in_use = true;
    if (!initial_blocks[i]) {
      // The rebuilt start state does not fit this policy on this device.
      slot.out_of_memory = true;
      result.ooms.push_back({0, a.requested, a.stream, "initial state: " + policy_.last_oom_message()});
      continue;
    }
    slot.block = *initial_blocks[i];
    for (ReplayObserver* o : observers_) o->on_initial_block(a, slot.block);
    slot.free_requested = a.free_requested;
    requested += a.requested;
    held += slot.block.size;
    if (!a.free_requested) allocated += slot.block.size;
  }
  device_allocs_at_start_ = device_.device_allocs();
  device_frees_at_start_ = device_.device_frees();
  device_.reset_time();  // the time of rebuilding the start state is not the run's
  measured_at_start_ = device_.measured_seconds();
  m.reserved_at_start = device_.reserved();
  m.peak_requested = requested;
  m.peak_allocated = allocated;
  run_->best_reserved = device_.reserved();
  run_->lowest_reserved = run_->best_reserved;
  m.lowest_reserved_before_peak = run_->lowest_reserved;
  m.allocated_at_peak_reserved = allocated;
  for (ReplayObserver* o : observers_) o->on_start(trace_, policy_);
}

void Replayer::feed(std::span<const Event> events) {
  if (run_->stopped) return;
  ReplayResult& result = run_->result;
  Metrics& m = result.metrics;
  LiveTable& live = run_->live;
  live.seen(run_->index + events.size());
  Bytes requested = run_->requested;
  Bytes allocated = run_->allocated;
  Bytes held = run_->held;
  Bytes best_reserved = run_->best_reserved;
  Bytes lowest_reserved = run_->lowest_reserved;
  // Kept in registers for the loop (the policy's calls could otherwise change them, for all the
  // compiler knows) and stored back below.
  Bytes peak_requested = m.peak_requested;
  Bytes peak_allocated = m.peak_allocated;
  const bool stop_on_oom = options_.stop_on_oom;
  // Observers are added before a run (add_observer), never by an event: read once per piece.
  const bool observed = !observers_.empty();
  // Event indices count from the first event of the trace, whichever piece this is.
  const std::uint64_t first = run_->index;
  std::uint64_t index = first;
  const std::uint64_t total = first + events.size();
  // The loop is compiled once for a dense table and once for the others, so that the choice is
  // made once per piece, not at every event (which table holds an id changes no result); and
  // once without the per-event tests of observers and stop_on_oom, for the usual plain replay.
  auto replay = [&]<bool kDense, bool kPlain>(std::bool_constant<kDense>, std::bool_constant<kPlain>) {
    auto erase = [&live](AllocId id) {
      if constexpr (kDense) {
        live.dense_erase(id);
      } else {
        live.erase(id);
      }
    };
    for (; index < total; ++index) {
      const Event& e = events[index - first];
      const Block* handed_out = nullptr;
      // The replayed ops tested in order of frequency (allocs, then the frees) before a switch for
      // the rare ones: two compares instead of a jump table's load and indirect jump per event.
      if (e.op == Op::Alloc) {
        LiveAllocation& slot = kDense ? live.dense_at(e.id) : live[e.id];
        slot.in_use = true;
        // Written into the slot: no copy of the block through an optional.
        if (!policy_.allocate_into(e.size, e.stream, slot.block)) {
          slot.out_of_memory = true;
          result.ooms.push_back({index, e.size, e.stream, policy_.last_oom_message()});
        } else {
          handed_out = &slot.block;
          requested += e.size;
          allocated += slot.block.size;
          held += slot.block.size;
          // Only an alloc raises requested and allocated: their peaks are taken here.
          peak_requested = std::max(peak_requested, requested);
          peak_allocated = std::max(peak_allocated, allocated);
        }
      } else if (e.op <= Op::FreeCompleted) {  // Free, FreeRequested, FreeCompleted
        LiveAllocation* slot = kDense ? live.dense_find(e.id) : live.find(e.id);
        if (slot == nullptr) {
          // validate_trace() rules this out for loaded traces
        } else if (slot->out_of_memory) {
          if (e.op != Op::FreeRequested) erase(e.id);
        } else {
          if (e.op != Op::FreeCompleted && !slot->free_requested) {
            allocated -= slot->block.size;
            slot->free_requested = true;
          }
          if (e.op == Op::FreeRequested) {
            policy_.free_requested(slot->block);
          } else {
            if (e.op == Op::Free)
              policy_.free(slot->block);
            else
              policy_.free_completed(slot->block);
            requested -= slot->block.requested;
            held -= slot->block.size;
            erase(e.id);
          }
        }
      } else {
        switch (e.op) {
          case Op::EmptyCache:
            // torch.cuda.empty_cache() waits for the device before it frees (README "Device time").
            device_.synchronize();
            policy_.empty_cache();
            break;
          case Op::Mark:
            policy_.mark(trace_.string_at(static_cast<std::uint32_t>(e.id)),
                         trace_.string_at(static_cast<std::uint32_t>(e.size)));
            break;
          default:  // observed events are not inputs to a policy
            break;
        }
      }

      const Bytes reserved = device_.reserved();
      lowest_reserved = std::min(lowest_reserved, reserved);
      if (reserved > best_reserved) {
        best_reserved = reserved;
        m.lowest_reserved_before_peak = lowest_reserved;
        m.allocated_at_peak_reserved = allocated;
        m.peak_reserved_event = static_cast<std::int64_t>(index);
      } else if (reserved == best_reserved && allocated > m.allocated_at_peak_reserved) {
        // Still at the peak (a cache, or a static arena, holds it): the busiest moment counts.
        m.allocated_at_peak_reserved = allocated;
      }
      if constexpr (kPlain) continue;  // no observers, no stop_on_oom
      if (observed) {
        const ReplayPoint point{index, &e, requested, allocated, reserved, held, handed_out, &device_.time()};
        for (ReplayObserver* o : observers_) o->on_event(point);
      }
      if (stop_on_oom && e.op == Op::Alloc && handed_out == nullptr && !result.ooms.empty()) {
        result.stopped_on_oom = true;
        run_->stopped = true;
        ++index;
        break;
      }
    }
  };
  const bool plain = !observed && !stop_on_oom;
  if (live.dense()) {
    if (plain) {
      replay(std::true_type{}, std::true_type{});
    } else {
      replay(std::true_type{}, std::false_type{});
    }
  } else {
    replay(std::false_type{}, std::false_type{});  // no plain variant: a sparse table costs more anyway
  }
  m.peak_requested = peak_requested;
  m.peak_allocated = peak_allocated;
  run_->index = index;
  run_->requested = requested;
  run_->allocated = allocated;
  run_->held = held;
  run_->best_reserved = best_reserved;
  run_->lowest_reserved = lowest_reserved;
}

ReplayResult Replayer::finish() {
  for (ReplayObserver* o : observers_) o->on_finish();

  ReplayResult result = std::move(run_->result);
  Metrics& m = result.metrics;
  const Bytes best_reserved = run_->best_reserved;
  result.events_replayed = run_->index;
  m.peak_reserved = device_.peak_reserved();
  m.reserved_at_end = device_.reserved();
  m.fragmentation_at_peak =
      best_reserved == 0 ? 0.0
                         : 1.0 - static_cast<double>(m.allocated_at_peak_reserved) / static_cast<double>(best_reserved);
  m.peak_utilization =
      m.peak_reserved == 0 ? 0.0 : static_cast<double>(m.peak_allocated) / static_cast<double>(m.peak_reserved);
  const PolicyCounters counters = policy_.counters();
  m.num_alloc_retries = counters.num_alloc_retries;
  m.num_ooms = result.ooms.size();
  m.num_device_alloc = device_.device_allocs() - device_allocs_at_start_;
  m.num_device_free = device_.device_frees() - device_frees_at_start_;
  m.device_time_s = device_.time().device_us / 1e6;
  m.stall_time_s = device_.time().stall_us / 1e6;
  if (const std::optional<double> measured = device_.measured_seconds(); measured && measured_at_start_)
    m.measured_device_time_s = *measured - *measured_at_start_;
  m.host_bytes_moved = policy_.host_bytes_moved();
  if (options_.detailed_stats) result.detailed_stats = policy_.detailed_stats();
  result.notes = policy_.notes();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_->started).count();
  run_.reset();
  return result;
}

}  // namespace fraglab
