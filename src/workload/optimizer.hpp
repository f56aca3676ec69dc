// The optimizer step over fp32 parameter tensors (wm §3.4, §4.1): lazy Adam state on the first
// step, then the implementation's temporaries.
//  - torch AdamW / Adam foreach (_multi_tensor_*): exp_avg, exp_avg_sq per parameter at step 1
//    (zeros_like, interleaved); every step _foreach_sqrt(exp_avg_sq) allocates one fp32 tensor per
//    parameter, freed when the step returns. Adam with (non-decoupled) L2 weight decay first makes
//    grads + wd·params (another full list), deleted before the sqrt.
//  - torch fused AdamW: same state plus a device step counter per parameter, no temporaries.
//  - DeepSpeed FusedAdam: same state (one tensor each per flat sub-group), no temporaries.
#pragma once

#include <vector>

#include "fraglab/workload.hpp"
#include "workload/trace_builder.hpp"

namespace fraglab::workload {

class AdamModel {
 public:
  // `numels`: the fp32 tensors the optimizer updates, in parameter order.
  AdamModel(OptimizerKind kind, std::vector<std::uint64_t> numels);
  void step(TraceBuilder& tb);
  void step_one(TraceBuilder& tb, std::size_t i);  // only tensor i (DeepSpeed: per sub-group)

 private:
  void init_state(TraceBuilder& tb, std::size_t i);
  OptimizerKind kind_;
  std::vector<std::uint64_t> numels_;
  std::vector<TensorId> exp_avg_, exp_avg_sq_, step_counter_;
  std::vector<bool> initialised_;
};

}  // namespace fraglab::workload
