// Model drivers: the forward and backward of one micro-batch as the HF model and autograd run it
// (wm §6): inputs, embeddings, blocks (checkpointed when recomputation is on), head and loss, the
// backward in reverse, with the framework's unit hooks around every wrapped unit. One driver per
// model shape: decoder-only (GPT2, Llama) and encoder-decoder (T5).
//
// Lifetimes the drivers own (wm §2.1, §2.6): a block's input lives until that block's backward is
// done (the checkpoint holds it); a stack's position biases and extended masks until its block
// 0's backward (every checkpointed block holds them); the T5 encoder output until the last
// decoder block's backward; logits until the outputs are dropped (before backward, or with
// retain_logits until the next forward returns); the batch until the next batch replaces it.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "fraglab/workload.hpp"
#include "workload/framework.hpp"
#include "workload/layer_exec.hpp"
#include "workload/sequence_lengths.hpp"
#include "workload/tables.hpp"

namespace fraglab::workload {

struct DriverContext {
  const WorkloadOptions& options;  // defaults resolved
  const ModelLayout& layout;
  FrameworkModel& framework;
  TraceBuilder& tb;
};

class ModelDriver {
 public:
  virtual ~ModelDriver() = default;
  virtual void forward(const StepShape& shape) = 0;
  virtual void backward() = 0;
  // One evaluation batch (HF Trainer prediction_step with prediction_loss_only): model.eval() and
  // torch.no_grad(), so no block is checkpointed and nothing is saved for a backward; each tensor
  // dies after its last forward use, block inputs as soon as the next block has run; the loop
  // keeps only the loss, dropped after the batch. The training batch stays referenced by the
  // training loop; the evaluation batches are a DataLoader of their own.
  virtual void eval_forward(const StepShape& shape) = 0;
  // End of the evaluation loop: its last batch is let go.
  virtual void end_eval() = 0;
  // After the step's loss.item(): the loop lets go of the loss.
  virtual void end_step() = 0;
  // End of the run: the last batch and anything retained.
  virtual void finish() = 0;
};

std::unique_ptr<ModelDriver> make_decoder_only_driver(const DriverContext& ctx);
std::unique_ptr<ModelDriver> make_t5_driver(const DriverContext& ctx);

// Shared pieces.
TableConfig table_config(const WorkloadOptions& options);

// The batch a DataLoader hands over: tensors moved to the GPU, freed when the next batch replaces
// them (after the new one exists).
class Batch {
 public:
  void replace(TraceBuilder& tb, std::initializer_list<Bytes> sizes);
  void release(TraceBuilder& tb);
  Act& operator[](std::size_t i) { return tensors_[i]; }

 private:
  std::vector<Act> tensors_;
};

// Outputs the training loop holds: the loss until .item(), the logits per retain_logits.
class LoopOutputs {
 public:
  explicit LoopOutputs(bool retain_logits) : retain_(retain_logits) {}
  Act& loss() { return loss_; }
  Act& logits() { return logits_; }
  void begin_forward(TraceBuilder& tb);                  // a new micro-batch: the previous loss is rebound
  void forward_returned(TraceBuilder& tb);               // the model's forward has returned its outputs
  void seed_backward(TraceBuilder& tb, GradPool& pool);  // loss.backward(): d(loss) = 1
  void end_step(TraceBuilder& tb);
  void finish(TraceBuilder& tb);

 private:
  bool retain_;
  Act loss_, logits_;
  TensorId retained_ = 0;
};

}  // namespace fraglab::workload
