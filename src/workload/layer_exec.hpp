// Runs one layer table (layer_table.hpp) forward and backward under the rules of wm §2.1:
//  - forward without recomputation: outputs allocated in op order; a tensor is freed after its
//    last forward use unless autograd saved it, then after the backward of its first saver;
//  - forward under activation checkpointing: the same allocations, but nothing is kept except the
//    caller's tensors (block input and output);
//  - backward under checkpointing: recompute first (non-reentrant stops after the last op that
//    saves something; reentrant replays everything and holds the recomputed outputs to the end),
//    keeping saved tensors; then the reverse walk;
//  - reverse walk, per op: allocate the inputs' gradients (accumulating into an existing buffer
//    in place: the new one is freed at once), the weights' gradients (the framework's hook), free
//    the consumed output gradients, then the tensors this op was the last to need.
#pragma once

#include <vector>

#include "fraglab/workload.hpp"
#include "workload/layer_table.hpp"
#include "workload/step_context.hpp"

namespace fraglab::workload {

class LayerRun {
 public:
  // `recompute` = how this layer is checkpointed (Recompute::None: it is not).
  LayerRun(const LayerTable& table, int unit, Recompute recompute);

  // Inputs and Outputs must be bound before forward(); the Act objects must outlive the run.
  void bind(int tensor, Act* act);
  void forward(StepContext& ctx);
  void backward(StepContext& ctx);

 private:
  void run_forward_op(StepContext& ctx, int k, Pass pass);
  void free_tensor(StepContext& ctx, int t);
  bool recomputing_keeps(int t) const;

  const LayerTable* table_;
  int unit_;
  Recompute recompute_;
  std::vector<TensorId> ids_;  // live storage per tensor (0 = none)
  std::vector<int> grads_;     // gradient buffer per tensor (-1 = none)
  std::vector<Act*> acts_;     // caller-owned tensors
};

}  // namespace fraglab::workload
