// The pytorch policy's SettingCoverage (fraglab/policy.hpp): after a replay that recorded its
// decision bounds (decision_bounds.hpp), the settings that would have made every decision the same.
//
// A setting is covered when
//  - every option that is not recorded at a comparison site is the same: version,
//    expandable_segments, the memory fraction (allowed_, §5.6), max_non_split_rounding (§3.2
//    step 4's slack), large_segment_size (§1.5, §7); a new Config field must be added here;
//  - its max_split_size lies in the recorded interval;
//  - its GC threshold in bytes lies in the recorded interval, or it has no GC and no collection
//    of the replay passed its trigger; without a memory fraction GC never runs (§3.3), so any
//    threshold is covered;
//  - it rounds every requested size the replay saw as the replay did (§1.2); when the start state
//    used the rules themselves (§12.2), only the same rules.
#include <algorithm>
#include <functional>
#include <memory>

#include "fraglab/policy.hpp"
#include "pytorch/caching_allocator.hpp"
#include "pytorch/coverage.hpp"
#include "pytorch/rounding.hpp"

namespace fraglab::cca {
namespace {

class PytorchCandidate final : public SettingCoverage::Candidate {
 public:
  explicit PytorchCandidate(Config c) : config(std::move(c)) {}
  Config config;
};

bool same_rules(const RoundingRules& a, const RoundingRules& b) {
  return a.version == b.version && a.divisions == b.divisions && a.bypass_threshold == b.bypass_threshold;
}

class PytorchCoverage final : public SettingCoverage {
 public:
  explicit PytorchCoverage(const CachingAllocator& allocator) : config_(allocator.config()) {
    const DecisionBounds& b = allocator.decision_bounds();
    ms_above_ = b.ms_above;
    ms_at_most_ = b.ms_at_most;
    gc_min_ = b.gc_min;
    gc_max_ = b.gc_max;
    gc_acted_ = b.gc_acted;
    rounding_pinned_ = b.rounding_pinned;
    allowed_ = allocator.allowed_memory_maximum();
    std::vector<Bytes> sizes = b.sizes;
    // Large sizes first: where two rules differ, they differ on large requests, so a rule that
    // is not equivalent is usually refused after a few sizes.
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    rounded_.reserve(sizes.size());
    for (Bytes s : sizes) rounded_.emplace_back(s, round_size(s, config_.rounding));
  }

  std::unique_ptr<Candidate> candidate(std::string_view spec) const override {
    if (policy_name(spec) != "pytorch") return nullptr;
    const std::string_view options = spec.size() > 7 ? spec.substr(8) : std::string_view{};
    try {
      return std::make_unique<PytorchCandidate>(parse_config(options));
    } catch (const InputError&) {
      return nullptr;  // its replay reports the bad option
    }
  }

  bool covers(const Candidate& candidate) const override {
    const auto* c = dynamic_cast<const PytorchCandidate*>(&candidate);
    if (c == nullptr) return false;
    const Config& o = c->config;
    return same_unrecorded(o) && ms_above_ < o.max_split_size && o.max_split_size <= ms_at_most_ && gc_covers(o) &&
           rounding_covers(o.rounding);
  }

 private:
  bool same_unrecorded(const Config& o) const {
    return o.version == config_.version && o.expandable_segments == config_.expandable_segments &&
           o.memory_fraction == config_.memory_fraction && o.max_non_split_rounding == config_.max_non_split_rounding &&
           o.large_segment_size == config_.large_segment_size;
  }

  // The same expression as garbage_collect_cached_blocks() and gc_enabled() (release.cpp, §3.3).
  bool gc_covers(const Config& o) const {
    if (!allowed_) return true;  // no memory fraction: GC never runs
    if (o.garbage_collection_threshold <= 0.0) return !gc_acted_;
    const Bytes t = static_cast<Bytes>(o.garbage_collection_threshold * static_cast<double>(*allowed_));
    return gc_min_ <= t && t <= gc_max_;
  }

  bool rounding_covers(const RoundingRules& rules) const {
    if (same_rules(rules, config_.rounding)) return true;
    if (rounding_pinned_) return false;
    return std::all_of(rounded_.begin(), rounded_.end(),
                       [&rules](const auto& entry) { return round_size(entry.first, rules) == entry.second; });
  }

  Config config_;
  Bytes ms_above_ = 0;
  Bytes ms_at_most_ = kUnlimited;
  Bytes gc_min_ = 0;
  Bytes gc_max_ = kUnlimited;
  bool gc_acted_ = false;
  bool rounding_pinned_ = false;
  std::optional<Bytes> allowed_;
  std::vector<std::pair<Bytes, Bytes>> rounded_;  // (requested size, its rounded size), largest first
};

}  // namespace

std::unique_ptr<SettingCoverage> make_coverage(const CachingAllocator& allocator) {
  if (!allocator.decision_bounds().recording) return nullptr;  // sizes were not kept: cannot tell
  return std::make_unique<PytorchCoverage>(allocator);
}

}  // namespace fraglab::cca
