// Dynamic padding (wm §6.1): example lengths are log-normal (median and sigma from the options),
// truncated at the maximum length like a tokenizer with truncation=True; the batch is padded to
// its longest example, optionally rounded up to pad_multiple (DataCollatorForSeq2Seq's
// pad_to_multiple_of).
#include "workload/sequence_lengths.hpp"

#include <algorithm>
#include <cmath>

#include "fraglab/rng.hpp"

namespace fraglab::workload {

namespace {

std::uint64_t sample_length(Rng& rng, double median, double sigma, std::uint64_t cap) {
  const double x = median * std::exp(sigma * rng.normal());
  const double clamped = std::clamp(std::ceil(x), 1.0, static_cast<double>(cap));
  return static_cast<std::uint64_t>(clamped);
}

}  // namespace

std::uint64_t SequenceLengths::padded(std::uint64_t longest) const {
  if (o_.padding != Padding::MultipleOf) return longest;
  // HF pads to the multiple even past the truncation length (150 → 152 with a multiple of 8).
  const std::uint64_t m = o_.pad_multiple;
  return (longest + m - 1) / m * m;
}

std::uint64_t SequenceLengths::batch_size(std::uint32_t step, std::uint32_t micro) const {
  if (o_.dataset_size == 0) return o_.micro_batch;
  // DistributedSampler(drop_last=False) pads the data set to a multiple of the world size:
  // ceil(N / W) examples per rank; DataLoader(drop_last=False) batches them, the last batch of the
  // epoch keeping the rest. Micro-batches run through the epochs back to back.
  const std::uint64_t per_rank = (o_.dataset_size + o_.world_size - 1) / o_.world_size;
  const std::uint64_t b = o_.micro_batch;
  const std::uint64_t batches = (per_rank + b - 1) / b;
  const std::uint64_t index = (static_cast<std::uint64_t>(step) - 1) * o_.grad_accum + micro;
  return index % batches == batches - 1 ? per_rank - (batches - 1) * b : b;
}

StepShape SequenceLengths::shape(std::uint32_t step, std::uint32_t micro) const {
  return sample(batch_size(step, micro), (static_cast<std::uint64_t>(step) << 20) | micro);
}

StepShape SequenceLengths::eval_shape(std::uint32_t step, std::uint32_t batch) const {
  const std::uint64_t b = o_.eval_micro_batch != 0 ? o_.eval_micro_batch : o_.micro_batch;
  // Bit 62 keeps evaluation examples apart from the training ones (step < 2^20, micro < 2^20).
  return sample(b, (std::uint64_t{1} << 62) | (static_cast<std::uint64_t>(step) << 20) | batch);
}

StepShape SequenceLengths::sample(std::uint64_t batch, std::uint64_t stream) const {
  StepShape s;
  s.batch = batch;
  const bool t5 = o_.model.encoder_decoder();
  const std::uint64_t cap = t5 ? o_.src_len : o_.seq_len;
  const std::uint64_t tgt_cap = t5 ? o_.tgt_len : 0;
  if (o_.padding == Padding::MaxLength) {
    s.len = cap;
    s.tgt_len = tgt_cap;
    return s;
  }
  Rng rng = Rng::derive(o_.seed, o_.rank, stream);
  std::uint64_t longest = 1, longest_tgt = 1;
  for (std::uint64_t i = 0; i < s.batch; ++i) {
    longest = std::max(longest, sample_length(rng, o_.len_median, o_.len_sigma, cap));
    if (t5) longest_tgt = std::max(longest_tgt, sample_length(rng, o_.tgt_len_median, o_.len_sigma, tgt_cap));
  }
  s.len = padded(longest);
  s.tgt_len = t5 ? padded(longest_tgt) : 0;
  return s;
}

}  // namespace fraglab::workload
