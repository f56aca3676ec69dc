// gemini: a chunk-based manager after ColossalAI Gemini (anchors.md §1.4; hpcaitech/ColossalAI
// colossalai/zero/gemini: chunk/search_utils.py, chunk/manager.py, chunk/chunk.py). Tensors
// tagged `param`, `grad` and `opt` are packed, in allocation order, into fixed-size chunks (one
// device malloc each); every other request goes to an inner policy (default: pytorch).
//
// How it works:
//  - prepare() sees the whole trace. planned_requests() tells it the tag of every request (the
//    k-th allocate() call is request k), and the chunk size comes from Gemini's search
//    (chunk_search.hpp) over the parameter sizes of the first training step — or from
//    chunk_size_mb, which skips the search. A trace with no param/grad/opt tag is refused.
//  - Packing, closing, oversized tensors, recycling: chunk_store.hpp.
//  - The inner policy gets the trace without the chunk-packed requests in prepare(), the
//    initial state in adopt(), and every untagged request (and 0-byte tagged ones) after that.
//  - Out of memory: when the device refuses a chunk, the flush frees every chunk without live
//    tensors and empties the inner policy's cache (counted in num_alloc_retries), then one more
//    try. When the inner policy runs out of memory, the chunks without live tensors are freed
//    and the inner policy tries once more.
//  - empty_cache frees the chunks without live tensors and empties the inner policy's cache.
//
// Placement (placement.hpp/.cpp here, after colossalai/zero/gemini/placement_policy.py and
// gemini_mgr.py): where chunks live, device or host. `static` with offload_optim_frac 0 (GeminiPlugin's
// default) keeps every chunk on the device, as before; offloaded optimizer chunks and `auto`'s
// eviction move chunks to the host and back (host bytes moved: device_to_host_bytes +
// host_to_device_bytes, Policy::host_bytes_moved()).
//
// Simplified: no sharding of chunks across ranks (the trace already is what one rank allocates); the search works
// in bytes and skips the LCM-of-DP-degrees rounding; chunks of every class share one size in
// bytes; chunks whose tensors are all freed are recycled (Gemini's chunks live as long as the
// model, a trace's tagged tensors need not).
//
// Invariants: every block handed out is either a chunk tensor (store_->owns(addr)) or the inner
// policy's block, never both (chunks and the inner policy's memory are separate device
// allocations); next_request_ counts the allocate() calls the replay made, initial ones included.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_set>

#include "fraglab/planned_requests.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/policy_kit.hpp"
#include "fraglab/seeded_hash.hpp"
#include "gemini/chunk_search.hpp"
#include "gemini/chunk_store.hpp"
#include "gemini/options.hpp"
#include "gemini/placement.hpp"

namespace fraglab::gemini {
namespace {

constexpr std::uint8_t kToInner = 0xff;  // request_class_ value of a request the inner policy serves

std::unique_ptr<Policy> create_inner(const std::string& spec, Device& device) {
  try {
    return create_policy(spec, device);
  } catch (const InputError& e) {
    throw InputError(fmt::format("gemini: inner: {}", e.what()));
  }
}

class GeminiPolicy final : public kit::DirectDefaults<GeminiPolicy> {
 public:
  GeminiPolicy(Options options, Device& device)
      : device_(device), options_(std::move(options)), inner_(create_inner(options_.inner, device)) {}

  void prepare(const Trace& trace) override {
    std::array<std::uint32_t, kTagClasses> tag_of{kNoString, kNoString, kNoString};
    for (std::uint32_t i = 0; i < trace.strings.size(); ++i) {
      for (std::size_t c = 0; c < kTagClasses; ++c) {
        if (trace.strings[i] == tag_class_name(static_cast<TagClass>(c))) tag_of[c] = i;
      }
    }
    const std::vector<PlannedRequest> requests = planned_requests(trace);
    request_class_.assign(requests.size(), kToInner);
    bool tagged = false;
    for (std::size_t k = 0; k < requests.size(); ++k) {
      for (std::size_t c = 0; c < kTagClasses; ++c) {
        if (requests[k].tag == kNoString || requests[k].tag != tag_of[c]) continue;
        tagged = true;
        if (requests[k].size > 0) request_class_[k] = static_cast<std::uint8_t>(c);
      }
    }
    if (!tagged) {
      throw InputError(fmt::format(
          "gemini: trace '{}' has no param/grad/opt tags; gemini packs tagged tensors into chunks (generate a "
          "tagged trace with fraglab gen)",
          trace.name));
    }
    Bytes chunk_size = 0;
    if (options_.chunk_size) {
      chunk_size = *options_.chunk_size;
    } else {
      parameters_ = parameter_sizes(trace, requests, tag_of[static_cast<std::size_t>(TagClass::Param)]);
      search_ = search_chunk_size(parameters_.sizes, options_.search);
      chunk_size = search_->chunk_size;
    }
    store_.emplace(device_, chunk_size, options_.placement.may_offload());
    // The default placement (static, nothing offloaded) never moves a chunk: no manager, so its
    // replay makes exactly the calls it made before placement was modelled.
    placement_.reset();
    if (options_.placement.may_offload()) placement_.emplace(options_.placement, device_, *store_);
    if (options_.placement.placement == Placement::Static && options_.placement.offload_optim_frac > 0) {
      const ParameterSizes opt = parameter_sizes(trace, requests, tag_of[static_cast<std::size_t>(TagClass::Opt)]);
      placement_->set_host_opt_chunks(host_chunk_count(opt.sizes, chunk_size, options_.placement.offload_optim_frac));
    }
    next_request_ = 0;
    build_inner_trace(trace);
    inner_->prepare(inner_trace_);
  }

  std::vector<std::optional<Block>> adopt(const InitialState& initial) override {
    next_request_ += initial.allocations.size();  // untagged: all of them are the inner policy's
    return inner_->adopt(initial);
  }
  std::vector<std::optional<Block>> allocate_initial(const InitialState& initial) override {
    next_request_ += initial.allocations.size();
    return inner_->allocate_initial(initial);
  }

  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    const std::size_t k = next_request_++;
    if (!store_ || k >= request_class_.size() || request_class_[k] == kToInner) return allocate_inner(size, stream);
    const auto cls = static_cast<TagClass>(request_class_[k]);
    if (placement_ && !placement_->before_pack(cls, size)) {
      ++counters_.num_ooms;
      last_oom_from_inner_ = false;
      last_oom_ = placement_->failure();
      return std::nullopt;
    }
    std::optional<Block> block = store_->pack(cls, size, stream);
    if (!block) {
      ++counters_.num_alloc_retries;
      device_.synchronize();  // a flush waits for the device (README "Device time")
      store_->release_empty_chunks();
      inner_->empty_cache();
      block = store_->pack(cls, size, stream);
    }
    if (!block) {
      ++counters_.num_ooms;
      last_oom_from_inner_ = false;
      last_oom_ = fmt::format(
          "gemini: out of memory opening a {}-byte chunk for a {}-byte {} tensor (chunk size {}): {} of {} bytes "
          "reserved, {} of them in chunks",
          store_->new_chunk_bytes(size), size, tag_class_name(cls), store_->chunk_size(), device_.reserved(),
          device_.capacity(), store_->bytes_on_device());
    } else if (placement_) {
      placement_->after_pack(cls, *block);
    }
    return block;
  }

  void free_requested(const Block& block) override {
    if (!owned(block)) inner_->free_requested(block);  // a chunk tensor stays in use until completed
  }
  void free_completed(const Block& block) override {
    if (owned(block))
      store_->release(block);
    else
      inner_->free_completed(block);
  }
  void free(const Block& block) override {
    if (owned(block))
      store_->release(block);
    else
      inner_->free(block);
  }

  void empty_cache() override {
    if (store_) store_->release_empty_chunks();
    inner_->empty_cache();
  }

  void mark(std::string_view label, std::string_view value) override {
    if (placement_) placement_->mark(label);
    inner_->mark(label, value);
  }

  bool on_host(Addr addr) const override { return store_ && store_->on_host_at(addr); }
  Bytes held_on_host() const override { return store_ ? store_->tensor_bytes_on_host() : 0; }

  Bytes host_bytes_moved() const override { return store_ ? store_->to_host_bytes() + store_->to_device_bytes() : 0; }

  PolicyCounters counters() const override {
    const PolicyCounters inner = inner_->counters();
    return {counters_.num_alloc_retries + inner.num_alloc_retries,
            counters_.num_ooms + inner.num_ooms - inner_ooms_doubled_};
  }

  std::vector<std::string> audit() const override {
    kit::AuditLog log("gemini");
    if (store_) store_->audit(log);
    std::vector<std::string> problems = log.take();
    for (std::string& inner : inner_->audit()) problems.push_back("gemini inner: " + inner);
    return problems;
  }

  std::string last_oom_message() const override {
    return last_oom_from_inner_ ? inner_->last_oom_message() : last_oom_;
  }

  // Its detailed_stats() lists the inner policy's: nobody reads those either.
  void skip_detailed_stats() override { inner_->skip_detailed_stats(); }
  std::vector<std::pair<std::string, std::int64_t>> detailed_stats() const override {
    std::vector<std::pair<std::string, std::int64_t>> out;
    auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    if (search_) {
      out.emplace_back("search_candidates", i64(search_->candidates));
      out.emplace_back("search_param_tensors", i64(search_->tensors));
      out.emplace_back("search_window_param_requests", i64(parameters_.window_requests));
      out.emplace_back("search_filtered_tensors", i64(search_->filtered));
      out.emplace_back("search_param_bytes", i64(search_->parameter_bytes));
      out.emplace_back("search_waste_bytes", i64(search_->waste));
      out.emplace_back("search_waste_pct_x100", std::llround(search_->waste_percent() * 100));
      out.emplace_back("search_keep_gathered", search_->keep_gathered ? 1 : 0);
    }
    if (store_) {
      for (auto& stat : store_->stats()) out.push_back(std::move(stat));
    }
    if (placement_) {
      for (auto& stat : placement_->stats()) out.push_back(std::move(stat));
    }
    out.emplace_back("gemini_alloc_retries", i64(counters_.num_alloc_retries));
    out.emplace_back("gemini_ooms", i64(counters_.num_ooms));
    for (auto& [key, value] : inner_->detailed_stats()) out.emplace_back("inner." + key, value);
    return out;
  }

  std::vector<SegmentView> segments() const override {
    std::vector<SegmentView> out = store_ ? store_->segments() : std::vector<SegmentView>{};
    for (SegmentView& s : inner_->segments()) out.push_back(std::move(s));
    std::sort(out.begin(), out.end(), [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
    return out;
  }

  // The inner policy's own classification of its segments, plus the chunks' idle bytes: free space
  // in a chunk (or a cached chunk) is there for the tensors the plan puts in it, on any stream.
  FreeAnatomy free_anatomy(std::optional<StreamId> stream) const override {
    FreeAnatomy out = inner_->free_anatomy(stream);
    if (store_) {
      const FreeAnatomy chunks = classify_free_pieces(store_->segments());
      out.usable += chunks.usable;
      out.pieces += chunks.pieces;
    }
    return out;
  }

  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (search_) {
      out.push_back(fmt::format(
          "gemini: chunk size {} bytes, searched over {} {}param tensors of the first step ({} param requests in "
          "it), {} left out as extra large, {} candidates, {:.2f}% wasted{}",
          search_->chunk_size, search_->tensors, parameters_.resident_only ? "resident " : "",
          parameters_.window_requests, search_->filtered, search_->candidates, search_->waste_percent(),
          search_->keep_gathered ? " (all parameters fit one chunk below min_chunk_size_mb: kept gathered)" : ""));
    } else if (store_) {
      out.push_back(
          fmt::format("gemini: chunk size {} bytes, fixed by chunk_size_mb (no search)", store_->chunk_size()));
    }
    if (!options_.placement_note.empty()) out.push_back(options_.placement_note);
    if (placement_) {
      for (std::string& note : placement_->notes()) out.push_back(std::move(note));
    }
    for (const std::string& note : inner_->notes()) out.push_back("inner: " + note);
    return out;
  }

 private:
  bool owned(const Block& block) const { return store_ && store_->owns(block.addr); }

  std::optional<Block> allocate_inner(Bytes size, StreamId stream) {
    std::optional<Block> block = allocate_inner_once(size, stream);
    if (block && placement_) placement_->sample();
    return block;
  }
  std::optional<Block> allocate_inner_once(Bytes size, StreamId stream) {
    std::optional<Block> block = inner_->allocate(size, stream);
    if (!block && store_ && store_->release_empty_chunks() > 0) {
      // The inner policy flushed its own cache already; what gemini caches may be enough. The
      // inner policy counts one out-of-memory result more than the replay sees, either way.
      ++counters_.num_alloc_retries;
      device_.synchronize();  // a flush waits for the device (README "Device time")
      ++inner_ooms_doubled_;
      block = inner_->allocate(size, stream);
    }
    if (!block) last_oom_from_inner_ = true;
    return block;
  }

  // The trace as the inner policy sees it: the chunk-packed requests and their frees left out,
  // so its k-th allocate() call is again its k-th planned request.
  void build_inner_trace(const Trace& trace) {
    inner_trace_ = Trace{};
    inner_trace_.name = trace.name;
    inner_trace_.source = trace.source;
    inner_trace_.allocator_conf = trace.allocator_conf;
    inner_trace_.allocator_conf_known = trace.allocator_conf_known;
    inner_trace_.strings = trace.strings;
    inner_trace_.initial = trace.initial;
    inner_trace_.events.reserve(trace.events.size());
    std::unordered_set<AllocId, SeededHash> packed;  // ids of live chunk-packed allocations (membership only)
    std::size_t k = trace.initial.allocations.size();
    for (const Event& e : trace.events) {
      if (e.op == Op::Alloc) {
        if (request_class_[k++] != kToInner) {
          packed.insert(e.id);
          continue;
        }
      } else if (e.op == Op::Free || e.op == Op::FreeCompleted) {
        if (packed.erase(e.id) > 0) continue;
      } else if (e.op == Op::FreeRequested) {
        if (packed.count(e.id) > 0) continue;
      }
      inner_trace_.events.push_back(e);
    }
  }

  Device& device_;
  const Options options_;
  std::unique_ptr<Policy> inner_;
  Trace inner_trace_;                        // kept: the inner policy may hold on to what prepare() gave it
  std::vector<std::uint8_t> request_class_;  // per planned request: a TagClass, or kToInner
  std::size_t next_request_ = 0;
  std::optional<ChunkStore> store_;
  std::optional<PlacementManager> placement_;  // refers to store_
  ParameterSizes parameters_;
  std::optional<SearchResult> search_;
  PolicyCounters counters_;               // gemini's own flushes and out-of-memory results
  std::uint64_t inner_ooms_doubled_ = 0;  // inner out-of-memory results followed by a gemini retry
  bool last_oom_from_inner_ = false;
  std::string last_oom_;
};

const PolicyRegistration registration{PolicyInfo{
    "gemini",
    "ColossalAI Gemini's chunk manager: param/grad/opt tensors packed into fixed-size chunks, the rest to an inner "
    "policy",
    "After hpcaitech/ColossalAI colossalai/zero/gemini: chunk size from search_chunk_configuration "
    "(least unused bytes over the first step's resident param tensors, mean+3σ filter, min chunk size, search range "
    "and interval), tensors appended in allocation order to the open chunk of their tag class, a tensor that does "
    "not fit closes it, a larger-than-chunk tensor gets a chunk of its own size. Needs a tagged trace (fraglab gen). "
    "Placement (placement_policy.py, gemini_mgr.py): static keeps chunks on the device except the offloaded "
    "optimizer chunks (offload_optim_frac); auto keeps optimizer chunks on the host and, before each packed tensor, "
    "moves chunks to the host (furthest next use in the warm-up step first) while model data exceeds capacity x "
    "steady_cuda_cap_ratio minus the warm-up's non-model peak of that op. "
    "Simplified: bytes instead of elements (defaults doubled, as for fp16 params), no LCM rounding, one chunk size "
    "for all classes, no sharding, an op is one packed tensor; ours: chunks whose tensors are all freed are "
    "recycled.",
    {
        {"inner", "pytorch",
         "policy for untagged requests; bracket a spec with options: [pytorch:expandable_segments:True]"},
        {"chunk_size_mb", "search", "fixed chunk size in MiB (skips the search)"},
        {"search_range_mb", "64", "search range above the smallest candidate (Gemini search_range_m, in MiB of bytes)"},
        {"search_interval", "2048",
         "step between candidate chunk sizes in bytes (Gemini hidden_dim, default 1024 elements)"},
        {"min_chunk_size_mb", "64", "smallest chunk; all params below it stay in one chunk (Gemini min_chunk_size_m)"},
        {"filter_exlarge_params", "True", "leave params above mean + 3 sigma out of the search"},
        {"placement", "static",
         "where chunks live: static (offload fractions) or auto (evict to the host by the warm-up's memory "
         "statistics); GeminiPlugin placement_policy"},
        {"shard_param_frac", "1.0", "static: only 1.0 is modelled (the trace fixes the sharding)"},
        {"offload_optim_frac", "0.0", "static: fraction of optimizer chunk bytes kept on the host"},
        {"offload_param_frac", "0.0",
         "static: ignored unless offload_optim_frac is 1.0 (as in ColossalAI); only 0 is modelled"},
        {"warmup_non_model_data_ratio", "0.8", "auto: share of device capacity left to non-model data in warm-up"},
        {"steady_cuda_cap_ratio", "0.9", "auto: share of device capacity Gemini plans with after the warm-up"},
    },
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      return std::make_unique<GeminiPolicy>(parse_options(options), device);
    },
    /*needs_tags=*/true}};

}  // namespace
}  // namespace fraglab::gemini
