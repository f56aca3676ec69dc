// The "pytorch" policy: the Policy adapter around CachingAllocator and its registration.
// Options are PYTORCH_CUDA_ALLOC_CONF pasted verbatim, plus version:V (config.hpp).
#include <fmt/format.h>

#include <stdexcept>

#include "fraglab/policy.hpp"
#include "pytorch/caching_allocator.hpp"
#include "pytorch/coverage.hpp"

namespace fraglab {
namespace {

class PytorchPolicy final : public Policy {
 public:
  PytorchPolicy(cca::Config config, Device& device, std::string options)
      : allocator_(std::move(config), device), options_(std::move(options)) {}

  void prepare(const Trace& trace) override { allocator_.prepare(trace); }
  std::vector<std::optional<Block>> adopt(const InitialState& initial) override { return allocator_.adopt(initial); }
  std::optional<Block> allocate(Bytes size, StreamId stream) override { return allocator_.malloc(size, stream); }
  bool allocate_into(Bytes size, StreamId stream, Block& out) override { return allocator_.malloc(size, stream, out); }
  void free_requested(const Block& block) override { allocator_.free_requested(block); }
  void free_completed(const Block& block) override { allocator_.free_completed(block); }
  void free(const Block& block) override { allocator_.free(block); }
  void empty_cache() override { allocator_.empty_cache(); }

  PolicyCounters counters() const override {
    const cca::DeviceStats& s = allocator_.stats();
    return PolicyCounters{static_cast<std::uint64_t>(s.num_alloc_retries), static_cast<std::uint64_t>(s.num_ooms)};
  }
  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    if (!allocator_.keeps_usage_stats())
      throw std::logic_error("pytorch: detailed_stats() after skip_detailed_stats()");
    return allocator_.stats().listing(cca::has_requested_bytes_stat(allocator_.config().version));
  }
  void skip_detailed_stats() override { allocator_.skip_usage_stats(); }
  std::vector<SegmentView> segments() const override { return allocator_.segments(); }
  FreeAnatomy free_anatomy(std::optional<StreamId> stream) const override { return allocator_.free_anatomy(stream); }
  std::string last_oom_message() const override { return allocator_.last_oom_message(); }
  std::vector<std::string> notes() const override { return allocator_.config().notes; }
  std::vector<StartBlock> start_blocks() const override { return allocator_.start_blocks(); }
  std::optional<SnapshotSettings> snapshot_settings() const override;
  void record_coverage() override { allocator_.record_decisions(); }
  std::unique_ptr<SettingCoverage> coverage() const override { return cca::make_coverage(allocator_); }
  std::vector<std::string> audit() const override {
    kit::AuditLog log("pytorch");
    allocator_.audit(log);
    return log.take();
  }

 private:
  cca::CachingAllocator allocator_;
  std::string options_;  // the spec's OPTIONS, as given
};

// What PyTorch 2.x's _memory_snapshot() writes under allocator_settings for this Config
// (allocator-model §10); fraglab's snapshot reader rebuilds the same options from it.
std::optional<SnapshotSettings> PytorchPolicy::snapshot_settings() const {
  const cca::Config& c = allocator_.config();
  SnapshotSettings s;
  for (const OptionItem& item : split_options(options_, "pytorch")) {
    // version and the memory fraction are fraglab's (an API call in PyTorch, not a setting).
    if (item.key == "version" || item.key == "per_process_memory_fraction") continue;
    s.conf += fmt::format("{}{}:{}", s.conf.empty() ? "" : ",", item.key, item.value);
  }
  if (c.max_split_size != cca::kUnlimited) s.max_split_size = c.max_split_size;
  s.roundup_power2_divisions.assign(c.rounding.divisions.begin(), c.rounding.divisions.end());
  s.garbage_collection_threshold = c.garbage_collection_threshold;
  s.expandable_segments = c.expandable_segments;
  if (cca::has_max_non_split_rounding(c.version) && c.max_non_split_rounding != cca::kLargeBuffer)
    s.max_non_split_rounding = c.max_non_split_rounding;
  if (c.large_segment_size != cca::kLargeBuffer) s.large_segment_size = c.large_segment_size;
  return s;
}

const PolicyRegistration registration{PolicyInfo{
    "pytorch",
    "PyTorch's CUDACachingAllocator, decision for decision (PYTORCH_CUDA_ALLOC_CONF options, versions 1.13-newest)",
    "Emulates c10/cuda/CUDACachingAllocator.cpp as described in docs/allocator-model.md: rounding, small/large and "
    "per-stream pools, best fit, splitting, merging, max_split_size, garbage collection, the retry ladder, OOM "
    "text, expandable segments and memory_stats(). Not modelled: CUDA graphs / private MemPools, IPC, the "
    "cudaMallocAsync backend (use cuda_async), per-process NVML lines in the OOM message.",
    {
        {"version", "newest", "PyTorch release to emulate: 1.13, 2.0, 2.1, 2.4, 2.6, 2.8, 2.9, newest"},
        {"max_split_size_mb", "unlimited", "blocks this large (MiB) are never split; > 20 (<= 2.8), >= 20 (2.9+)"},
        {"max_non_split_rounding_mb", "20", "2.6+: slack an oversize request may waste in a cached block (MiB)"},
        {"roundup_power2_divisions", "0",
         "N, or [K:v,...,>:v] per size interval (K = lower bound in MiB): round requests to 1/N of a power of 2"},
        {"roundup_bypass_threshold_mb", "unlimited", "1.13 only: no power-of-2 rounding above this size (MiB)"},
        {"garbage_collection_threshold", "0",
         "(0,1): free old cached segments above this share of the memory fraction"},
        {"expandable_segments", "False", "2.1+: grow one virtual segment per stream and pool page by page"},
        {"per_process_memory_fraction", "1.0",
         "[0,1]: limit as torch.cuda.set_per_process_memory_fraction (fraction of device capacity)"},
        {"large_segment_size_mb", "20", "newest: segment size for 1-10 MiB requests and large expandable page (> 10)"},
        {"backend", "native", "native only (cudaMallocAsync: use the cuda_async policy)"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<PytorchPolicy>(cca::parse_config(options), device, std::string(options));
    }}};

}  // namespace
}  // namespace fraglab
