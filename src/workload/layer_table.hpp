// A layer as a table of operators (wm §2.1): every tensor an operator creates, which tensors
// autograd saves, and which module's parameters it uses. The generic rules of wm §2.1 then give
// the forward (with or without activation checkpointing), the recomputation and the backward
// (layer_exec.cpp); per-family builders (tables_*.cpp) only describe the operators.
//
// Tensor kinds:
//  - Input: owned by the caller (block input, position bias, encoder output, masks); never
//    allocated or freed here. Its gradient is accumulated into the caller's buffer.
//  - Output: allocated here, owned by the caller afterwards (the block output). Its incoming
//    gradient comes from the caller.
//  - Internal: allocated and freed here.
// A view (or an in-place result) shares its base's storage: it has no allocation of its own, and
// its base lives as long as any of its views is used or saved.
//
// Invariants after finalize(): every op's inputs are created by an earlier op or are Inputs;
// producer / last_fwd_use / first_saver are filled in; views point at a non-view base.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/types.hpp"

namespace fraglab::workload {

enum class TensorKind : std::uint8_t { Internal, Input, Output };

struct TensorDef {
  std::string name;
  Bytes size = 0;  // logical bytes; also the size of its gradient
  bool requires_grad = true;
  TensorKind kind = TensorKind::Internal;
  int view_of = -1;    // base tensor whose storage this one shares
  int scope_end = -1;  // a Python local keeps it alive in forward until this op has run
  // Filled by finalize():
  int producer = -1;      // op creating it (-1 for Inputs)
  int last_fwd_use = -1;  // last op reading it or any of its views (base tensors only)
  int first_saver = -1;   // lowest-index op saving it or a view: its backward runs last
};

// How an op's backward produces its inputs' gradients.
enum class GradRule : std::uint8_t {
  Alloc,  // a new buffer per differentiable input (the common case)
  Alias,  // inputs receive the output's gradient itself: additions, views, contiguous copies
};

struct OpDef {
  std::string name;
  std::vector<int> in;           // tensors read (the differentiable ones receive gradients)
  std::vector<int> out;          // tensors created
  std::vector<int> saves;        // tensors autograd keeps for this op's backward
  std::vector<Bytes> fwd_temps;  // allocated and freed inside the forward kernel(s)
  std::vector<Bytes> bwd_temps;  // allocated and freed inside the backward
  GradRule grad = GradRule::Alloc;
  int module = -1;    // leaf module whose parameters it uses (index in the unit), or -1
  double fwd_us = 0;  // GPU time of the forward; backward takes bwd_us
  double bwd_us = 0;
};

struct LayerTable {
  std::string name;
  std::vector<TensorDef> tensors;
  std::vector<OpDef> ops;
  int last_saving_op = -1;  // non-reentrant recomputation stops after it (wm §2.1)
  // Filled by finalize(), per op index: non-Input storage owners whose forward life ends there
  // (last use or end of Python scope), and those whose last saver's backward is that op.
  std::vector<std::vector<int>> dies_after;
  std::vector<std::vector<int>> released_by;

  // Storage-owning tensor behind t (t itself unless it is a view).
  int base(int t) const { return tensors[t].view_of < 0 ? t : tensors[t].view_of; }
  // Computes the derived fields; throws std::logic_error on a malformed table (a builder bug).
  void finalize();
  // Index of the tensor called `name`; throws std::logic_error if absent.
  int find(std::string_view tensor_name) const;
  // Bytes saved for backward when nothing is recomputed (Internal tensors only) — for tests.
  Bytes saved_bytes() const;
};

}  // namespace fraglab::workload
