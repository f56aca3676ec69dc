#include "workload/layer_exec.hpp"

#include <stdexcept>

namespace fraglab::workload {

LayerRun::LayerRun(const LayerTable& table, int unit, Recompute recompute)
    : table_(&table),
      unit_(unit),
      recompute_(recompute),
      ids_(table.tensors.size(), 0),
      grads_(table.tensors.size(), -1),
      acts_(table.tensors.size(), nullptr) {}

void LayerRun::bind(int tensor, Act* act) { acts_[static_cast<std::size_t>(tensor)] = act; }

void LayerRun::free_tensor(StepContext& ctx, int t) {
  TensorId& id = ids_[static_cast<std::size_t>(t)];
  ctx.tb.free(id);
  id = 0;
}

void LayerRun::run_forward_op(StepContext& ctx, int k, Pass pass) {
  const OpDef& op = table_->ops[static_cast<std::size_t>(k)];
  const ModuleRef ref{unit_, op.module};
  if (op.module >= 0) ctx.hooks.module_begin(ref, pass);
  for (int t : op.out) {
    const TensorDef& d = table_->tensors[static_cast<std::size_t>(t)];
    if (d.view_of >= 0) continue;
    const TensorId id = ctx.tb.alloc(d.size, Stream::Default, Tag::Act);
    if (d.kind == TensorKind::Output && pass == Pass::Forward) {
      Act* act = acts_[static_cast<std::size_t>(t)];
      act->id = id;
      act->size = d.size;
    } else {
      ids_[static_cast<std::size_t>(t)] = id;
    }
  }
  std::vector<TensorId> temps;
  for (Bytes b : op.fwd_temps) temps.push_back(ctx.tb.alloc(b, Stream::Default, Tag::Temp));
  ctx.tb.gpu().launch(Stream::Default, op.fwd_us);
  for (TensorId id : temps) ctx.tb.free(id);
  if (op.module >= 0) ctx.hooks.module_end(ref, pass);
}

// During recomputation a tensor outlives its forward use when autograd saved it, and (reentrant
// checkpoint) when it is a recomputed block output: the inner backward starts from it.
bool LayerRun::recomputing_keeps(int t) const {
  const TensorDef& d = table_->tensors[static_cast<std::size_t>(t)];
  if (d.first_saver >= 0) return true;
  return d.kind == TensorKind::Output && recompute_ == Recompute::Reentrant;
}

void LayerRun::forward(StepContext& ctx) {
  for (std::size_t t = 0; t < acts_.size(); ++t) {
    const TensorKind kind = table_->tensors[t].kind;
    if (kind != TensorKind::Internal && acts_[t] == nullptr)
      throw std::logic_error("layer table " + table_->name + ": tensor " + table_->tensors[t].name + " is not bound");
  }
  const bool checkpointed = recompute_ != Recompute::None;
  for (std::size_t k = 0; k < table_->ops.size(); ++k) {
    run_forward_op(ctx, static_cast<int>(k), Pass::Forward);
    for (int t : table_->dies_after[k]) {
      const TensorDef& d = table_->tensors[static_cast<std::size_t>(t)];
      if (d.kind == TensorKind::Output) continue;  // the caller's now
      if (checkpointed || d.first_saver < 0) free_tensor(ctx, t);
    }
  }
}

void LayerRun::backward(StepContext& ctx) {
  const auto& tensors = table_->tensors;
  const auto& ops = table_->ops;
  if (recompute_ != Recompute::None) {
    const int last = recompute_ == Recompute::Reentrant ? static_cast<int>(ops.size()) - 1 : table_->last_saving_op;
    for (int k = 0; k <= last; ++k) {
      run_forward_op(ctx, k, Pass::Recompute);
      for (int t : table_->dies_after[static_cast<std::size_t>(k)])
        if (!recomputing_keeps(t)) free_tensor(ctx, t);
    }
    // A non-reentrant recomputation stops early: its locals that nothing saved die with it.
    for (std::size_t t = 0; t < ids_.size(); ++t)
      if (ids_[t] != 0 && !recomputing_keeps(static_cast<int>(t))) free_tensor(ctx, static_cast<int>(t));
  }
  // Gradients arriving from outside: block outputs' incoming gradient, accumulated Input buffers.
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].kind == TensorKind::Internal) continue;
    grads_[t] = acts_[t]->grad;
    if (tensors[t].kind == TensorKind::Output) acts_[t]->grad = -1;  // consumed here
  }
  GradPool& pool = ctx.grads;
  for (int k = static_cast<int>(ops.size()) - 1; k >= 0; --k) {
    const OpDef& op = ops[static_cast<std::size_t>(k)];
    bool has_grad = false;
    for (int t : op.out) has_grad = has_grad || grads_[static_cast<std::size_t>(t)] >= 0;
    if (has_grad) {
      const ModuleRef ref{unit_, op.module};
      if (op.module >= 0) ctx.hooks.module_begin(ref, Pass::Backward);
      std::vector<TensorId> temps;
      for (Bytes b : op.bwd_temps) temps.push_back(ctx.tb.alloc(b, Stream::Default, Tag::Temp));
      for (std::size_t i = 0; i < op.in.size(); ++i) {
        const int x = op.in[i];
        const TensorDef& d = tensors[static_cast<std::size_t>(x)];
        if (!d.requires_grad) continue;
        int& gx = grads_[static_cast<std::size_t>(x)];
        if (op.grad == GradRule::Alias) {
          const int src = grads_[static_cast<std::size_t>(op.out[std::min(i, op.out.size() - 1)])];
          if (src < 0 || gx >= 0) continue;  // nothing flows, or accumulated in place
          gx = src;
          pool.ref(src);
        } else {
          const TensorId g = ctx.tb.alloc(d.size, Stream::Default, Tag::Act);
          if (gx < 0)
            gx = pool.adopt(g);
          else
            ctx.tb.free(g);  // added in place into the existing buffer
        }
      }
      if (op.module >= 0) ctx.hooks.weight_grads(ref);
      ctx.tb.gpu().launch(Stream::Default, op.bwd_us);
      for (TensorId id : temps) ctx.tb.free(id);
      if (op.module >= 0) ctx.hooks.module_end(ref, Pass::Backward);
    }
    for (int t : op.out) {
      int& g = grads_[static_cast<std::size_t>(t)];
      pool.unref(g);
      g = -1;
    }
    for (int t : table_->released_by[static_cast<std::size_t>(k)]) free_tensor(ctx, t);
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (ids_[t] != 0) free_tensor(ctx, static_cast<int>(t));  // e.g. reentrant recomputed outputs
    if (tensors[t].kind == TensorKind::Input) {
      acts_[t]->grad = grads_[t];
    } else if (grads_[t] >= 0) {
      pool.unref(grads_[t]);  // a gradient nobody consumed (an op whose backward was skipped)
    }
    grads_[t] = -1;
  }
}

}  // namespace fraglab::workload
