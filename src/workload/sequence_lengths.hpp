// Per-step sequence lengths (wm §6.1). Fixed-shape data (GPT2 group_texts blocks, the PyTorch FSDP
// T5 example's padding='max_length') gives the same shapes every step; a seq2seq collator with
// padding=True pads each batch to its longest example, so every activation size changes per step.
#pragma once

#include <cstdint>

#include "fraglab/workload.hpp"

namespace fraglab::workload {

struct StepShape {
  std::uint64_t batch = 0;
  std::uint64_t len = 0;      // decoder-only: s ; T5: encoder length s_e
  std::uint64_t tgt_len = 0;  // T5 decoder length s_d (0 for decoder-only)
};

class SequenceLengths {
 public:
  // `options` must have its defaults resolved (seq_len / src_len / tgt_len non-zero).
  explicit SequenceLengths(const WorkloadOptions& options) : o_(options) {}
  // Shape of micro-batch `micro` of step `step` (1-based) on this rank. Each (seed, rank, step,
  // micro) draws its own examples: ranks see different samples (a DistributedSampler), so the
  // rank to emit matters only under dynamic padding.
  StepShape shape(std::uint32_t step, std::uint32_t micro) const;
  // Examples in training micro-batch `micro` of step `step`: micro_batch, or with a finite
  // dataset_size the rest of the epoch for the last batch of each epoch.
  std::uint64_t batch_size(std::uint32_t step, std::uint32_t micro) const;
  // Shape of evaluation batch `batch` (0-based) of the evaluation after step `step`: its own
  // examples (a separate seed stream), eval_micro_batch of them.
  StepShape eval_shape(std::uint32_t step, std::uint32_t batch) const;

 private:
  std::uint64_t padded(std::uint64_t longest) const;
  StepShape sample(std::uint64_t batch, std::uint64_t stream) const;
  const WorkloadOptions& o_;
};

}  // namespace fraglab::workload
