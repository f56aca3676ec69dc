// The "gmlake" policy: the Policy adapter around gmlake::Allocator, its option parsing (the table
// is in options.hpp) and its registration. What it models and where each decision comes from:
// allocator.hpp.
#include <fmt/format.h>

#include <stdexcept>

#include "fraglab/policy_kit.hpp"
#include "gmlake/allocator.hpp"

namespace fraglab {
namespace {

gmlake::Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("gmlake", text);
  return gmlake::Options{
      reader.flag("vmm_defragment"),
      reader.get<Bytes>("frag_limit", "a whole number of MiB >= 0",
                        [](std::string_view v) { return kit::parse_whole_units(v, MiB); }),
      reader.get<double>("reuse_limit", "a number > 0",
                         [](std::string_view v) -> std::optional<double> {
                           const std::optional<double> limit = kit::parse_number(v);
                           if (!limit || *limit <= 0) return std::nullopt;
                           return limit;
                         }),
      static_cast<int>(reader.choice("defrag_level", {"0", "1", "2"})),
      reader.get<std::uint64_t>("auto_gc", "a whole number of GiB >= 0",
                                [](std::string_view v) { return kit::parse_whole(v, UINT64_MAX / GiB); }),
      reader.flag("re_alloc"),
      reader.flag("self_check"),
  };
}

class GmlakePolicy final : public kit::DirectDefaults<GmlakePolicy> {
 public:
  GmlakePolicy(gmlake::Options options, Device& device)
      : allocator_(options, device), self_check_(options.self_check) {}

  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    std::optional<Block> block = allocator_.malloc(size, stream);
    check();
    return block;
  }
  void free_requested(const Block& block) override {
    allocator_.free_requested(block);
    check();
  }
  void free_completed(const Block& block) override {
    allocator_.free_completed(block);
    check();
  }
  void free(const Block& block) override {
    allocator_.free(block);
    check();
  }
  void empty_cache() override {
    allocator_.empty_cache();
    check();
  }

  PolicyCounters counters() const override { return allocator_.counters(); }
  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    return allocator_.detailed_stats();
  }
  std::vector<SegmentView> segments() const override { return allocator_.segments(); }
  // Both pools keep PyTorch's per-stream rule (a request reuses only its stream's pBlocks and
  // small blocks): free pieces of another stream are stream-bound, the small pool's small_pool.
  FreeAnatomy free_anatomy(std::optional<StreamId> stream) const override {
    return classify_free_pieces(allocator_.segments(), stream);
  }
  std::string last_oom_message() const override { return allocator_.last_oom_message(); }
  std::vector<std::string> audit() const override {
    try {
      allocator_.audit();
    } catch (const std::logic_error& broken) {
      return {broken.what()};
    }
    return {};
  }
  std::vector<std::string> notes() const override {
    const gmlake::Options& o = allocator_.options();
    if (o.vmm_defragment) return {};
    return {
        "vmm_defragment:false: no stitching; frag_limit, reuse_limit, defrag_level, auto_gc and re_alloc "
        "have no effect"};
  }

 private:
  void check() const {
    if (self_check_) allocator_.audit();
  }

  gmlake::Allocator allocator_;
  bool self_check_;
};

const PolicyRegistration registration{PolicyInfo{
    "gmlake",
    "GMLake (ASPLOS'24): PyTorch's caching allocator on CUDA VMM, stitching free pBlocks into virtual sBlocks",
    "intelligent-machine-learning/glake GMLake/src/CUDACachingAllocator.cpp (PyTorch 2.0 patch): "
    "2 MiB rounding of large requests, pBlock segments of mapped pages split/merged as PyTorch's large "
    "pool, stitching of the largest free pBlocks (requests >= frag_limit, at the defrag_level rung), cached "
    "sBlocks reused within reuse_limit and skipped while another block uses their pages, GC of cached "
    "sBlocks past auto_gc and at empty_cache, one flush + retry before OOM; small requests in PyTorch 2.0's "
    "small pool. Simplified: one map/alias call per contiguous piece (not per 2 MiB page); no reaction to "
    "VA/mapping-count failures; re_alloc only for stitchable requests; PYTORCH_CUDA_ALLOC_CONF knobs and "
    "memory fractions not modelled.",
    {
        {"vmm_defragment", "true", "false: no VMM and no stitching (PyTorch's allocator with GMLake's 2 MiB rounding)"},
        {"frag_limit", "512", "stitch only requests of at least this many MiB (fragLimit)"},
        {"reuse_limit", "10", "reuse a cached sBlock only if its size <= request x this (reuseLimit)"},
        {"defrag_level", "0",
         "0: stitch before allocating new memory; 1: only after a new allocation failed; 2: only after the "
         "cache flush failed (defragLevel)"},
        {"auto_gc", "1000",
         "GiB of sBlocks (created, not collected) above which cached sBlocks are torn down (autoGC)"},
        {"re_alloc", "false", "allocate only the shortfall of the free pBlocks and stitch it in (reAlloc)"},
        {"self_check", "false", "audit the policy's own invariants after every call (slow; for tests)"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<GmlakePolicy>(parse_options(options), device);
    }}};

}  // namespace
}  // namespace fraglab
