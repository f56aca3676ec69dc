// PlacementManager: which chunks of the gemini policy live on the device and which on the host,
// after ColossalAI Gemini's placement policies (hpcaitech/ColossalAI colossalai/zero/gemini:
// placement_policy.py StaticPlacementPolicy / AutoPlacementPolicy, gemini_mgr.py GeminiManager,
// memory_tracer's ChunkMemStatsCollector, gemini_optimizer.py).
//
// The rules, each with where it comes from:
//  - An "op" is the packing of a tagged tensor into a chunk: the chunk is computed on, so it must
//    be on the device first (GeminiManager.adjust_layout before each op; its cuda_demand is
//    _get_layout_info's: the chunk's size when it is on the host or new, 0 on the device). Ours:
//    a trace shows only allocations, so an op is one packed tensor, not one module's forward.
//  - static (StaticPlacementPolicy.setup_grads_device): the first optimizer chunks, in the order
//    they are opened, are offloaded while the bytes offloaded so far are below offload_optim_frac
//    × all optimizer chunk bytes (chunk sizes as Gemini's packing gives them for the resident
//    `opt` tensors of the first step); no other chunk ever leaves the device (evict_tensors of
//    static offloads parameter chunks only with offload_param_frac, not modelled).
//  - auto: every optimizer chunk is offloaded (setup_grads_device puts the grads, and so
//    GeminiOptimizer the fp32 master data and Adam state, on the CPU; HybridAdam's
//    gpu_margin_mem_ratio defaults to 0.0). Before each op, AutoPlacementPolicy.evict_tensors:
//      capacity C = the device's capacity; during the warm-up step the non-model data is taken as
//      C × warmup_non_model_data_ratio; after it, as the peak non-model data the warm-up recorded
//      for the period of the op with this index, cycling over the warm-up's ops
//      (ChunkMemStatsCollector.next_period_non_model_data_usage: list[step_idx], step_idx + 1 modulo
//      the count), and C becomes C × steady_cuda_cap_ratio. avail = C − non-model − chunk bytes on the device;
//      when avail < demand, chunks are moved to the host until demand − avail bytes are freed:
//      during the warm-up in address order (ours: Gemini's chunk list order), after it the
//      chunk whose next use in the warm-up's compute order is furthest first
//      (_sort_can_evict_chunks; never used again = furthest). Fewer freed than needed: Gemini
//      raises "Adjust layout failed! No enough CUDA memory!", here an out-of-memory result.
//      Ours: empty cached chunks are given back before any chunk is evicted.
//  - An offloaded optimizer chunk is filled on the device and moved to the host when it closes
//    or at the next `mark` (the end of the phase that wrote it); a tensor appended to it later
//    brings it back first.
//  - Warm-up: the first training step (from the first `mark` step to the second; GeminiManager's
//    first iteration, _warmup). Non-model data = device reserved − chunk bytes on the device,
//    sampled after each untagged allocation; its peak per op period is recorded in the warm-up.
//    Steps after the warm-up count ops from 0 again (the compute list is one step's).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/device.hpp"
#include "gemini/chunk_store.hpp"
#include "gemini/options.hpp"

namespace fraglab::gemini {

// Static placement's offloaded optimizer chunks: how many of the chunks that packing `sizes` (in
// order, Gemini's rules) opens go to the host for `fraction` (setup_grads_device's loop).
std::uint64_t host_chunk_count(const std::vector<Bytes>& sizes, Bytes chunk_size, double fraction);

class PlacementManager {
 public:
  PlacementManager(const PlacementOptions& options, Device& device, ChunkStore& store)
      : options_(options), device_(device), store_(store) {}

  void set_host_opt_chunks(std::uint64_t count) { host_opt_chunks_ = count; }
  // Before a tensor is packed: moves chunks to the host as the placement requires. False when it
  // cannot make room (failure() says why).
  bool before_pack(TagClass cls, Bytes size);
  void after_pack(TagClass cls, const Block& block);
  void mark(std::string_view label);
  // Samples the non-model data (after an untagged allocation).
  void sample();

  const std::string& failure() const { return failure_; }
  std::vector<std::pair<std::string, std::int64_t>> stats() const;
  std::vector<std::string> notes() const;

 private:
  bool warmup() const { return steps_ < 2; }
  Bytes non_model_now() const;
  // The non-model data evict_tensors assumes for the op about to run.
  Bytes expected_non_model(std::uint64_t op) const;
  void evict_offloaded_opt_chunks(std::uint32_t keep);
  bool is_offloaded_opt(std::uint32_t index) const;

  const PlacementOptions options_;
  Device& device_;
  ChunkStore& store_;
  std::uint64_t host_opt_chunks_ = 0;        // static: the first this many optimizer chunks go to the host
  std::vector<std::uint8_t> offloaded_opt_;  // per chunk index: an optimizer chunk that lives on the host
  std::uint64_t steps_ = 0;                  // `step` marks seen
  std::uint64_t op_ = 0;                     // ops since the latest step mark
  std::vector<std::uint32_t> compute_list_;  // warm-up step: the chunk of each op
  std::vector<Bytes> non_model_peak_;        // warm-up step: peak non-model data of each op's period
  Bytes period_peak_ = 0;
  std::string failure_;
  std::uint64_t evict_calls_ = 0;  // evict_tensors calls that moved chunks
  std::uint64_t layout_failures_ = 0;
};

}  // namespace fraglab::gemini
