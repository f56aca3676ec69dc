// PyTorch FSDP2 (fully_shard, per-parameter DTensor shards), wm §3.2. Each parameter is sharded on
// dim 0 and padded per parameter: shard numel = ceil(rows/N)·cols; a group's S = Σ shards.
//
// All-gather: on AG_COPY_IN the low-precision casts of each shard and the flat all_gather_output
// (N·S), foreach copy-in, casts freed; all-gather on AG; copy-out on DEFAULT into per-parameter
// unsharded tensors. The flat output is held until the *next* group's all-gather waits on the
// copy-out event, then freed without record_stream. Reshard frees the unsharded tensors on
// DEFAULT at once. Reduce: reduce_scatter_input (N·S, reduce dtype) on DEFAULT, chunk-cat, the
// per-parameter gradients freed; on RS the output (S) and its fp32 cast, which is the group's
// gradient until zero_grad. reduce_scatter_input lives until the next group's reduce waits on it.
#include "workload/framework.hpp"
#include "workload/optimizer.hpp"

namespace fraglab::workload {

namespace {

class Fsdp2 final : public FrameworkModel {
 public:
  explicit Fsdp2(const FrameworkContext& ctx)
      : o_(ctx.options),
        layout_(ctx.layout),
        tb_(ctx.tb),
        gpu_(ctx.tb.gpu()),
        n_(o_.world_size),
        mixed_(o_.precision == Precision::Bf16),
        pbytes_(dtype_bytes(o_.precision)),
        rbytes_(dtype_bytes(o_.reduce_dtype.value_or(o_.precision))),
        adam_(*o_.optimizer, shard_numels()) {
    for (const UnitDef& u : layout_.units) {
      Group g;
      for (const ParamDef& p : u.params) g.shards.push_back(shard_of(p));
      for (std::uint64_t s : g.shards) g.total += s;
      g.unsharded.assign(u.params.size(), 0);
      g.grads.assign(u.params.size(), 0);
      groups_.push_back(std::move(g));
    }
  }

  // fully_shard bottom-up: each parameter materialised on the GPU, its padded dim-0 chunk
  // copied out, the full tensor freed.
  void init() override {
    for (std::size_t k = 1; k <= groups_.size(); ++k) {
      const std::size_t u = k % groups_.size();
      const UnitDef& def = layout_.units[u];
      for (std::size_t p = 0; p < def.params.size(); ++p) {
        const TensorId full = tb_.alloc(4 * def.params[p].numel(), Stream::Default, Tag::Param);
        groups_[u].sharded.push_back(tb_.alloc(4 * groups_[u].shards[p], Stream::Default, Tag::Param));
        tb_.free(full);
      }
    }
  }

  void zero_grad() override {
    for (Group& g : groups_) {
      tb_.free(g.grad);
      g.grad = 0;
    }
  }

  void pre_forward(int unit) override {
    gpu_.hook();
    if (unit == 0) {
      gpu_.wait(Stream::AgCopyIn, Stream::Default);
      gpu_.wait(Stream::AllGather, Stream::Default);
    }
    ensure_unsharded(unit);
  }

  void post_forward(int unit) override {
    gpu_.hook();
    if (unit != 0) reshard(unit);  // the root stays gathered for backward
  }

  void pre_backward(int unit) override {
    gpu_.hook();
    ensure_unsharded(unit);
    // Implicit backward prefetch of the next group in reverse order (the root's is the last block).
    const int target = unit == 0 ? static_cast<int>(groups_.size()) - 1 : unit - 1;
    Group* t = target >= 1 ? &groups_[static_cast<std::size_t>(target)] : nullptr;
    if (t != nullptr && !t->is_unsharded && t->ag_output == 0) all_gather(target);
  }

  void weight_grads(ModuleRef m) override {
    Group& g = groups_[static_cast<std::size_t>(m.unit)];
    const UnitDef& def = layout_.units[static_cast<std::size_t>(m.unit)];
    for (int p : def.modules[static_cast<std::size_t>(m.module)].params) {
      TensorId& slot = g.grads[static_cast<std::size_t>(p)];
      const TensorId fresh =
          tb_.alloc(pbytes_ * def.params[static_cast<std::size_t>(p)].numel(), Stream::Default, Tag::Grad);
      if (slot == 0)
        slot = fresh;
      else
        tb_.free(fresh);  // tied weight: accumulated in place
    }
  }

  void post_backward(int unit) override {
    gpu_.hook();
    Group& g = groups_[static_cast<std::size_t>(unit)];
    reshard(unit);
    release_previous_reduce();
    const Bytes rs_bytes = rbytes_ * n_ * g.total;
    const TensorId rs_input = tb_.alloc(rs_bytes, Stream::Default, Tag::Comm);
    gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(rs_bytes)));
    for (TensorId& id : g.grads) {
      tb_.free(id);
      id = 0;
    }
    gpu_.wait(Stream::ReduceScatter, Stream::Default);
    TensorId out = tb_.alloc(rbytes_ * g.total, Stream::ReduceScatter, Tag::Grad);
    gpu_.launch(Stream::ReduceScatter, gpu_.collective_us(static_cast<double>(rs_bytes)));
    if (rbytes_ != 4) {
      const TensorId g32 = tb_.alloc(4 * g.total, Stream::ReduceScatter, Tag::Grad);
      gpu_.launch(Stream::ReduceScatter, gpu_.memory_us(6.0 * static_cast<double>(g.total)));
      tb_.free(out);
      out = g32;
    }
    if (g.grad != 0) {  // accumulate into the existing sharded gradient
      gpu_.launch(Stream::ReduceScatter, gpu_.memory_us(12.0 * static_cast<double>(g.total)));
      tb_.free(out);
    } else {
      g.grad = out;
    }
    pending_rs_input_ = rs_input;
    pending_rs_event_ = gpu_.tail(Stream::ReduceScatter);
  }

  void end_backward(bool /*last_micro*/) override {
    gpu_.wait(Stream::Default, Stream::ReduceScatter);
    release_previous_reduce();
    for (std::size_t u = 0; u < groups_.size(); ++u)
      if (groups_[u].is_unsharded) reshard(static_cast<int>(u));
  }

  void optimizer_step() override { adam_.step(tb_); }

 private:
  struct Group {
    std::vector<std::uint64_t> shards;
    std::uint64_t total = 0;
    std::vector<TensorId> sharded, unsharded, grads;
    TensorId ag_output = 0, grad = 0;
    double ag_event = 0;
    bool is_unsharded = false;
  };

  std::uint64_t shard_of(const ParamDef& p) const { return ceil_div(p.rows, n_) * p.cols; }

  std::vector<std::uint64_t> shard_numels() const {
    std::vector<std::uint64_t> v;
    for (const UnitDef& u : layout_.units)
      for (const ParamDef& p : u.params) v.push_back(shard_of(p));
    return v;
  }

  void all_gather(int unit) {
    Group& g = groups_[static_cast<std::size_t>(unit)];
    if (held_ag_ != 0) {  // the previous group's output: freed once its copy-out event is waited on
      gpu_.wait_until(Stream::AgCopyIn, held_ag_event_);
      gpu_.wait_until(Stream::AllGather, held_ag_event_);
      tb_.free(held_ag_);
      held_ag_ = 0;
    }
    std::vector<TensorId> casts;
    if (mixed_)
      for (std::uint64_t s : g.shards) casts.push_back(tb_.alloc(pbytes_ * s, Stream::AgCopyIn, Tag::Comm));
    const Bytes out = pbytes_ * n_ * g.total;
    g.ag_output = tb_.alloc(out, Stream::AgCopyIn, Tag::Comm);
    gpu_.launch(Stream::AgCopyIn, gpu_.memory_us(2.0 * static_cast<double>(pbytes_ * g.total)));
    for (TensorId id : casts) tb_.free(id);
    gpu_.wait(Stream::AllGather, Stream::AgCopyIn);
    gpu_.launch(Stream::AllGather, gpu_.collective_us(static_cast<double>(out)));
    g.ag_event = gpu_.tail(Stream::AllGather);
  }

  void ensure_unsharded(int unit) {
    Group& g = groups_[static_cast<std::size_t>(unit)];
    if (g.is_unsharded) return;
    if (g.ag_output == 0) all_gather(unit);
    // wait_for_unshard: copy-out into per-parameter unsharded tensors on DEFAULT.
    gpu_.wait_until(Stream::Default, g.ag_event);
    const UnitDef& def = layout_.units[static_cast<std::size_t>(unit)];
    for (std::size_t p = 0; p < def.params.size(); ++p)
      g.unsharded[p] = tb_.alloc(pbytes_ * def.params[p].numel(), Stream::Default, Tag::Param);
    gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(pbytes_ * n_ * g.total)));
    held_ag_ = g.ag_output;
    held_ag_event_ = gpu_.tail(Stream::Default);
    g.ag_output = 0;
    g.is_unsharded = true;
  }

  void reshard(int unit) {
    Group& g = groups_[static_cast<std::size_t>(unit)];
    if (!g.is_unsharded) return;
    for (TensorId& id : g.unsharded) {
      tb_.free(id);
      id = 0;
    }
    g.is_unsharded = false;
  }

  void release_previous_reduce() {
    if (pending_rs_input_ == 0) return;
    gpu_.wait_until(Stream::Default, pending_rs_event_);
    tb_.free(pending_rs_input_);
    pending_rs_input_ = 0;
  }

  const WorkloadOptions& o_;
  const ModelLayout& layout_;
  TraceBuilder& tb_;
  GpuTiming& gpu_;
  std::uint64_t n_;
  bool mixed_;
  Bytes pbytes_, rbytes_;
  AdamModel adam_;
  std::vector<Group> groups_;
  TensorId held_ag_ = 0;
  double held_ag_event_ = 0;
  TensorId pending_rs_input_ = 0;
  double pending_rs_event_ = 0;
};

}  // namespace

std::unique_ptr<FrameworkModel> make_fsdp2(const FrameworkContext& ctx) { return std::make_unique<Fsdp2>(ctx); }

}  // namespace fraglab::workload
