// DeepSpeed ZeRO-3 (v0.16.5 stage3.py, partition_parameters.py, partitioned_param_coordinator.py),
// wm §4.1. Parameters are fetched per leaf module; those under param_persistence_threshold stay
// whole on every rank. Partition of a parameter: ceil(n/N) elements.
//
//  - Init (zero.Init + optimizer): every parameter created whole then partitioned; defragment()
//    moves the partitions through the CPU, empties the cache and puts them back as one flat
//    buffer; fp32 master partition per sub-group; a transient fp32 buffer of the largest
//    sub-group; the ipg bucket (contiguous_gradients); the flat gradient partition buffer.
//  - Fetch on DS_ALLGATHER: one parameter → its padded full buffer; several (a prefetch) → one
//    flat buffer, then at wait() a separate full tensor per parameter (the cat), flat freed.
//    More than two outstanding fetch events → CPU sync on the oldest.
//  - Step 1 records the module trace and fetches on demand; later micro-batches prefetch up to
//    prefetch_bucket_size elements (within max_live_parameters) in trace order.
//  - Release after the module's forward/backward: record_stream(DEFAULT) + free, unless the
//    parameter is reused within max_reuse_distance elements or a prefetch already passed its
//    next use.
//  - Gradients: autograd's full gradient (DEFAULT) is copied into the ipg bucket on the reduce
//    stream (record_stream + free); a full bucket is reduce-scattered through a cat copy into
//    the flat partition buffer; at most two reduce events outstanding; the epilogue syncs.
//  - Step per sub-group: flatten the bf16 gradient partition, .to(fp32), FusedAdam (states lazy
//    at step 1), copy back; then the persistent parameters are all-gathered anew.
#include <algorithm>
#include <deque>

#include "workload/framework.hpp"
#include "workload/optimizer.hpp"

namespace fraglab::workload {

namespace {

enum class ParamState : std::uint8_t { NotAvailable, InFlight, Available };

class Zero3 final : public FrameworkModel {
 public:
  explicit Zero3(const FrameworkContext& ctx)
      : o_(ctx.options),
        ds_(ctx.options.deepspeed),
        layout_(ctx.layout),
        tb_(ctx.tb),
        gpu_(ctx.tb.gpu()),
        n_(o_.world_size),
        pbytes_(dtype_bytes(o_.precision)),
        gbytes_(dtype_bytes(o_.precision)),
        contributions_(ctx.layout) {
    for (std::size_t u = 0; u < layout_.units.size(); ++u) {
      const UnitDef& def = layout_.units[u];
      unit_first_param_.push_back(static_cast<int>(params_.size()));
      for (const ParamDef& p : def.params) {
        Param q;
        q.numel = p.numel();
        q.partition = ceil_div(q.numel, n_);
        q.persistent = q.numel < (*ds_.param_persistence_threshold);
        params_.push_back(q);
      }
      unit_first_module_.push_back(static_cast<int>(modules_.size()));
      for (const ModuleDef& m : def.modules) {
        Module mod;
        for (int p : m.params) {
          const int gp = unit_first_param_[u] + p;
          mod.params.push_back(gp);
          if (!params_[static_cast<std::size_t>(gp)].persistent)
            mod.fetch_numel += params_[static_cast<std::size_t>(gp)].numel;
        }
        modules_.push_back(std::move(mod));
      }
    }
    // Sub-groups (stage3 _create_fp16_sub_groups): consecutive partitions up to sub_group_size.
    std::uint64_t acc = 0;
    for (const Param& p : params_) {
      acc += p.partition;
      partition_total_ += p.partition;
      if (acc >= ds_.sub_group_size) {
        sub_groups_.push_back(acc);
        acc = 0;
      }
    }
    if (acc > 0) sub_groups_.push_back(acc);
    adam_ = std::make_unique<AdamModel>(*o_.optimizer, sub_groups_);
  }

  void init() override {
    std::vector<TensorId> partitions;
    for (Param& p : params_) {
      const TensorId full = tb_.alloc(pbytes_ * p.numel, Stream::Default, Tag::Param);
      partitions.push_back(tb_.alloc(pbytes_ * p.partition, Stream::Default, Tag::Param));
      if (p.persistent) {
        p.full = full;
        p.state = ParamState::Available;
      } else {
        tb_.free(full);
      }
    }
    // defragment(): partitions to the CPU, empty_cache(), back as one flat buffer.
    for (TensorId id : partitions) tb_.free(id);
    tb_.empty_cache();
    tb_.alloc(pbytes_ * partition_total_, Stream::Default, Tag::Param);
    std::uint64_t largest = 0;
    for (std::uint64_t n : sub_groups_) {
      tb_.alloc(4 * n, Stream::Default, Tag::Param);  // fp32 master partition
      largest = std::max(largest, n);
    }
    tb_.free(tb_.alloc(4 * largest, Stream::Default, Tag::Temp));  // initialize_optimizer_states
    if (ds_.contiguous_gradients) tb_.alloc(gbytes_ * (*ds_.reduce_bucket_size), Stream::Default, Tag::Comm);
    tb_.alloc(gbytes_ * partition_total_, Stream::Default, Tag::Grad);  // grad_partitions_flat_buffer
  }

  void zero_grad() override {}  // the flat gradient partition is zeroed in place

  void pre_forward(int unit) override {
    if (unit == 0) {
      position_ = 0;
      prefetch_cursor_ = 0;
      contributions_.reset();
    }
  }
  void post_forward(int) override {}
  void pre_backward(int) override {}
  void post_backward(int) override {}

  void module_begin(ModuleRef m, Pass pass) override {
    gpu_.hook();
    const int gm = global_module(m);
    if (pass == Pass::Forward) contributions_.forward_use(m);
    if (!trace_complete_) trace_.push_back(gm);
    const int pos = position_++;
    fetch(gm);
    if (trace_complete_ && (*ds_.prefetch_bucket_size) > 0) prefetch(pos);
  }

  void module_end(ModuleRef m, Pass /*pass*/) override {
    gpu_.hook();
    release(global_module(m), position_ - 1);
  }

  void weight_grads(ModuleRef m) override {
    const int first = unit_first_param_[static_cast<std::size_t>(m.unit)];
    const ModuleDef& def = layout_.units[static_cast<std::size_t>(m.unit)].modules[static_cast<std::size_t>(m.module)];
    for (int p : def.params) {
      Param& q = params_[static_cast<std::size_t>(first) + static_cast<std::size_t>(p)];
      const TensorId fresh = tb_.alloc(gbytes_ * q.numel, Stream::Default, Tag::Grad);
      if (q.grad == 0)
        q.grad = fresh;
      else
        tb_.free(fresh);  // a tied weight's later contribution, summed in its input buffer
    }
    for (int p : contributions_.backward(m)) add_to_bucket(first + p);  // the grad hook
  }

  void end_backward(bool /*last_micro*/) override {
    // independent_gradient_partition_epilogue: reduce what is left, sync the reduce stream.
    reduce_bucket();
    gpu_.sync_stream(Stream::DsReduce);
    gpu_.wait(Stream::Default, Stream::DsReduce);
    for (Param& p : params_)
      if (!p.persistent && p.state != ParamState::NotAvailable) drop(p);
    handles_.clear();  // every coalesced gather has been waited on by now
    trace_complete_ = true;
  }

  // DeepSpeed keeps one parameter coordinator per mode (stage3.py get_param_coordinator(training)):
  // evaluation records its own module trace in its first forward and prefetches from it after.
  void begin_eval() override { swap_coordinator(); }
  void end_eval_forward() override {
    // No backward follows: the end of the forward releases what is still gathered (reset_step),
    // and the evaluation trace is complete after its first forward.
    for (Param& p : params_)
      if (!p.persistent && p.state != ParamState::NotAvailable) drop(p);
    handles_.clear();
    trace_complete_ = true;
  }
  void end_eval() override { swap_coordinator(); }

  void optimizer_step() override {
    for (std::size_t i = 0; i < sub_groups_.size(); ++i) {
      const std::uint64_t n = sub_groups_[i];
      const TensorId flat = tb_.alloc(gbytes_ * n, Stream::Default, Tag::Temp);  // flatten(grad views)
      gpu_.launch(Stream::Default, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * n)));
      TensorId g32 = flat;
      if (gbytes_ != 4) {
        g32 = tb_.alloc(4 * n, Stream::Default, Tag::Grad);  // .to(fp32)
        gpu_.launch(Stream::Default, gpu_.memory_us(6.0 * static_cast<double>(n)));
        tb_.free(flat);
      }
      adam_->step_one(tb_, i);
      gpu_.launch(Stream::Default, gpu_.memory_us(6.0 * static_cast<double>(n)));  // fp32 → bf16 partition
      tb_.free(g32);
    }
    // _post_step: the persistent parameters are gathered again from their updated partitions.
    for (Param& p : params_) {
      if (!p.persistent) continue;
      const TensorId fresh = tb_.alloc(pbytes_ * p.partition * n_, Stream::DsAllGather, Tag::Param);
      gpu_.launch(Stream::DsAllGather, gpu_.collective_us(static_cast<double>(pbytes_ * p.partition * n_)));
      tb_.free_after(p.full, {Stream::Default});
      p.full = fresh;
    }
    gpu_.wait(Stream::Default, Stream::DsAllGather);
  }

 private:
  struct Param {
    std::uint64_t numel = 0, partition = 0;
    bool persistent = false;
    ParamState state = ParamState::NotAvailable;
    TensorId full = 0, grad = 0;
    int handle = -1;  // pending coalesced fetch
  };
  struct Module {
    std::vector<int> params;        // global indices
    std::uint64_t fetch_numel = 0;  // non-persistent elements
  };
  struct Handle {  // a coalesced all-gather waiting for wait()
    TensorId flat = 0;
    std::vector<int> params;
  };

  void swap_coordinator() {
    std::swap(trace_, other_trace_);
    std::swap(trace_complete_, other_trace_complete_);
  }

  int global_module(ModuleRef m) const { return unit_first_module_[static_cast<std::size_t>(m.unit)] + m.module; }

  void fetch(int gm) {
    std::vector<int> now;
    for (int gp : modules_[static_cast<std::size_t>(gm)].params) {
      Param& p = params_[static_cast<std::size_t>(gp)];
      if (p.persistent) continue;
      if (p.state == ParamState::NotAvailable) now.push_back(gp);
      if (p.state == ParamState::InFlight) complete(p.handle);
    }
    if (!now.empty()) {
      const int h = all_gather(now);
      if (h >= 0) complete(h);
    }
    gpu_.wait(Stream::Default, Stream::DsAllGather);
  }

  // Returns the pending handle for a coalesced gather, -1 when the single buffer is final.
  int all_gather(const std::vector<int>& gps) {
    std::uint64_t partitions = 0;
    for (int gp : gps) partitions += params_[static_cast<std::size_t>(gp)].partition;
    const double bytes = static_cast<double>(pbytes_ * partitions * n_);
    int handle = -1;
    if (gps.size() == 1) {
      Param& p = params_[static_cast<std::size_t>(gps[0])];
      p.full = tb_.alloc(pbytes_ * p.partition * n_, Stream::DsAllGather, Tag::Param);
      p.state = ParamState::Available;
    } else {
      Handle hd;
      hd.flat = tb_.alloc(pbytes_ * partitions * n_, Stream::DsAllGather, Tag::Comm);
      hd.params = gps;
      handles_.push_back(std::move(hd));
      handle = static_cast<int>(handles_.size() - 1);
      for (int gp : gps) {
        params_[static_cast<std::size_t>(gp)].state = ParamState::InFlight;
        params_[static_cast<std::size_t>(gp)].handle = handle;
      }
    }
    live_numel_ += partitions * n_;
    gpu_.launch(Stream::DsAllGather, gpu_.collective_us(bytes));
    fetch_events_.push_back(gpu_.tail(Stream::DsAllGather));
    if (fetch_events_.size() > 2) {  // __max_ongoing_fetch_events
      gpu_.sync_until(fetch_events_.front());
      fetch_events_.pop_front();
    }
    return handle;
  }

  // wait() of a coalesced gather: one full tensor per parameter (the cat of its N pieces).
  void complete(int handle) {
    Handle& hd = handles_[static_cast<std::size_t>(handle)];
    if (hd.flat == 0) return;
    for (int gp : hd.params) {
      Param& p = params_[static_cast<std::size_t>(gp)];
      if (p.state != ParamState::InFlight || p.handle != handle) continue;
      p.full = tb_.alloc(pbytes_ * p.partition * n_, Stream::DsAllGather, Tag::Param);
      p.state = ParamState::Available;
      p.handle = -1;
    }
    gpu_.launch(Stream::DsAllGather, gpu_.memory_us(2.0 * static_cast<double>(pbytes_) * hd.params.size()));
    tb_.free(hd.flat);
    hd.flat = 0;
  }

  // The prefetch budget is min(max_live_parameters - gathered, prefetch_bucket_size); the trace is
  // consumed in order, and every parameter the cursor passes counts as fetched for that use
  // (already gathered ones too), which keeps them from being released before it.
  void prefetch(int pos) {
    prefetch_cursor_ = std::max(prefetch_cursor_, pos + 1);
    const std::uint64_t max_live = ds_.max_live_parameters;
    const std::uint64_t budget =
        live_numel_ >= max_live ? 0 : std::min(max_live - live_numel_, (*ds_.prefetch_bucket_size));
    std::vector<int> batch;
    std::uint64_t numel = 0;
    while (prefetch_cursor_ < static_cast<int>(trace_.size()) && numel < budget) {
      const Module& m = modules_[static_cast<std::size_t>(trace_[static_cast<std::size_t>(prefetch_cursor_)])];
      for (int gp : m.params) {
        const Param& p = params_[static_cast<std::size_t>(gp)];
        if (p.persistent || p.state != ParamState::NotAvailable) continue;
        if (std::find(batch.begin(), batch.end(), gp) != batch.end()) continue;
        batch.push_back(gp);
        numel += p.numel;
      }
      ++prefetch_cursor_;
    }
    if (!batch.empty()) all_gather(batch);
  }

  // Reused soon enough to keep? Scans the recorded trace after `pos`.
  bool keep(int gp, int pos) const {
    if (!trace_complete_) return false;
    std::uint64_t distance = 0;
    for (std::size_t i = static_cast<std::size_t>(pos) + 1; i < trace_.size(); ++i) {
      const Module& m = modules_[static_cast<std::size_t>(trace_[i])];
      if (std::find(m.params.begin(), m.params.end(), gp) != m.params.end())
        return static_cast<int>(i) < prefetch_cursor_ || distance <= ds_.max_reuse_distance;
      distance += m.fetch_numel;
      if (distance > ds_.max_reuse_distance && static_cast<int>(i) >= prefetch_cursor_) return false;
    }
    return false;
  }

  void release(int gm, int pos) {
    for (int gp : modules_[static_cast<std::size_t>(gm)].params) {
      Param& p = params_[static_cast<std::size_t>(gp)];
      if (p.persistent || p.state != ParamState::Available) continue;
      if (keep(gp, pos)) continue;
      drop(p);
    }
  }

  void drop(Param& p) {
    if (p.state == ParamState::InFlight) complete(p.handle);
    tb_.free_after(p.full, {Stream::Default});
    p.full = 0;
    p.state = ParamState::NotAvailable;
    live_numel_ -= p.partition * n_;
  }

  void add_to_bucket(int gp) {
    Param& p = params_[static_cast<std::size_t>(gp)];
    if (bucket_numel_ + p.numel > (*ds_.reduce_bucket_size) && bucket_numel_ > 0) reduce_bucket();
    gpu_.wait(Stream::DsReduce, Stream::Default);
    if (ds_.contiguous_gradients) {
      gpu_.launch(Stream::DsReduce, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * p.numel)));
      tb_.free_after(p.grad, {Stream::DsReduce});
    } else {
      bucket_grads_.push_back(p.grad);
    }
    p.grad = 0;
    bucket_numel_ += p.numel;
    bucket_partitions_ += p.partition;
  }

  void reduce_bucket() {
    if (bucket_numel_ == 0) return;
    while (reduce_events_.size() > 2) {  // max_param_reduce_events
      gpu_.sync_until(reduce_events_.front());
      reduce_events_.pop_front();
    }
    gpu_.wait(Stream::DsReduce, Stream::Default);
    // reduce_scatter_coalesced: the rank-interleaved padded copy of the bucket (torch.cat).
    const Bytes bytes = gbytes_ * bucket_partitions_ * n_;
    const TensorId flat = tb_.alloc(bytes, Stream::DsReduce, Tag::Comm);
    gpu_.launch(Stream::DsReduce, gpu_.memory_us(2.0 * static_cast<double>(bytes)));
    gpu_.launch(Stream::DsReduce, gpu_.collective_us(static_cast<double>(bytes)));
    gpu_.launch(Stream::DsReduce, gpu_.memory_us(2.0 * static_cast<double>(gbytes_ * bucket_partitions_)));
    tb_.free(flat);
    for (TensorId g : bucket_grads_) tb_.free_after(g, {Stream::DsReduce});
    bucket_grads_.clear();
    reduce_events_.push_back(gpu_.tail(Stream::DsReduce));
    bucket_numel_ = 0;
    bucket_partitions_ = 0;
  }

  const WorkloadOptions& o_;
  const DeepSpeedOptions& ds_;
  const ModelLayout& layout_;
  TraceBuilder& tb_;
  GpuTiming& gpu_;
  std::uint64_t n_;
  Bytes pbytes_, gbytes_;
  GradContributions contributions_;
  std::vector<Param> params_;
  std::vector<Module> modules_;
  std::vector<int> unit_first_param_, unit_first_module_;
  std::vector<std::uint64_t> sub_groups_;
  std::uint64_t partition_total_ = 0;
  std::unique_ptr<AdamModel> adam_;
  std::vector<Handle> handles_;
  std::vector<int> trace_;
  bool trace_complete_ = false;
  std::vector<int> other_trace_;  // the coordinator of the other mode (training / evaluation)
  bool other_trace_complete_ = false;
  int position_ = 0, prefetch_cursor_ = 0;
  std::uint64_t live_numel_ = 0;
  std::deque<double> fetch_events_, reduce_events_;
  std::uint64_t bucket_numel_ = 0, bucket_partitions_ = 0;
  std::vector<TensorId> bucket_grads_;
};

}  // namespace

std::unique_ptr<FrameworkModel> make_zero3(const FrameworkContext& ctx) { return std::make_unique<Zero3>(ctx); }

}  // namespace fraglab::workload
