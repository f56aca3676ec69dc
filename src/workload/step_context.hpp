// What the layer executor and the model drivers share during one micro-batch: the event writer,
// the framework's module hooks, and the pool of activation-gradient buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "workload/trace_builder.hpp"

namespace fraglab::workload {

enum class Pass : std::uint8_t { Forward, Recompute, Backward };

struct ModuleRef {
  int unit = 0;
  int module = 0;
};

// Per-module framework behaviour (DeepSpeed ZeRO-3 gathers per leaf module, wm §4.1; autograd
// produces each weight's gradient when the module's backward runs, wm §2.1 "Weight grads").
class ModuleHooks {
 public:
  virtual ~ModuleHooks() = default;
  virtual void module_begin(ModuleRef /*m*/, Pass /*pass*/) {}
  virtual void module_end(ModuleRef /*m*/, Pass /*pass*/) {}
  // Autograd has just produced the gradients of m's parameters (full, unsharded shape).
  virtual void weight_grads(ModuleRef m) = 0;
};

// Activation gradients, reference-counted: an addition hands the same buffer to both of its
// inputs (wm §2.1: later gradients accumulate in place into the first buffer).
class GradPool {
 public:
  explicit GradPool(TraceBuilder& tb) : tb_(tb) {}
  int adopt(TensorId id) {
    bufs_.push_back({id, 1});
    return static_cast<int>(bufs_.size() - 1);
  }
  void ref(int b) { ++bufs_[static_cast<std::size_t>(b)].refs; }
  void unref(int b) {
    if (b < 0) return;
    Buf& buf = bufs_[static_cast<std::size_t>(b)];
    if (--buf.refs == 0) tb_.free(buf.id);
  }
  // New step: no buffer survives a backward pass.
  void clear() { bufs_.clear(); }

 private:
  struct Buf {
    TensorId id;
    int refs;
  };
  TraceBuilder& tb_;
  std::vector<Buf> bufs_;
};

// A tensor owned by a model driver and shared between layer tables (block inputs and outputs,
// position biases, the encoder output), with its gradient buffer (-1: none yet).
struct Act {
  TensorId id = 0;
  Bytes size = 0;
  int grad = -1;
};

struct StepContext {
  TraceBuilder& tb;
  ModuleHooks& hooks;
  GradPool& grads;
};

}  // namespace fraglab::workload
