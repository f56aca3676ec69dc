// PlacementManager: see placement.hpp for the rules and where each comes from.
#include "gemini/placement.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fraglab::gemini {

std::uint64_t host_chunk_count(const std::vector<Bytes>& sizes, Bytes chunk_size, double fraction) {
  // The chunks Gemini's packing opens (ChunkManager.register_tensor: a tensor that does not fit
  // the open chunk opens a new one, of max(chunk size, tensor size)).
  std::vector<Bytes> chunks;
  Bytes room = 0;
  for (const Bytes size : sizes) {
    if (chunks.empty() || size > room) {
      chunks.push_back(std::max(chunk_size, size));
      room = chunks.back();
    }
    room -= size;
  }
  Bytes total = 0;
  for (const Bytes c : chunks) total += c;
  // StaticPlacementPolicy.setup_grads_device: a chunk goes to the CPU while the bytes offloaded
  // before it are below offload_optim_frac × the total.
  const double target = static_cast<double>(total) * fraction;
  std::uint64_t count = 0;
  Bytes offloaded = 0;
  for (const Bytes c : chunks) {
    if (static_cast<double>(offloaded) >= target) break;
    offloaded += c;
    ++count;
  }
  return count;
}

Bytes PlacementManager::non_model_now() const {
  const Bytes reserved = device_.reserved();
  const Bytes chunks = store_.bytes_on_device();
  return reserved > chunks ? reserved - chunks : 0;
}

void PlacementManager::sample() { period_peak_ = std::max(period_peak_, non_model_now()); }

Bytes PlacementManager::expected_non_model(std::uint64_t op) const {
  if (non_model_peak_.empty()) return 0;
  return non_model_peak_[op % non_model_peak_.size()];
}

bool PlacementManager::is_offloaded_opt(std::uint32_t index) const {
  return index < offloaded_opt_.size() && offloaded_opt_[index] != 0;
}

void PlacementManager::evict_offloaded_opt_chunks(std::uint32_t keep) {
  for (const std::uint32_t index : store_.movable(keep)) {
    if (is_offloaded_opt(index)) store_.evict(index);
  }
}

bool PlacementManager::before_pack(TagClass cls, Bytes size) {
  sample();
  if (steps_ == 1) {
    // Warm-up: the op's period starts; the previous op's period ends here.
    if (!compute_list_.empty()) non_model_peak_.push_back(period_peak_);
    compute_list_.push_back(ChunkStore::kNewChunk);
  }
  period_peak_ = non_model_now();
  const std::uint64_t op = op_++;
  if (!options_.may_offload()) return true;
  // An offloaded optimizer chunk that this tensor closes moves to the host now.
  const std::uint32_t open = store_.open_chunk(cls);
  if (open != ChunkStore::kNewChunk && store_.target(cls, size) != open && is_offloaded_opt(open)) {
    const std::vector<std::uint32_t> movable = store_.movable(ChunkStore::kNewChunk);
    if (std::find(movable.begin(), movable.end(), open) != movable.end()) store_.evict(open);
  }
  if (options_.placement != Placement::Auto) return true;

  // AutoPlacementPolicy.evict_tensors.
  const bool in_warmup = warmup();
  double capacity = static_cast<double>(device_.capacity());
  double non_model = 0;
  if (in_warmup) {
    non_model = capacity * options_.warmup_non_model_data_ratio;
  } else {
    non_model = static_cast<double>(expected_non_model(op));
    capacity *= options_.steady_cuda_cap_ratio;
  }
  const double total_model = capacity - non_model;
  const auto avail = [&] { return total_model - static_cast<double>(store_.bytes_on_device()); };
  auto demand = static_cast<double>(store_.demand(cls, size));
  if (avail() >= demand) return true;
  // Ours: cached chunks hold no data to move; they go first. (Empty open chunks stay: they are
  // the chunks the next tensors of their class go to, as in the compute list.)
  store_.release_empty_chunks(/*open_too=*/false);
  demand = static_cast<double>(store_.demand(cls, size));
  if (avail() >= demand) return true;
  const double to_free = demand - avail();
  std::vector<std::uint32_t> candidates = store_.movable(store_.target(cls, size));
  if (!in_warmup) {
    // _sort_can_evict_chunks: the next op of each chunk after this one in the compute list
    // (none: the list's length), furthest first; a stable sort keeps address order on ties.
    std::vector<std::pair<std::uint64_t, std::uint32_t>> keyed;
    keyed.reserve(candidates.size());
    const std::uint64_t n = compute_list_.size();
    for (const std::uint32_t c : candidates) {
      std::uint64_t next = n;
      for (std::uint64_t i = op + 1; i < n; ++i) {
        if (compute_list_[i] == c) {
          next = i;
          break;
        }
      }
      keyed.emplace_back(next, c);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; i < keyed.size(); ++i) candidates[i] = keyed[i].second;
  }
  double freed = 0;
  for (const std::uint32_t c : candidates) {
    if (freed >= to_free) break;
    freed += static_cast<double>(store_.size_of(c));
    store_.evict(c);
  }
  ++evict_calls_;
  if (freed < to_free) {
    ++layout_failures_;
    failure_ = fmt::format(
        "gemini: adjust layout failed, not enough device memory for a {}-byte {} tensor (ColossalAI: \"Adjust "
        "layout failed! No enough CUDA memory! Need {:.0f}, freed {:.0f}\"): model data may use {:.0f} of {} "
        "bytes{}",
        size, tag_class_name(cls), to_free, freed, total_model, device_.capacity(),
        in_warmup ? " in the warm-up step" : "");
    return false;
  }
  return true;
}

void PlacementManager::after_pack(TagClass cls, const Block& block) {
  const auto index = static_cast<std::uint32_t>(block.cookie >> 32);
  if (steps_ == 1 && !compute_list_.empty()) compute_list_.back() = index;
  if (!options_.may_offload()) return;
  if (offloaded_opt_.size() <= index) offloaded_opt_.resize(index + 1, 0);
  // A chunk opened by this pack: its first tensor sits at its start.
  if (store_.open_chunk(cls) == index && (block.cookie & 0xffffffffu) == 0) {
    const bool host = cls == TagClass::Opt &&
                      (options_.placement == Placement::Auto || store_.opened(TagClass::Opt) <= host_opt_chunks_);
    offloaded_opt_[index] = host ? 1 : 0;
  }
}

void PlacementManager::mark(std::string_view label) {
  if (options_.may_offload()) evict_offloaded_opt_chunks(ChunkStore::kNewChunk);
  if (label != "step") return;
  if (steps_ == 1 && !compute_list_.empty()) non_model_peak_.push_back(period_peak_);  // the last op's period
  ++steps_;
  op_ = 0;
  period_peak_ = non_model_now();
}

std::vector<std::pair<std::string, std::int64_t>> PlacementManager::stats() const {
  auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  if (!options_.may_offload()) return {};
  std::vector<std::pair<std::string, std::int64_t>> out{
      {"warmup_ops", i64(compute_list_.size())},
      {"evict_calls", i64(evict_calls_)},
      {"layout_failures", i64(layout_failures_)},
  };
  if (options_.placement == Placement::Static) out.emplace_back("offloaded_opt_chunks_planned", i64(host_opt_chunks_));
  Bytes peak = 0;
  for (const Bytes b : non_model_peak_) peak = std::max(peak, b);
  out.emplace_back("warmup_non_model_peak_bytes", i64(peak));
  return out;
}

std::vector<std::string> PlacementManager::notes() const {
  if (options_.placement == Placement::Static) {
    if (options_.offload_optim_frac == 0) return {};
    return {fmt::format("gemini: static placement, the first {} optimizer chunks on the host (offload_optim_frac {})",
                        host_opt_chunks_, options_.offload_optim_frac)};
  }
  return {fmt::format(
      "gemini: auto placement: optimizer chunks on the host; before each packed tensor, chunks moved to the host "
      "while model data exceeds capacity x {} - the warm-up's non-model peak of that op ({} warm-up ops recorded; "
      "warm-up: capacity x {} left to non-model data)",
      options_.steady_cuda_cap_ratio, compute_list_.size(), options_.warmup_non_model_data_ratio)};
}

}  // namespace fraglab::gemini
