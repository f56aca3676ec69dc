// What a sharded-data-parallel framework does around the model's own tensors (wm §3, §4): the
// persistent parameter / gradient / optimizer state, gathering parameters before use, reducing
// gradients after, and the optimizer step. The model drivers call these hooks at the points
// PyTorch / DeepSpeed run theirs; one implementation per framework (fsdp1.cpp, fsdp2.cpp,
// zero3.cpp, zero12.cpp).
//
// Call order per micro-batch: pre_forward(root) … pre_forward(u) / post_forward(u) per block …
// post_forward(root); pre_backward(root) … pre_backward(u) / post_backward(u) per block in
// reverse … post_backward(root); end_backward(). Per step: zero_grad() first, grad_sync() and
// optimizer_step() after the last micro-batch. Module hooks (step_context.hpp) fire inside.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fraglab/workload.hpp"
#include "workload/param_layout.hpp"
#include "workload/step_context.hpp"

namespace fraglab::workload {

class FrameworkModel : public ModuleHooks {
 public:
  virtual void init() = 0;  // wrap / engine-initialisation time
  virtual void begin_step(std::uint32_t step) { step_ = step; }
  virtual void zero_grad() = 0;
  virtual void pre_forward(int unit) = 0;
  virtual void post_forward(int unit) = 0;
  virtual void pre_backward(int unit) = 0;
  virtual void post_backward(int unit) = 0;
  // `last_micro`: the gradient-accumulation boundary (gradients are synchronised).
  virtual void end_backward(bool last_micro) = 0;
  virtual bool has_grad_sync() const { return false; }
  virtual void grad_sync() {}
  virtual void optimizer_step() = 0;
  // Evaluation between steps (forward only, no_grad): begin_eval() before the first batch,
  // end_eval_forward() after each batch's forward, end_eval() after the last. Only ZeRO-3 models
  // them (check_options refuses --eval-every elsewhere).
  virtual void begin_eval() {}
  virtual void end_eval_forward() {}
  virtual void end_eval() {}

 protected:
  std::uint32_t step_ = 0;
};

struct FrameworkContext {
  const WorkloadOptions& options;  // defaults resolved
  const ModelLayout& layout;
  TraceBuilder& tb;
};

std::unique_ptr<FrameworkModel> make_fsdp1(const FrameworkContext& ctx);
std::unique_ptr<FrameworkModel> make_fsdp2(const FrameworkContext& ctx);
std::unique_ptr<FrameworkModel> make_zero3(const FrameworkContext& ctx);
std::unique_ptr<FrameworkModel> make_zero12(const FrameworkContext& ctx);  // stage from options.framework
std::unique_ptr<FrameworkModel> make_framework(const FrameworkContext& ctx);

// Bytes per element of the parameter / compute dtype.
inline Bytes dtype_bytes(Precision p) { return p == Precision::Bf16 ? 2 : 4; }
inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// How many gradient contributions each parameter gets in one backward: one per forward use of a
// module holding it (tied weights get several). Autograd sums them in the parameter's input
// buffer and runs its AccumulateGrad — and the hooks DeepSpeed puts there — once, after the last.
class GradContributions {
 public:
  explicit GradContributions(const ModelLayout& layout);
  void reset();                   // start of a forward
  void forward_use(ModuleRef m);  // module m ran forward (not recomputation)
  // Module m's backward produced gradients; returns the params of m whose gradient is complete.
  std::vector<int> backward(ModuleRef m);

 private:
  const ModelLayout& layout_;
  std::vector<std::vector<int>> expected_;  // [unit][param]
  std::vector<std::vector<int>> received_;
};

}  // namespace fraglab::workload
