// Policy: an allocator design under test (docs/architecture.md).
//
// A policy hands out blocks carved from memory it reserves on a Device. It never reads traces or
// writes reports; the Replayer drives it. All of its reserved memory comes from the Device, so
// reserved bytes are measured the same way for every policy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/trace.hpp"
#include "fraglab/types.hpp"

namespace fraglab {

// A block handed to the program. `size` is the block size after the policy's rounding and
// splitting (allocated bytes), `requested` what the program asked for. `cookie` is the policy's
// own handle (an index, a pointer) so it need not look the block up by address.
struct Block {
  Addr addr = 0;
  Bytes size = 0;
  Bytes requested = 0;
  StreamId stream = 0;
  std::uint64_t cookie = 0;
};

// Counters every policy reports. Policies without the concept leave a counter at 0.
struct PolicyCounters {
  std::uint64_t num_alloc_retries = 0;  // cache flushes followed by a retry (PyTorch's count)
  std::uint64_t num_ooms = 0;
};

// A reserved region as the policy sees it, for reports and snapshot export.
struct SegmentView {
  Addr addr = 0;
  Bytes size = 0;
  StreamId stream = 0;
  std::string pool;  // "small", "large", "arena", ...
  bool expandable = false;
  struct Piece {
    Addr addr;
    Bytes size;
    bool allocated;
  };
  std::vector<Piece> blocks;  // address order
};

// The allocator settings a PyTorch memory snapshot of a run records (its `allocator_settings`,
// allocator-model §10, §11.2), for exporting a simulated run as a snapshot. Only the pytorch
// policy has them: other policies are no PYTORCH_CUDA_ALLOC_CONF setting.
struct SnapshotSettings {
  std::string conf;                     // PYTORCH_CUDA_ALLOC_CONF as given (fraglab-only keys left out)
  std::optional<Bytes> max_split_size;  // nullopt: no limit (PyTorch records -1)
  // Divisions per size interval: 1 MiB (everything below 2 MiB), 2 MiB, 4 MiB, ... 32768 MiB.
  std::vector<std::uint64_t> roundup_power2_divisions;
  double garbage_collection_threshold = 0;
  bool expandable_segments = false;
  Bytes max_non_split_rounding = 0;  // 0: PyTorch's default (not recorded)
  Bytes large_segment_size = 0;      // 0: PyTorch's default (not recorded)
};

// A policy's free cached bytes (the free pieces of its segments) split by who could use them,
// relative to a reference stream (fraglab/anatomy.hpp). Each free byte is in exactly one part.
struct FreeAnatomy {
  Bytes usable = 0;           // a request of the reference stream (and its pool) could use them
  Bytes stream_bound = 0;     // only requests of another stream can use them
  Bytes oversize_locked = 0;  // in blocks too large to be split for a smaller request
  Bytes small_pool = 0;       // in small-pool segments, which large requests cannot use
  std::uint64_t pieces = 0;   // pieces walked to classify them (the cost, for budgets)
  Bytes total() const { return usable + stream_bound + oversize_locked + small_pool; }
};

// The default classification, from a segment listing: free pieces of segments whose pool is
// "small" are small_pool, every other free piece is usable (streams share the segments). With
// `own_stream` (a policy whose segments belong to one stream), free pieces of segments of another
// stream are stream_bound first.
FreeAnatomy classify_free_pieces(const std::vector<SegmentView>& segments,
                                 std::optional<StreamId> own_stream = std::nullopt);

// A block of the start state whose size the trace does not record (an allocation live at the
// start of a cut-off trace, freed before the dump: allocator-model §12.2), as far as the policy could
// pin it down from the trace's own evidence.
struct StartBlock {
  AllocId id = 0;
  Addr addr = 0;  // recorded address
  Bytes requested = 0;
  Bytes min_size = 0;  // block sizes consistent with the trace
  Bytes max_size = 0;
  Bytes chosen = 0;      // the size adopt() gives it
  std::string evidence;  // what narrowed the interval ("" = the split rule alone)
  std::string error;     // non-empty: the trace contradicts every legal size (how)
  bool determined() const { return min_size == max_size; }
};

// What one finished replay proves about other settings of its policy (Policy::coverage()): a
// setting it covers would make every decision that replay made, so replaying it is not needed. A
// sweep asks each of its finished replays before it replays another setting.
class SettingCoverage {
 public:
  // A setting in the form covers() tests: parsed once, then tested against many coverages.
  class Candidate {
   public:
    virtual ~Candidate() = default;
  };
  virtual ~SettingCoverage() = default;
  // `spec` ("NAME:OPTIONS" of this coverage's policy) prepared for covers(); nullptr when it cannot
  // be (a bad option: its own replay reports that).
  virtual std::unique_ptr<Candidate> candidate(std::string_view spec) const = 0;
  // True only when a replay of the same trace, from the same start state, on the same device,
  // with the same ReplayOptions, under `candidate` (from candidate() of a coverage of the same
  // policy) makes every decision the covering replay made: the same blocks, device calls, flushes
  // and OOMs, hence the same Metrics and OOM records. Its policy counters may still echo the
  // setting (detailed_stats, notes).
  virtual bool covers(const Candidate& candidate) const = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;

  // Offline policies may look at the whole trace before the replay; others ignore it. The order
  // of the calls that follow is fixed (see fraglab/planned_requests.hpp), so such a policy knows
  // which request of the trace each allocate() is.
  virtual void prepare(const Trace& /*trace*/) {}
  // Rebuilds the state a cut-off trace starts from, as recorded (StartState::Recorded). Returns
  // one Block per initial allocation, in the order given. The default is allocate_initial(): a
  // policy that cannot take over a recorded layout starts as it would from cold.
  virtual std::vector<std::optional<Block>> adopt(const InitialState& initial);
  // The cold start (StartState::Recorded's what-if counterpart): an empty device, and each
  // initial allocation allocated as a normal request in the order given (address order), those
  // whose free was already requested then freed-requested. One Block (or nullopt) each.
  virtual std::vector<std::optional<Block>> allocate_initial(const InitialState& initial);

  // nullopt = out of memory (the policy counts it in num_ooms and keeps a message).
  virtual std::optional<Block> allocate(Bytes size, StreamId stream) = 0;
  // allocate(), the block written into `out` (the caller's own slot) instead of returned: false =
  // out of memory, `out` then unchanged. The Replayer calls this one, at every alloc event; a
  // policy whose allocator can write the block in place overrides it (pytorch) to save the copy
  // through the optional. It must decide exactly as allocate() does. The default (allocate(), then
  // the copy) is out of line: inline, the compiler guards every call the Replayer makes with a
  // speculative test for it. A policy without its own inherits kit::DirectDefaults'.
  virtual bool allocate_into(Bytes size, StreamId stream, Block& out);
  // The program freed the block; it may still be in use on other streams until free_completed.
  virtual void free_requested(const Block& block) = 0;
  // The block is really free now and may be reused.
  virtual void free_completed(const Block& block) = 0;
  // Both at once; the default is free_requested(), then free_completed(). Out of line for the same
  // reason as allocate_into's default.
  virtual void free(const Block& block);
  virtual void empty_cache() {}
  // A `mark` event of the trace (step / phase boundary). Policies that model synchronisation
  // points (cuda_async) use it; the default ignores it.
  virtual void mark(std::string_view /*label*/, std::string_view /*value*/) {}

  virtual PolicyCounters counters() const = 0;
  // Bytes moved between the device and host memory (both ways) by a policy that offloads
  // (gemini); 0 for the others.
  virtual Bytes host_bytes_moved() const { return 0; }
  // True when the memory at `addr` holds live blocks whose data the policy moved to host memory
  // (gemini's offloaded chunks): their device pages are unmapped on purpose, and the invariant
  // checker does not count that unmap against the live blocks there.
  virtual bool on_host(Addr /*addr*/) const { return false; }
  // Block bytes of the held blocks (live, or freed with the free pending) whose data is in host
  // memory now (on_host): held, but no part of reserved. The anatomy lists them apart
  // (Anatomy::host_resident) so that none of its parts goes negative by them.
  virtual Bytes held_on_host() const { return 0; }
  // Policy-specific statistics in a stable order, e.g. PyTorch's memory_stats() keys.
  virtual std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const { return {}; }
  // Tells the policy, before prepare(), that nothing reads detailed_stats() after the replay that
  // follows (a replay without --stats, a sweep): it may skip keeping figures that only they
  // report (pytorch's usage statistics), and then detailed_stats() throws std::logic_error. No
  // decision, Metrics figure or OOM message may change by it. The default keeps them.
  virtual void skip_detailed_stats() {}
  virtual std::vector<SegmentView> segments() const { return {}; }
  // The free bytes of segments() classified relative to the stream of the latest request
  // (nullopt: none yet), for the fragmentation anatomy (fraglab/anatomy.hpp). The default is
  // classify_free_pieces(segments()): policies with per-stream pools or unsplittable blocks
  // override it.
  virtual FreeAnatomy free_anatomy(std::optional<StreamId> stream) const;
  // One line on the last out-of-memory, in the policy's own words (PyTorch's message text).
  virtual std::string last_oom_message() const { return {}; }
  // Remarks on how the options were taken (accepted options that change nothing, assumptions).
  virtual std::vector<std::string> notes() const { return {}; }
  // After prepare(): one entry per initial allocation without a recorded block size, for
  // policies that infer them from the trace (pytorch); others return nothing.
  virtual std::vector<StartBlock> start_blocks() const { return {}; }
  // What a PyTorch snapshot of this run would record as allocator_settings; nullopt for policies
  // that are not PyTorch's allocator.
  virtual std::optional<SnapshotSettings> snapshot_settings() const { return std::nullopt; }
  // The policy's own invariants (free lists sorted and coalesced, counters consistent with its
  // blocks, pages mapped iff used, ...), recomputed from its state: one line per broken one, none
  // when all hold. InvariantChecker calls it after every event (--check-invariants).
  virtual std::vector<std::string> audit() const { return {}; }
  // Asks the policy to keep, during the replay that follows, what coverage() needs (a sweep
  // calls it before the replay). The default keeps nothing.
  virtual void record_coverage() {}
  // After a replay that record_coverage() preceded: the settings that replay covers (see
  // SettingCoverage). The default, nullptr, covers none: every setting is replayed.
  virtual std::unique_ptr<SettingCoverage> coverage() const { return nullptr; }
};

// ---- registry ---------------------------------------------------------------------------------

struct PolicyOption {
  std::string name;
  std::string default_value;
  std::string help;
};

struct PolicyInfo {
  std::string name;
  std::string summary;  // one line: what it models
  std::string source;   // where its behaviour comes from, and what it simplifies
  std::vector<PolicyOption> options;
  // Builds the policy from the OPTIONS part of "NAME:OPTIONS" (may be empty). Throws InputError
  // naming the key and the accepted values on a bad option.
  std::function<std::unique_ptr<Policy>(std::string_view options, Device& device)> create;
  // The policy reads the trace's tags (param, grad, ...): it refuses an untagged trace, and runs
  // of "every policy" leave it out on one.
  bool needs_tags = false;
};

class PolicyRegistry {
 public:
  static PolicyRegistry& instance();
  void add(PolicyInfo info);
  const PolicyInfo* find(std::string_view name) const;
  std::vector<const PolicyInfo*> all() const;  // sorted by name

 private:
  std::map<std::string, PolicyInfo, std::less<>> policies_;
};

// Registers a policy at static-initialisation time: one of these per policy folder.
struct PolicyRegistration {
  explicit PolicyRegistration(PolicyInfo info) { PolicyRegistry::instance().add(std::move(info)); }
};

// "NAME[:OPTIONS]" -> a policy. Throws InputError on an unknown name or a bad option.
std::unique_ptr<Policy> create_policy(std::string_view spec, Device& device);
// The NAME part of a spec.
std::string_view policy_name(std::string_view spec);
// The spec with every option at its registered default left out, the rest in key order and
// booleans in lower case, so specs that build the same policy compare equal:
// canonical_spec("pytorch:expandable_segments:False") == "pytorch". Throws InputError on a
// malformed option list.
std::string canonical_spec(std::string_view spec);
bool same_policy(std::string_view a, std::string_view b);

// ---- option-list helpers for policies ---------------------------------------------------------

// "key:value,key:value" with bracketed list values kept whole ("[256:1,>:8]").
struct OptionItem {
  std::string key;
  std::string value;
};
// Splits OPTIONS into items, in order. Throws InputError naming `policy` on a missing value.
std::vector<OptionItem> split_options(std::string_view options, std::string_view policy);

}  // namespace fraglab
