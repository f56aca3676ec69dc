// Fidelity validation against a recorded run. See include/fraglab/validate.hpp for what is
// compared and how missing information is inferred.
//
// Alignment: a recorded segment action and a simulated device call correspond when they are the
// k-th of their kind in each run and the same number of requests came before them (a recorded
// segment_alloc precedes the alloc entry it served; the simulated cudaMalloc happens while that
// request is being served). Reserved bytes are compared after every request, not after observed
// events, because the record shows a segment action as its own entry before the request.
#include "fraglab/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "fraglab/policy.hpp"
#include "fraglab/recorded_memory.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/start_state.hpp"

namespace fraglab {
namespace {

struct SegmentAction {
  Op kind = Op::SegmentAlloc;
  Addr addr = 0;
  Bytes size = 0;
  std::uint64_t requests_before = 0;  // requests (allocs) issued before this action
  std::uint64_t event_index = 0;      // index in the prepared trace
  bool operator==(const SegmentAction& o) const {
    return kind == o.kind && addr == o.addr && size == o.size && requests_before == o.requests_before;
  }
};

std::string describe(const SegmentAction& a) {
  return fmt::format("{} addr=0x{:x} size={} after {} requests", op_name(a.kind), a.addr, a.size, a.requests_before);
}

// The recorded run, prepared for replay: inferred empty_cache calls inserted, oom entries turned
// into requests expected to fail.
struct PreparedRun {
  Trace trace;
  std::vector<std::uint64_t> original_index;  // prepared event -> index in the input trace
  std::vector<Bytes> reserved_after;          // recorded reserved bytes after each prepared event
  std::vector<char> expect_oom;               // per prepared event: an injected request that failed
  std::uint64_t empty_cache_inferred = 0;
};

bool is_release(Op op) { return op == Op::SegmentFree || op == Op::SegmentUnmap; }
bool is_grow(Op op) { return op == Op::SegmentAlloc || op == Op::SegmentMap; }

// `forced_flushes`: burst starts (input indices) to read as empty_cache() whatever the rule says.
PreparedRun prepare(const Trace& input, Bytes available, bool gc_configured,
                    const std::set<std::uint64_t>& forced_flushes) {
  PreparedRun run;
  run.trace.name = input.name;
  run.trace.source = input.source;
  run.trace.strings = input.strings;
  run.trace.initial = input.initial;
  AllocId next_id = 1;
  for (const InitialAllocation& a : input.initial.allocations) next_id = std::max(next_id, a.id + 1);
  for (const Event& e : input.events) {
    if (e.op == Op::Alloc) next_id = std::max(next_id, e.id + 1);
  }

  Bytes reserved = input.initial.reserved_bytes();
  const auto& events = input.events;
  auto push = [&](const Event& e, std::uint64_t original, bool oom) {
    run.trace.events.push_back(e);
    run.original_index.push_back(original);
    if (e.op == Op::SegmentAlloc || e.op == Op::SegmentMap) reserved += e.size;
    if (is_release(e.op)) reserved -= e.size;
    run.reserved_after.push_back(reserved);
    run.expect_oom.push_back(oom ? 1 : 0);
  };
  // free_completed entries that a flush inside a malloc emitted (it synchronises all streams
  // first, allocator-model §5.3 step 1) stand before the burst in the record, but happened after the
  // failed cache lookup: they are replayed after the request, where the policy's own flush has
  // already completed them.
  std::vector<std::pair<Event, std::uint64_t>> completions_after_request;
  std::uint32_t inferred_tag = kNoString;  // interned on first use: no inference, no new string
  for (std::uint64_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    // A burst right after an empty_cache event (recorded, or inferred when the trace was read) is
    // that call's: nothing is left to infer.
    if (is_release(e.op) && (i == 0 || !is_release(events[i - 1].op)) &&
        (i == 0 || events[i - 1].op != Op::EmptyCache)) {
      std::uint64_t end = i;
      while (end < events.size() && is_release(events[end].op)) ++end;
      bool flush_in_malloc = false;    // a retry, or the flush before an OOM
      bool collect_in_malloc = false;  // garbage collection before a new segment
      if (end < events.size()) {
        const Event& next = events[end];
        flush_in_malloc = next.op == Op::Oom || (is_grow(next.op) && reserved + next.size > available);
        collect_in_malloc = is_grow(next.op) && gc_configured;
      }
      if (forced_flushes.count(i) > 0 || !(flush_in_malloc || collect_in_malloc)) {
        Event flush;
        flush.op = Op::EmptyCache;
        if (inferred_tag == kNoString) inferred_tag = run.trace.intern(kInferredTag);
        flush.tag = inferred_tag;
        push(flush, i, false);
        ++run.empty_cache_inferred;
      } else if (flush_in_malloc) {
        while (!run.trace.events.empty() && run.trace.events.back().op == Op::FreeCompleted) {
          completions_after_request.emplace_back(run.trace.events.back(), run.original_index.back());
          run.trace.events.pop_back();
          run.original_index.pop_back();
          run.reserved_after.pop_back();
          run.expect_oom.pop_back();
        }
        std::reverse(completions_after_request.begin(), completions_after_request.end());
      }
    }
    if (e.op == Op::Oom) {
      Event request;
      request.op = Op::Alloc;
      request.id = next_id++;
      request.size = e.size;
      request.stream = e.stream;
      push(request, i, true);
    } else {
      push(e, i, false);
    }
    if (e.op == Op::Alloc || e.op == Op::Oom) {
      for (const auto& [completion, original] : completions_after_request) push(completion, original, false);
      completions_after_request.clear();
    }
  }
  return run;
}

// Records the simulated device calls, tagged with the number of requests issued before them.
class CallRecorder final : public DeviceListener, public ReplayObserver {
 public:
  std::vector<SegmentAction> actions;
  std::vector<std::optional<Addr>> request_addrs;  // per prepared event: the block handed out
  std::vector<Bytes> reserved_after;
  std::uint64_t requests = 0;
  std::uint64_t current_event = 0;
  bool started = false;

  void on_device_call(DeviceCall call, Addr addr, Bytes size) override {
    if (!started || call > DeviceCall::Unmap) return;  // the start state is not compared; nor aliases
    static constexpr Op kOps[] = {Op::SegmentAlloc, Op::SegmentFree, Op::SegmentMap, Op::SegmentUnmap};
    actions.push_back({kOps[static_cast<int>(call)], addr, size, requests, current_event});
  }
  void on_start(const Trace& trace, const Policy&) override {
    started = true;
    request_addrs.assign(trace.events.size(), std::nullopt);
    reserved_after.assign(trace.events.size(), 0);
  }
  void on_event(const ReplayPoint& p) override {
    if (p.event->op == Op::Alloc) {
      ++requests;
      if (p.block) request_addrs[p.event_index] = p.block->addr;
    }
    reserved_after[p.event_index] = p.reserved;
    current_event = p.event_index + 1;
  }
};

std::string event_text(const Trace& t, const Event& e) {
  switch (e.op) {
    case Op::Alloc:
      return fmt::format("alloc id={} size={} stream={}{}", e.id, e.size, e.stream,
                         e.has_addr ? fmt::format(" addr=0x{:x}", e.addr) : "");
    case Op::Free:
    case Op::FreeRequested:
    case Op::FreeCompleted:
      return fmt::format("{} id={}", op_name(e.op), e.id);
    case Op::Mark:
      return fmt::format("mark {}={}", t.string_at(static_cast<std::uint32_t>(e.id)),
                         t.string_at(static_cast<std::uint32_t>(e.size)));
    case Op::Oom:
      return fmt::format("oom size={} device_free={}", e.size, e.addr);
    case Op::EmptyCache:
      return "empty_cache (inferred)";
    default:
      return fmt::format("{} addr=0x{:x} size={}", op_name(e.op), e.addr, e.size);
  }
}

std::string state_text(const Policy& policy, StreamId stream) {
  std::uint64_t free_blocks = 0;
  Bytes largest = 0, free_bytes = 0;
  std::vector<std::pair<Bytes, Addr>> candidates;
  for (const SegmentView& s : policy.segments()) {
    if (s.stream != stream) continue;
    for (const SegmentView::Piece& p : s.blocks) {
      if (p.allocated) continue;
      ++free_blocks;
      free_bytes += p.size;
      largest = std::max(largest, p.size);
      candidates.emplace_back(p.size, p.addr);
    }
  }
  std::sort(candidates.rbegin(), candidates.rend());
  std::string text = fmt::format("stream {}: {} free cached blocks, {} in all, largest {}", stream, free_blocks,
                                 format_bytes(free_bytes), format_bytes(largest));
  for (size_t i = 0; i < std::min<size_t>(candidates.size(), 3); ++i) {
    text += fmt::format("; free 0x{:x} size {}", candidates[i].second, candidates[i].first);
  }
  return text;
}

// A simple sound rule for "the start state, not the model, may explain this divergence": the
// deciding request's recorded or simulated block lies in an initial segment that holds a block
// of undetermined size (its size moves the free space around it, and so best-fit ties, §3.1).
// `addrs`: the request's recorded and simulated addresses, those known.
const StartBlock* undetermined_cause(const InitialState& initial, const std::vector<StartBlock>& undetermined,
                                     const std::vector<Addr>& addrs) {
  for (const StartBlock& u : undetermined) {
    for (const InitialSegment& seg : initial.segments) {
      if (u.addr < seg.addr || u.addr >= seg.addr + seg.size) continue;
      for (Addr a : addrs) {
        if (a >= seg.addr && a < seg.addr + seg.size) return &u;
      }
    }
  }
  return nullptr;
}

// One replay of the prepared run and its comparison with the record.
struct Attempt {
  PreparedRun run;
  std::unique_ptr<PolicyOnDevice> replay;               // kept: the report reads the policy's segments after the run
  std::vector<Divergence> divergences;                  // the first of each category
  std::optional<SegmentAction> first_segment_recorded;  // the recorded side of a segment divergence
  std::vector<std::optional<Addr>> simulated_addrs;     // per prepared event: the block handed out
  ValidationReport counts;
};

Attempt attempt(const Trace& trace, const std::string& spec, Bytes capacity, Bytes available, bool gc_configured,
                const std::set<std::uint64_t>& forced_flushes, const ReplayProgress& progress) {
  Attempt a;
  ValidationReport& report = a.counts;
  a.run = prepare(trace, available, gc_configured, forced_flushes);
  PreparedRun& run = a.run;
  report.empty_cache_inferred = run.empty_cache_inferred;
  a.replay = std::make_unique<PolicyOnDevice>(
      spec, device_spec(SimDeviceConfig{.capacity = capacity, .external = capacity - available}));
  // A sim spec builds a SimDevice, the one device that takes address hints.
  SimDevice& device = dynamic_cast<SimDevice&>(a.replay->device());

  // Hand out the recorded addresses: every segment_alloc in order, and for expandable segments
  // the first mapped address of each virtual range (ranges grow from their lowest address).
  std::vector<SegmentAction> recorded;
  std::uint64_t requests = 0;
  std::vector<Addr> range_bases;
  const Bytes range_size = 20 * MiB * ((capacity * 9 / 8 + 20 * MiB - 1) / (20 * MiB));
  auto in_known_range = [&](Addr addr) {
    return std::any_of(range_bases.begin(), range_bases.end(),
                       [&](Addr b) { return addr >= b && addr < b + range_size; });
  };
  // Ranges of the rebuilt start state begin where the trace's maps put them (start_state.hpp;
  // the pytorch policy's adopt() reserves them there), else at their first mapped run. Maps in
  // them are growth of a known range, not a new one to hint.
  const Bytes small_range = 2 * MiB * ((capacity + capacity / 8 + 2 * MiB - 1) / (2 * MiB));
  for (const ExpandableRangeStart& r : infer_expandable_ranges(run.trace, small_range, range_size)) {
    if (!in_known_range(r.base)) range_bases.push_back(r.base);
  }
  for (std::uint64_t i = 0; i < run.trace.events.size(); ++i) {
    const Event& e = run.trace.events[i];
    if (e.op == Op::Alloc) ++requests;
    if (!is_observed(e.op) || e.op == Op::Oom) continue;
    recorded.push_back({e.op, e.addr, e.size, requests, i});
    if (e.op == Op::SegmentAlloc) device.hint_next_malloc(e.addr);
    if (e.op == Op::SegmentMap) {
      if (!in_known_range(e.addr)) {
        range_bases.push_back(e.addr);
        device.hint_next_range(e.addr);
      }
    }
  }
  report.segment_events_recorded = recorded.size();

  CallRecorder recorder;
  device.add_listener(&recorder);
  const ReplayResult result = a.replay->run(run.trace, {}, {.progress = progress, .extra = {&recorder}});
  device.remove_listener(&recorder);

  report.segment_events_simulated = recorder.actions.size();
  a.simulated_addrs = recorder.request_addrs;
  report.peak_reserved_simulated = result.metrics.peak_reserved;
  report.retries_simulated = result.metrics.num_alloc_retries;

  auto diverge = [&](std::uint64_t prepared_index, std::string category, std::string rec, std::string sim) {
    for (const Divergence& d : a.divergences) {
      if (d.category == category) return;
    }
    Divergence d;
    d.event_index = prepared_index;  // mapped to the input's numbering below
    d.category = std::move(category);
    d.recorded = std::move(rec);
    d.simulated = std::move(sim);
    a.divergences.push_back(std::move(d));
  };

  // Segment actions, k-th against k-th.
  const size_t common = std::min(recorded.size(), recorder.actions.size());
  for (size_t k = 0; k < common; ++k) {
    if (recorded[k] == recorder.actions[k]) {
      ++report.segment_events_matched;
    } else {
      if (!a.first_segment_recorded) a.first_segment_recorded = recorded[k];
      diverge(std::min(recorded[k].event_index, recorder.actions[k].event_index), "segment", describe(recorded[k]),
              describe(recorder.actions[k]));
    }
  }
  if (recorded.size() > common) {
    if (!a.first_segment_recorded) a.first_segment_recorded = recorded[common];
    diverge(recorded[common].event_index, "segment", describe(recorded[common]), "no further segment action");
  } else if (recorder.actions.size() > common) {
    const SegmentAction& extra = recorder.actions[common];
    diverge(extra.event_index, "segment", "no further segment action", describe(extra));
  }

  // Requests: addresses, expected OOMs, and reserved bytes after each one.
  std::map<std::uint64_t, const OomRecord*> ooms;
  for (const OomRecord& o : result.ooms) ooms[o.event_index] = &o;
  report.ooms_simulated = result.ooms.size();
  for (std::uint64_t i = 0; i < run.trace.events.size(); ++i) {
    const Event& e = run.trace.events[i];
    if (e.op == Op::Alloc) {
      const bool sim_oom = ooms.count(i) > 0;
      if (run.expect_oom[i]) {
        if (!sim_oom) {
          diverge(i, "oom", fmt::format("oom for {} bytes", e.size),
                  fmt::format("served at 0x{:x}", recorder.request_addrs[i].value_or(0)));
        }
        continue;
      }
      if (sim_oom) {
        diverge(i, "oom", fmt::format("served {}", e.has_addr ? fmt::format("at 0x{:x}", e.addr) : ""),
                "out of memory: " + ooms[i]->message);
        continue;
      }
      if (e.has_addr) {
        ++report.allocs_recorded;
        if (recorder.request_addrs[i] == e.addr) {
          ++report.alloc_addresses_matched;
        } else {
          diverge(i, "alloc_address", fmt::format("0x{:x}", e.addr),
                  fmt::format("0x{:x}", recorder.request_addrs[i].value_or(0)));
        }
      }
    }
    if (e.op == Op::Alloc || e.op == Op::Free || e.op == Op::FreeRequested || e.op == Op::FreeCompleted) {
      ++report.reserved_checks;
      if (recorder.reserved_after[i] == run.reserved_after[i]) {
        ++report.reserved_matched;
      } else {
        diverge(i, "reserved", fmt::format("{} bytes reserved", run.reserved_after[i]),
                fmt::format("{} bytes reserved", recorder.reserved_after[i]));
      }
    }
  }

  return a;
}

// What a validation or an inference assumes about the run: the policy spec, the memory the
// allocator could obtain and the GPU's capacity. Fills the report's recorded figures and notes.
struct RunAssumptions {
  std::string spec;
  Bytes capacity = 0;
  bool gc_configured = false;
};

RunAssumptions assume(const Trace& trace, const ValidateOptions& options, ValidationReport& report) {
  RunAssumptions run;
  std::string spec = options.policy_spec;
  if (spec.empty()) spec = "pytorch:" + trace.allocator_conf;
  if (!options.extra_options.empty()) {
    spec += spec.find(':') == std::string::npos ? ":" : (spec.back() == ':' ? "" : ",");
    spec += options.extra_options;
  }
  if (!spec.empty() && spec.back() == ':') spec.pop_back();
  report.policy = spec;
  if (!trace.allocator_conf_known) {
    report.notes.emplace_back("the snapshot records no allocator_settings: PyTorch's defaults were assumed");
  }

  // Recorded reserved bytes, and the memory the allocator could obtain.
  const RecordedMemory recorded = recorded_memory(trace);
  report.reserved_at_start = recorded.reserved_at_start;
  report.ooms_recorded = recorded.ooms;
  const Bytes peak = recorded.peak_reserved;
  const std::optional<Bytes> oom_available = recorded.available_at_oom;
  report.peak_reserved_recorded = peak;
  if (options.available) {
    report.available_bytes = *options.available;
    report.available_source = "given (--available)";
  } else if (oom_available && *oom_available >= peak) {
    report.available_bytes = *oom_available;
    report.available_source = "reserved + device_free at the recorded oom";
  } else {
    report.available_bytes = peak;
    report.available_source = "the recorded peak reserved bytes";
    if (oom_available) {
      report.notes.push_back(fmt::format(
          "a recorded oom reports {} bytes obtainable, below the recorded peak {}: memory outside PyTorch changed "
          "during the run; the peak was used",
          *oom_available, peak));
    }
  }
  // The GPU's total memory is not in a snapshot. It sizes expandable segments' virtual ranges
  // (1.125 x capacity, allocator-model §7.1): assuming the obtainable bytes keeps simulated ranges no
  // larger than the recorded ones, so ranges the run reserved side by side do not collide.
  run.capacity = std::max(options.capacity.value_or(report.available_bytes), report.available_bytes);
  run.gc_configured = spec.find("garbage_collection_threshold") != std::string::npos;
  const bool fraction_configured = spec.find("per_process_memory_fraction") != std::string::npos;
  if ((run.gc_configured || fraction_configured) && !options.capacity) {
    report.notes.emplace_back(
        "a memory fraction / garbage collection limit is a share of the GPU's total memory, which a snapshot does not "
        "record: pass --capacity for an exact replay (the obtainable bytes were assumed)");
  }
  run.spec = std::move(spec);
  return run;
}

// Replays the prepared run, and while a burst read as a flush inside a malloc is not reproduced
// as one (the simulation served the request from the cache instead), re-reads that burst as an
// empty_cache() call and replays again.
Attempt converge(const Trace& trace, const RunAssumptions& run, Bytes available, const ReplayProgress& progress) {
  std::set<std::uint64_t> forced_flushes;
  Attempt a = attempt(trace, run.spec, run.capacity, available, run.gc_configured, forced_flushes, progress);
  for (;;) {
    const std::optional<SegmentAction>& rec = a.first_segment_recorded;
    if (!rec || !is_release(rec->kind)) break;
    std::uint64_t burst = a.run.original_index[rec->event_index];
    while (burst > 0 && is_release(trace.events[burst - 1].op)) --burst;
    if (!forced_flushes.insert(burst).second) break;
    Attempt retry = attempt(trace, run.spec, run.capacity, available, run.gc_configured, forced_flushes, progress);
    if (retry.counts.segment_events_matched <= a.counts.segment_events_matched) break;
    a = std::move(retry);
  }
  return a;
}

bool has_release(const Trace& trace) {
  return std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) { return is_release(e.op); });
}

std::uint64_t count_inferred(const Trace& trace) {
  std::uint64_t n = 0;
  for (const Event& e : trace.events) {
    n += e.op == Op::EmptyCache && e.tag != kNoString && trace.string_at(e.tag) == kInferredTag;
  }
  return n;
}

}  // namespace

std::uint64_t infer_unrecorded_events(Trace& trace, const ValidateOptions& options) {
  if (!has_release(trace)) return 0;  // only bursts of segment frees leave anything to infer
  ValidationReport scratch;
  const RunAssumptions assumed = assume(trace, options, scratch);
  const Attempt a = converge(trace, assumed, scratch.available_bytes, options.progress);
  // The prepared run with the recorded oom entries in place of the requests validate injects for
  // them: those stay observed events (a replay of another setting must not make the request).
  std::vector<Event> events;
  events.reserve(a.run.trace.events.size());
  for (std::size_t k = 0; k < a.run.trace.events.size(); ++k) {
    events.push_back(a.run.expect_oom[k] ? trace.events[a.run.original_index[k]] : a.run.trace.events[k]);
  }
  // Kept stacks follow their events; an inserted empty_cache (same original index as the event
  // it precedes, another op) has none.
  if (!trace.event_stacks.empty()) {
    std::vector<std::uint32_t> stacks(events.size(), kNoString);
    for (std::size_t k = 0; k < events.size(); ++k) {
      const std::uint64_t original = a.run.original_index[k];
      if (original < trace.events.size() && trace.events[original].op == events[k].op)
        stacks[k] = trace.event_stacks[original];
    }
    trace.event_stacks = std::move(stacks);
  }
  trace.events = std::move(events);
  trace.strings = a.run.trace.strings;
  return a.run.empty_cache_inferred;
}

ValidationReport validate_replay(const Trace& trace, const ValidateOptions& options) {
  ValidationReport report;
  const RunAssumptions assumed = assume(trace, options, report);
  Attempt a = converge(trace, assumed, report.available_bytes, options.progress);
  const PreparedRun& run = a.run;
  const Policy& policy = a.replay->policy();
  std::vector<Divergence>& divergences = a.divergences;
  using Counter = std::uint64_t ValidationReport::*;
  for (Counter field : {&ValidationReport::segment_events_recorded, &ValidationReport::segment_events_simulated,
                        &ValidationReport::segment_events_matched, &ValidationReport::allocs_recorded,
                        &ValidationReport::alloc_addresses_matched, &ValidationReport::reserved_checks,
                        &ValidationReport::reserved_matched, &ValidationReport::ooms_simulated,
                        &ValidationReport::retries_simulated, &ValidationReport::empty_cache_inferred}) {
    report.*field = a.counts.*field;
  }
  report.empty_cache_inferred += count_inferred(trace);  // inferred when the trace was read
  report.peak_reserved_simulated = a.counts.peak_reserved_simulated;
  std::vector<StartBlock>& undetermined = report.undetermined_blocks;
  for (StartBlock& b : policy.start_blocks()) {
    if (!b.error.empty()) report.notes.push_back(b.error);
    if (!b.determined()) undetermined.push_back(std::move(b));
  }
  if (trace.events.empty()) {
    // State only: the one thing to check is that the rebuilt start state is the recorded one.
    std::vector<std::pair<Addr, Bytes>> rebuilt, recorded_segments;
    for (const SegmentView& v : policy.segments()) rebuilt.emplace_back(v.addr, v.size);
    for (const InitialSegment& seg : trace.initial.segments) recorded_segments.emplace_back(seg.addr, seg.size);
    std::sort(rebuilt.begin(), rebuilt.end());
    if (rebuilt != recorded_segments) {
      Divergence d;
      d.category = "start_state";
      d.recorded = fmt::format("{} segments", recorded_segments.size());
      d.simulated = fmt::format("{} segments rebuilt", rebuilt.size());
      divergences.push_back(std::move(d));
    }
  }
  if (report.peak_reserved_recorded != report.peak_reserved_simulated) {
    Divergence d;
    d.event_index = run.trace.events.empty() ? 0 : run.trace.events.size() - 1;
    d.category = "peak_reserved";
    d.recorded = fmt::format("{}", report.peak_reserved_recorded);
    d.simulated = fmt::format("{}", report.peak_reserved_simulated);
    divergences.push_back(std::move(d));
  }
  report.exact = divergences.empty();
  if (!divergences.empty()) {
    Divergence first =
        *std::min_element(divergences.begin(), divergences.end(),
                          [](const Divergence& a, const Divergence& b) { return a.event_index < b.event_index; });
    const std::uint64_t at = first.event_index;
    const std::uint64_t from = at > options.context_events ? at - options.context_events : 0;
    const std::uint64_t to = std::min<std::uint64_t>(run.trace.events.size(), at + options.context_events + 1);
    for (std::uint64_t i = from; i < to; ++i) {
      first.context.push_back(fmt::format("{}{:>7}  {}", i == at ? "> " : "  ", run.original_index[i],
                                          event_text(run.trace, run.trace.events[i])));
    }
    const StreamId stream = at < run.trace.events.size() ? run.trace.events[at].stream : 0;
    first.state = "after the replay: " + state_text(policy, stream);
    // The request that decided it: the divergent alloc, or the one a segment action served.
    std::uint64_t request = at;
    while (request < run.trace.events.size() && run.trace.events[request].op != Op::Alloc) ++request;
    if (request < run.trace.events.size()) {
      const Event& e = run.trace.events[request];
      std::vector<Addr> addrs;
      if (e.has_addr) addrs.push_back(e.addr);
      if (a.simulated_addrs[request]) addrs.push_back(*a.simulated_addrs[request]);
      if (const StartBlock* u = undetermined_cause(trace.initial, undetermined, addrs)) {
        first.cause = fmt::format(
            "start state undetermined: the block of allocation {} at 0x{:x} may be {}..{} bytes ({} was assumed)",
            u->id, u->addr, u->min_size, u->max_size, u->chosen);
      }
    }
    first.event_index = at < run.original_index.size() ? run.original_index[at] : at;
    report.first_divergence = std::move(first);
  }

  if (trace.events.empty()) {
    report.notes.emplace_back(
        "the snapshot holds no trace entries (state only): there is no request to replay, only the rebuilt start "
        "state was checked");
  }
  std::uint64_t derived = 0;
  for (const InitialAllocation& a : trace.initial.allocations) derived += a.block_size == 0;
  if (derived > 0) {
    report.notes.push_back(fmt::format(
        "{} allocations live at the start were freed before the snapshot was taken: their block sizes were read "
        "from the trace's evidence where it holds any, else derived from the requests (docs/allocator-model.md §12.2)",
        derived));
  }
  if (!undetermined.empty()) {
    // The few widest first: they are the likeliest to matter.
    std::vector<const StartBlock*> widest;
    widest.reserve(undetermined.size());
    for (const StartBlock& b : undetermined) widest.push_back(&b);
    std::stable_sort(widest.begin(), widest.end(), [](const StartBlock* x, const StartBlock* y) {
      return x->max_size - x->min_size > y->max_size - y->min_size;
    });
    std::string list;
    for (std::size_t i = 0; i < std::min<std::size_t>(widest.size(), 3); ++i) {
      list += fmt::format("; block of allocation {} at 0x{:x}: {}..{} bytes", widest[i]->id, widest[i]->addr,
                          widest[i]->min_size, widest[i]->max_size);
    }
    if (widest.size() > 3) list += "; ...";
    report.notes.push_back(fmt::format("{} blocks undetermined by the trace{}", undetermined.size(), list));
  }
  if (report.empty_cache_inferred > 0) {
    report.notes.push_back(
        fmt::format("{} empty_cache() calls inferred from bursts of segment frees", report.empty_cache_inferred));
  }
  return report;
}

}  // namespace fraglab
