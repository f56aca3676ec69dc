// Fidelity validation: replay a recorded run's requests through a policy (normally `pytorch`
// under the run's own allocator settings) from the rebuilt start state, on a simulated device
// that hands out the recorded segment addresses, and compare what the simulation did with what
// the run recorded: every segment action (kind, address, size, and position among the allocs),
// every alloc address, reserved bytes after every request, the peak, and OOMs.
//
// What a snapshot does not record, and how it is inferred (README "Validating against a
// snapshot" says the same):
//  - empty_cache() calls leave only a burst of segment_free / segment_unmap. A burst is a cache
//    flush inside a malloc (retry, or garbage collection when that is configured) when it is
//    followed by the segment_alloc/map of a request that could not have fit without it, or by
//    an oom; every other burst is an empty_cache() call, inserted before the burst (when the
//    trace is read: infer_unrecorded_events(); a burst right after an empty_cache event is that
//    call's).
//  - the memory PyTorch could obtain. Default: the recorded peak reserved bytes, lowered to
//    reserved + device_free at a recorded oom. With exactly that much, every cudaMalloc that
//    succeeded in the run succeeds in the simulation, and every one that had to flush the cache
//    first fails first, so retries happen where the run had them. --available overrides it;
//    --capacity sets the GPU's total memory (memory fraction, GC limit, expandable VA size).
//  - a request that ended in OOM has no alloc entry, only an `oom` entry with the rounded size:
//    it is replayed as a request of that size, expected to fail.
//  - block sizes of allocations live at the start but freed before the dump: the policy reads
//    them from the trace's evidence (pytorch: policies/pytorch/start_evidence.hpp); those it
//    cannot pin down are listed with their possible sizes, and a first divergence decided in a
//    segment holding one is reported as "start state undetermined", not as a model error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

struct ValidateOptions {
  std::string policy_spec;           // empty: "pytorch:" + the snapshot's allocator settings
  std::string extra_options;         // appended to the policy's options (e.g. "version:2.1")
  std::optional<Bytes> capacity;     // GPU total memory (default: the available bytes)
  std::optional<Bytes> available;    // memory the allocator could obtain (default: inferred, see above)
  std::uint64_t context_events = 4;  // events shown on each side of the first divergence
  ReplayProgress progress = {};      // follows each replay (one, or more when a burst is re-read)
};

struct Divergence {
  std::uint64_t event_index = 0;  // index in the trace's events (fraglab inspect / convert order)
  std::string category;           // "segment", "alloc_address", "reserved", "oom"
  std::string recorded;
  std::string simulated;
  std::vector<std::string> context;  // the events around it, as recorded
  std::string state;                 // the simulated allocator state that led there
  // "" = a model error; else why the start state, not the model, may explain it: "start state
  // undetermined: ..." (the deciding request lies in a segment holding an undetermined block).
  std::string cause;
};

struct ValidationReport {
  std::string policy;
  bool exact = false;
  std::uint64_t segment_events_recorded = 0;
  std::uint64_t segment_events_simulated = 0;
  std::uint64_t segment_events_matched = 0;
  std::uint64_t allocs_recorded = 0;
  std::uint64_t alloc_addresses_matched = 0;
  std::uint64_t reserved_checks = 0;  // requests after which reserved bytes were compared
  std::uint64_t reserved_matched = 0;
  Bytes reserved_at_start = 0;
  Bytes peak_reserved_recorded = 0;
  Bytes peak_reserved_simulated = 0;
  std::uint64_t ooms_recorded = 0;
  std::uint64_t ooms_simulated = 0;
  std::uint64_t retries_simulated = 0;
  std::uint64_t empty_cache_inferred = 0;
  Bytes available_bytes = 0;
  std::string available_source;
  std::vector<std::string> notes;  // what was inferred, and what the snapshot lacks
  // Start-state blocks (allocations live at the start, freed before the dump) whose size the
  // trace does not pin down, with the sizes it allows (allocator-model §12.2).
  std::vector<StartBlock> undetermined_blocks;
  std::optional<Divergence> first_divergence;
};

// Makes what the record leaves implicit explicit events of `trace`, inferred exactly as
// validate_replay() infers them (and with the same replay): an empty_cache() call, tagged
// kInferredTag, before each burst of segment frees that was not a flush inside a malloc, and the
// free_completed entries a flush inside a malloc emitted moved after that request. Recorded oom
// entries stay observed events. Every command reads traces through this, so replay, compare,
// sweep, check, diff and convert see the same events validate does. Returns the number of
// empty_cache() calls inferred; a trace without segment frees is left as it is.
std::uint64_t infer_unrecorded_events(Trace& trace, const ValidateOptions& options = {});

ValidationReport validate_replay(const Trace& trace, const ValidateOptions& options = {});

}  // namespace fraglab
