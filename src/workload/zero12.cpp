// DeepSpeed ZeRO-1 / ZeRO-2 (v0.16.5 stage_1_and_2.py), wm §4.2. Parameters stay whole in bf16
// (one flat, N-aligned buffer of 2Ψ); each rank owns a partition Ψp = Ψ/N of the flat space.
//
//  - Init: the module's parameters on the GPU, flattened (the originals freed), the fp32 master
//    partition (4Ψp), initialize_optimizer_states' zero fp32 gradient (allocated, then dropped).
//  - ZeRO-2 backward: ipg bucket(s) allocated at backward start (reduce_bucket_size elements; two
//    with overlap_comm); each gradient hook copies the parameter's gradient into the bucket and
//    frees it; a full bucket is reduced, and the first reduction of the backward allocates
//    grads_in_partition (Ψp), which collects this rank's averaged gradients; the epilogue
//    releases the bucket(s); the partition stays referenced until the step.
//  - ZeRO-1 backward: no hooks; every parameter keeps its whole gradient (2Ψ) until the
//    boundary, where the gradients are all-reduced bucket by bucket (flattened copies), the own
//    partition is gathered into a flat buffer and the rest freed ("grad_sync" phase).
//  - Step: flatten the partition (Ψp), .to(fp32), the partition buffer released, Adam (lazy
//    states), fp32 → bf16 copy, all-gather of the bf16 partitions in place.
#include "workload/framework.hpp"
#include "workload/optimizer.hpp"

namespace fraglab::workload {

namespace {

class Zero12 final : public FrameworkModel {
 public:
  explicit Zero12(const FrameworkContext& ctx)
      : o_(ctx.options),
        ds_(ctx.options.deepspeed),
        layout_(ctx.layout),
        tb_(ctx.tb),
        gpu_(ctx.tb.gpu()),
        n_(o_.world_size),
        stage2_(o_.framework == Framework::Zero2),
        overlap_(ds_.overlap_comm.value_or(false)),
        pbytes_(dtype_bytes(o_.precision)),
        gbytes_(dtype_bytes(o_.precision)),
        contributions_(ctx.layout) {
    for (const UnitDef& u : layout_.units) {
      unit_first_param_.push_back(static_cast<int>(numels_.size()));
      for (const ParamDef& p : u.params) numels_.push_back(p.numel());
    }
    grads_.assign(numels_.size(), 0);
    std::uint64_t total = 0;
    for (std::uint64_t n : numels_) total += n;
    partition_ = ceil_div(total, n_);  // flatten_dense_tensors_aligned pads to a multiple of N
    adam_ = std::make_unique<AdamModel>(*o_.optimizer, std::vector<std::uint64_t>{partition_});
  }

  void init() override {
    std::vector<TensorId> params;
    for (std::uint64_t n : numels_) params.push_back(tb_.alloc(pbytes_ * n, Stream::Default, Tag::Param));
    tb_.alloc(pbytes_ * partition_ * n_, Stream::Default, Tag::Param);  // the flat bf16 group
    for (TensorId id : params) tb_.free(id);
    tb_.alloc(4 * partition_, Stream::Default, Tag::Param);           // fp32 master partition
    tb_.free(tb_.alloc(4 * partition_, Stream::Default, Tag::Temp));  // zero fp32 grad, dropped
  }

  void zero_grad() override {}

  void pre_forward(int unit) override {
    if (unit == 0) contributions_.reset();
  }
  void post_forward(int) override {}

  void pre_backward(int unit) override {
    // engine.backward → optimizer.backward: the ipg buffer(s) come first.
    if (unit != 0 || !stage2_ || !ds_.contiguous_gradients) return;
    for (int i = 0; i < (overlap_ ? 2 : 1); ++i)
      ipg_.push_back(tb_.alloc(gbytes_ * (*ds_.reduce_bucket_size), Stream::Default, Tag::Comm));
  }

  void post_backward(int) override {}

  void module_begin(ModuleRef m, Pass pass) override {
    if (pass == Pass::Forward) contributions_.forward_use(m);
  }

  void weight_grads(ModuleRef m) override {
    const int first = unit_first_param_[static_cast<std::size_t>(m.unit)];
    const ModuleDef& def = layout_.units[static_cast<std::size_t>(m.unit)].modules[static_cast<std::size_t>(m.module)];
    for (int p : def.params) {
      TensorId& g = grads_[static_cast<std::size_t>(first) + static_cast<std::size_t>(p)];
      const TensorId fresh = tb_.alloc(gbytes_ * numels_[static_cast<std::size_t>(first) + static_cast<std::size_t>(p)],
                                       Stream::Default, Tag::Grad);
      if (g == 0)
        g = fresh;
      else
        tb_.free(fresh);  // summed in place (tied weight, or ZeRO-1 accumulation in .grad)
    }
    if (!stage2_) return;
    for (int p : contributions_.backward(m)) add_to_bucket(first + p);
  }

  void end_backward(bool /*last_micro*/) override {
    if (!stage2_) return;
    reduce_bucket();
    if (overlap_) gpu_.sync_stream(Stream::DsReduce);
    for (TensorId id : ipg_) tb_.free(id);  // _release_ipg_buffers
    ipg_.clear();
  }

  bool has_grad_sync() const override { return !stage2_; }

  void grad_sync() override {
    // ZeRO-1 at the boundary: bucketed all-reduce through flattened copies, then the own
    // partition gathered into one flat buffer and every whole gradient freed.
    std::uint64_t pending = 0;
    for (std::uint64_t n : numels_) {
      pending += n;
      if (pending >= (*ds_.reduce_bucket_size)) flush_allreduce(pending);
    }
    flush_allreduce(pending);
    partition_grad_ = tb_.alloc(gbytes_ * partition_, Stream::Default, Tag::Grad);
    gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * partition_)));
    for (TensorId& g : grads_) {
      tb_.free(g);
      g = 0;
    }
  }

  void optimizer_step() override {
    const TensorId flat = tb_.alloc(gbytes_ * partition_, Stream::Default, Tag::Temp);
    gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * partition_)));
    TensorId g32 = flat;
    if (gbytes_ != 4) {
      g32 = tb_.alloc(4 * partition_, Stream::Default, Tag::Grad);
      gpu_.launch(Stream::Default, gpu_.memory_us(6.0 * static_cast<double>(partition_)));
      tb_.free(flat);
    }
    tb_.free(partition_grad_);  // averaged_gradients[i] = None
    partition_grad_ = 0;
    adam_->step(tb_);
    tb_.free(g32);
    gpu_.launch(Stream::Default, gpu_.memory_us(6.0 * static_cast<double>(partition_)));
    gpu_.launch(Stream::Default, gpu_.collective_us(static_cast<double>(pbytes_ * partition_ * n_)));
  }

 private:
  void add_to_bucket(int gp) {
    gpu_.hook();
    const std::uint64_t n = numels_[static_cast<std::size_t>(gp)];
    if (bucket_numel_ + n > (*ds_.reduce_bucket_size) && bucket_numel_ > 0) reduce_bucket();
    TensorId& g = grads_[static_cast<std::size_t>(gp)];
    const Stream s = overlap_ ? Stream::DsReduce : Stream::Default;
    if (overlap_) gpu_.wait(Stream::DsReduce, Stream::Default);
    if (ds_.contiguous_gradients) {
      gpu_.launch(s, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * n)));
      if (overlap_)
        tb_.free_after(g, {Stream::DsReduce});
      else
        tb_.free(g);
    } else {
      bucket_grads_.push_back(g);
    }
    g = 0;
    bucket_numel_ += n;
  }

  void reduce_bucket() {
    if (bucket_numel_ == 0) return;
    const Stream s = overlap_ ? Stream::DsReduce : Stream::Default;
    if (overlap_) gpu_.wait(Stream::DsReduce, Stream::Default);
    gpu_.launch(s, gpu_.collective_us(static_cast<double>(gbytes_ * bucket_numel_)));
    if (partition_grad_ == 0) partition_grad_ = tb_.alloc(gbytes_ * partition_, s, Tag::Grad);
    gpu_.launch(s, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * bucket_numel_) / static_cast<double>(n_)));
    for (TensorId g : bucket_grads_) {
      if (overlap_)
        tb_.free_after(g, {Stream::DsReduce});
      else
        tb_.free(g);
    }
    bucket_grads_.clear();
    bucket_numel_ = 0;
  }

  void flush_allreduce(std::uint64_t& numel) {
    if (numel == 0) return;
    const TensorId flat = tb_.alloc(gbytes_ * numel, Stream::Default, Tag::Comm);
    gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * numel)));
    gpu_.launch(Stream::Default, 2 * gpu_.collective_us(static_cast<double>(gbytes_ * numel)));
    tb_.free(flat);
    numel = 0;
  }

  const WorkloadOptions& o_;
  const DeepSpeedOptions& ds_;
  const ModelLayout& layout_;
  TraceBuilder& tb_;
  GpuTiming& gpu_;
  std::uint64_t n_;
  bool stage2_, overlap_;
  Bytes pbytes_, gbytes_;
  GradContributions contributions_;
  std::vector<std::uint64_t> numels_;
  std::vector<int> unit_first_param_;
  std::vector<TensorId> grads_, ipg_, bucket_grads_;
  std::uint64_t partition_ = 0, bucket_numel_ = 0;
  TensorId partition_grad_ = 0;
  std::unique_ptr<AdamModel> adam_;
};

}  // namespace

std::unique_ptr<FrameworkModel> make_zero12(const FrameworkContext& ctx) { return std::make_unique<Zero12>(ctx); }

}  // namespace fraglab::workload
