#include "workload/model_driver.hpp"

namespace fraglab::workload {

TableConfig table_config(const WorkloadOptions& o) {
  TableConfig c;
  c.e = dtype_bytes(o.precision);
  c.attention = o.attention;
  c.gelu = o.gelu;
  c.loss = o.loss;
  c.checkpointing = o.recompute != Recompute::None;
  return c;
}

void Batch::replace(TraceBuilder& tb, std::initializer_list<Bytes> sizes) {
  std::vector<Act> next;
  for (Bytes b : sizes) next.push_back(Act{tb.alloc(b, Stream::Default, Tag::Act), b, -1});
  release(tb);
  tensors_ = std::move(next);
}

void Batch::release(TraceBuilder& tb) {
  for (Act& a : tensors_) tb.free(a.id);
  tensors_.clear();
}

void LoopOutputs::begin_forward(TraceBuilder& tb) {
  tb.free(loss_.id);
  loss_ = Act{};
}

void LoopOutputs::forward_returned(TraceBuilder& tb) {
  // The previous step's outputs (retain_logits) die when `outputs` is rebound to the new ones.
  tb.free(retained_);
  retained_ = 0;
  if (retain_)
    retained_ = logits_.id;
  else
    tb.free(logits_.id);  // HF Trainer keeps only the loss
  logits_ = Act{};
}

void LoopOutputs::seed_backward(TraceBuilder& tb, GradPool& pool) {
  loss_.grad = pool.adopt(tb.alloc(4, Stream::Default, Tag::Act));
}

void LoopOutputs::end_step(TraceBuilder& tb) {
  tb.free(loss_.id);
  loss_ = Act{};
}

void LoopOutputs::finish(TraceBuilder& tb) {
  tb.free(retained_);
  retained_ = 0;
}

}  // namespace fraglab::workload
