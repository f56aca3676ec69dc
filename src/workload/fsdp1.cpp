// PyTorch FSDP1 (FullyShardedDataParallel with FlatParameters, use_orig_params=False), wm §3.1,
// §3.3-§3.5. One FlatParameter per unit; F = its numel; shard = ceil(F/N) (the last rank's shard
// is right-padded, so every rank allocates the same sizes); unsharded buffer N·shard.
//
// Streams: PRE_UNSHARD casts the fp32 shard to the low-precision `_mp_shard`, UNSHARD all-gathers
// into the padded unsharded buffer, POST_BWD reduce-scatters. Buffers allocated on one stream and
// used on another are freed after record_stream: `_mp_shard` (used by UNSHARD), the unsharded
// parameters (used by DEFAULT), the autograd flat gradient (used by POST_BWD). With
// limit_all_gathers each reshard records an event; an unshard with two such events queued first
// CPU-synchronises on the oldest (_max_num_inflight_all_gathers = 2).
//
// Gradient flattening happens in the reduce dtype (wm §3.5). With reduce dtype = param dtype
// (the default) `cat` is autograd's split-with-sizes backward: per-parameter gradients held until
// the unit's last one, then concatenated. With an fp32 reduce dtype under bf16 parameters, `cat`
// follows fairscale's fp32_reduce_scatter path (each gradient converted to fp32 and held, then
// torch.cat) rather than PyTorch's cast of the bf16 flat gradient on POST_BWD; `prealloc` is
// fairscale PR #1186: the flat gradient preallocated, each gradient added into its slice.
#include <deque>

#include "workload/framework.hpp"
#include "workload/optimizer.hpp"

namespace fraglab::workload {

namespace {

class Fsdp1 final : public FrameworkModel {
 public:
  explicit Fsdp1(const FrameworkContext& ctx)
      : o_(ctx.options),
        layout_(ctx.layout),
        tb_(ctx.tb),
        gpu_(ctx.tb.gpu()),
        n_(o_.world_size),
        sharded_(o_.sharding != ShardingStrategy::NoShard),
        mixed_(o_.precision == Precision::Bf16),
        pbytes_(dtype_bytes(o_.precision)),
        rbytes_(dtype_bytes(o_.reduce_dtype.value_or(o_.precision))),
        adam_(*o_.optimizer, shard_numels()) {
    for (const UnitDef& u : layout_.units) {
      Unit s;
      s.flat = u.numel();
      s.shard = sharded_ ? ceil_div(s.flat, n_) : s.flat;
      s.param_grads.assign(u.params.size(), 0);
      units_.push_back(std::move(s));
    }
  }

  // Wrapping with device_id (wm §3.1): each unit's parameters are moved to the GPU, flattened
  // (torch.cat) and sharded (the shard is a clone; the full flat parameter is freed). Children
  // are wrapped before the root.
  void init() override {
    for (std::size_t k = 1; k <= units_.size(); ++k) {
      const std::size_t u = k % units_.size();  // blocks 1..n-1, then the root
      std::vector<TensorId> params;
      for (const ParamDef& p : layout_.units[u].params)
        params.push_back(tb_.alloc(4 * p.numel(), Stream::Default, Tag::Param));
      const TensorId flat = tb_.alloc(4 * units_[u].flat, Stream::Default, Tag::Param);
      for (TensorId id : params) tb_.free(id);
      if (sharded_) {
        units_[u].local_shard = tb_.alloc(4 * units_[u].shard, Stream::Default, Tag::Param);
        tb_.free(flat);
      } else {
        units_[u].local_shard = flat;
      }
    }
  }

  void zero_grad() override {
    // optimizer.zero_grad(set_to_none=True): the sharded gradients (POST_BWD-pool blocks) go.
    for (Unit& u : units_) {
      tb_.free(u.saved_grad);
      u.saved_grad = 0;
    }
  }

  void pre_forward(int unit) override {
    gpu_.hook();
    if (unit == 0) {
      if (!lazy_init_done_) lazy_init();
      // Root pre-forward: the side streams wait for the optimizer step on DEFAULT.
      gpu_.wait(Stream::Unshard, Stream::Default);
      gpu_.wait(Stream::PreUnshard, Stream::Default);
    }
    if (!units_[idx(unit)].unsharded) unshard(unit);
    gpu_.wait(Stream::Default, Stream::Unshard);
    // forward_prefetch needs the order recorded by the previous iteration.
    if (o_.forward_prefetch && step_ >= 2 && idx(unit) + 1 < units_.size() && !units_[idx(unit) + 1].unsharded)
      unshard(unit + 1);
  }

  void post_forward(int unit) override {
    gpu_.hook();
    // The root is never resharded after forward; SHARD_GRAD_OP keeps every unit gathered until
    // its post-backward; NO_SHARD drops the low-precision copy (post_reshard).
    if (!sharded_)
      drop_mp_copy(unit);
    else if (unit != 0 && o_.sharding == ShardingStrategy::FullShard)
      reshard(unit);
  }

  void pre_backward(int unit) override {
    gpu_.hook();
    if (!units_[idx(unit)].unsharded) unshard(unit);
    gpu_.wait(Stream::Default, Stream::Unshard);
    if (o_.backward_prefetch == BackwardPrefetch::Pre) prefetch_backward(unit);
  }

  void weight_grads(ModuleRef m) override {
    Unit& u = units_[idx(m.unit)];
    const UnitDef& def = layout_.units[idx(m.unit)];
    for (int p : def.modules[static_cast<std::size_t>(m.module)].params) {
      const std::uint64_t numel = def.params[static_cast<std::size_t>(p)].numel();
      const Bytes bytes = pbytes_ * numel;
      if (o_.grad_flatten == GradFlatten::Cat) {
        // Every per-parameter gradient of the unit is held until the last one exists, then
        // concatenated (wm §3.1).
        TensorId& g = u.param_grads[static_cast<std::size_t>(p)];
        TensorId fresh = tb_.alloc(bytes, Stream::Default, Tag::Grad);
        if (g != 0) {
          tb_.free(fresh);  // tied weight: accumulated in place
          continue;
        }
        if (rbytes_ != pbytes_) {  // fairscale: converted to the reduce dtype first
          const TensorId conv = tb_.alloc(rbytes_ * numel, Stream::Default, Tag::Grad);
          gpu_.launch(Stream::Default, gpu_.memory_us(static_cast<double>(bytes + rbytes_ * numel)));
          tb_.free(fresh);
          fresh = conv;
        }
        g = fresh;
      } else {
        // Preallocated flat gradient (fairscale PR #1186, wm §3.5): each gradient is added
        // into its slice and freed at once.
        if (u.prealloc == 0) u.prealloc = tb_.alloc(rbytes_ * u.flat, Stream::Default, Tag::Grad);
        const TensorId g = tb_.alloc(bytes, Stream::Default, Tag::Grad);
        gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(bytes)));
        tb_.free(g);
      }
    }
  }

  void post_backward(int unit) override {
    gpu_.hook();
    Unit& u = units_[idx(unit)];
    TensorId flat = u.prealloc;
    u.prealloc = 0;
    if (o_.grad_flatten == GradFlatten::Cat) {
      flat = tb_.alloc(rbytes_ * u.flat, Stream::Default, Tag::Grad);
      gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(rbytes_ * u.flat)));
      for (TensorId& g : u.param_grads) {
        tb_.free(g);
        g = 0;
      }
    }
    if (!sharded_)
      drop_mp_copy(unit);
    else
      reshard(unit);
    if (o_.backward_prefetch == BackwardPrefetch::Post) prefetch_backward(unit);
    gpu_.wait(Stream::PostBackward, Stream::Default);
    reduce(u, flat);
  }

  void end_backward(bool /*last_micro*/) override {
    // Root final callback: DEFAULT waits for the last reduce-scatter; catch-all reshard.
    gpu_.wait(Stream::Default, Stream::PostBackward);
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (units_[u].unsharded && sharded_) reshard(static_cast<int>(u));
  }

  void optimizer_step() override { adam_.step(tb_); }

 private:
  struct Unit {
    std::uint64_t flat = 0, shard = 0;
    TensorId local_shard = 0, full = 0, mp_copy = 0, prealloc = 0, saved_grad = 0;
    bool unsharded = false;
    std::vector<TensorId> param_grads;
  };

  static std::size_t idx(int unit) { return static_cast<std::size_t>(unit); }

  std::vector<std::uint64_t> shard_numels() const {
    std::vector<std::uint64_t> v;
    for (const UnitDef& u : layout_.units) v.push_back(sharded_ ? ceil_div(u.numel(), n_) : u.numel());
    return v;
  }

  // _lazy_init (first forward, wm §3.1): init_flat_param_attributes allocates and frees, per
  // unit, _mp_shard, _full_param_padded and _full_prec_full_param_padded on DEFAULT.
  void lazy_init() {
    lazy_init_done_ = true;
    for (const Unit& u : units_) {
      if (mixed_) tb_.free(tb_.alloc(pbytes_ * u.shard, Stream::Default, Tag::Param));
      if (sharded_) {
        tb_.free(tb_.alloc(pbytes_ * n_ * u.shard, Stream::Default, Tag::Param));
        if (mixed_) tb_.free(tb_.alloc(4 * n_ * u.shard, Stream::Default, Tag::Param));
      }
    }
  }

  void limiter() {
    if (!o_.limit_all_gathers || free_events_.size() < 2) return;
    gpu_.sync_until(free_events_.front());
    free_events_.pop_front();
  }

  void unshard(int unit) {
    Unit& u = units_[idx(unit)];
    u.unsharded = true;
    if (!sharded_) {
      // NO_SHARD: only the low-precision copy of the whole flat parameter.
      limiter();
      if (!mixed_) return;
      u.mp_copy = tb_.alloc(pbytes_ * u.flat, Stream::PreUnshard, Tag::Param);
      gpu_.launch(Stream::PreUnshard, gpu_.memory_us(6.0 * static_cast<double>(u.flat)));
      gpu_.wait(Stream::Unshard, Stream::PreUnshard);
      return;
    }
    TensorId mp = 0;
    if (mixed_) {
      mp = tb_.alloc(pbytes_ * u.shard, Stream::PreUnshard, Tag::Comm);
      gpu_.launch(Stream::PreUnshard, gpu_.memory_us(6.0 * static_cast<double>(u.shard)));
      gpu_.wait(Stream::Unshard, Stream::PreUnshard);
    }
    limiter();
    const Bytes full = pbytes_ * n_ * u.shard;
    u.full = tb_.alloc(full, Stream::Unshard, Tag::Param);
    gpu_.launch(Stream::Unshard, gpu_.collective_us(static_cast<double>(full)));
    if (mp != 0) tb_.free_after(mp, {Stream::Unshard});
  }

  void reshard(int unit) {
    Unit& u = units_[idx(unit)];
    if (!u.unsharded) return;
    u.unsharded = false;
    tb_.free_after(u.full, {Stream::Default});
    u.full = 0;
    if (o_.limit_all_gathers) free_events_.push_back(gpu_.tail(Stream::Default));
  }

  void drop_mp_copy(int unit) {
    Unit& u = units_[idx(unit)];
    u.unsharded = false;
    tb_.free_after(u.mp_copy, {Stream::Default});
    u.mp_copy = 0;
  }

  // BACKWARD_PRE / BACKWARD_POST: the next unit in reverse forward order (the root's is the last
  // block); the root itself stays gathered.
  void prefetch_backward(int unit) {
    const int target = unit == 0 ? static_cast<int>(units_.size()) - 1 : unit - 1;
    if (target >= 1 && !units_[idx(target)].unsharded) unshard(target);
  }

  // _post_backward_hook's reduce path on POST_BWD (wm §3.1).
  void reduce(Unit& u, TensorId flat) {
    const double full_bytes = static_cast<double>(rbytes_ * u.flat);
    // The flat gradient is already in the reduce dtype (see the top of this file).
    TensorId cast = 0, padded = 0, grad = 0;
    bool flat_is_grad = false;
    if (sharded_) {
      if (u.flat % n_ != 0) {
        padded = tb_.alloc(rbytes_ * n_ * u.shard, Stream::PostBackward, Tag::Comm);
        gpu_.launch(Stream::PostBackward, gpu_.memory_us(2 * full_bytes));
      }
      grad = tb_.alloc(rbytes_ * u.shard, Stream::PostBackward, Tag::Grad);
      gpu_.launch(Stream::PostBackward, gpu_.collective_us(static_cast<double>(rbytes_ * n_ * u.shard)));
      if (rbytes_ != 4) {  // back to the fp32 parameter dtype for the optimizer
        const TensorId g32 = tb_.alloc(4 * u.shard, Stream::PostBackward, Tag::Grad);
        gpu_.launch(Stream::PostBackward, gpu_.memory_us(6.0 * static_cast<double>(u.shard)));
        tb_.free(grad);
        grad = g32;
      }
    } else {
      gpu_.launch(Stream::PostBackward, 2 * gpu_.collective_us(full_bytes));  // all-reduce
      if (rbytes_ != 4) {
        grad = tb_.alloc(4 * u.flat, Stream::PostBackward, Tag::Grad);
        gpu_.launch(Stream::PostBackward, gpu_.memory_us(6.0 * static_cast<double>(u.flat)));
      } else {
        grad = flat;  // fp32 flat gradient becomes .grad as it is
        flat_is_grad = true;
      }
    }
    tb_.free(padded);
    tb_.free(cast);
    if (u.saved_grad != 0) {  // gradient accumulation without no_sync: add into the saved shard
      gpu_.launch(Stream::PostBackward, gpu_.memory_us(12.0 * static_cast<double>(u.shard)));
      if (flat_is_grad)
        tb_.free_after(grad, {Stream::PostBackward});
      else
        tb_.free(grad);
      flat_is_grad = false;
    } else {
      u.saved_grad = grad;
    }
    if (!flat_is_grad) tb_.free_after(flat, {Stream::PostBackward});
  }

  const WorkloadOptions& o_;
  const ModelLayout& layout_;
  TraceBuilder& tb_;
  GpuTiming& gpu_;
  std::uint64_t n_;
  bool sharded_, mixed_;
  Bytes pbytes_, rbytes_;
  AdamModel adam_;
  std::vector<Unit> units_;
  std::deque<double> free_events_;
  bool lazy_init_done_ = false;
};

}  // namespace

std::unique_ptr<FrameworkModel> make_fsdp1(const FrameworkContext& ctx) { return std::make_unique<Fsdp1>(ctx); }

}  // namespace fraglab::workload
