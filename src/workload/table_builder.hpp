// TableBuilder: writes a LayerTable the way wm §2.3-§2.6 tabulate layers — one line per operator
// with its outputs, what it saves and which module it uses — and fills in GPU times from the
// timing model. Shared helpers for the pieces several families use (LayerNorms, dropout, loss).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "fraglab/workload.hpp"
#include "workload/gpu_timing.hpp"
#include "workload/layer_table.hpp"
#include "workload/param_layout.hpp"

namespace fraglab::workload {

// The shape of one table instance. T = batch * len tokens.
struct TableShape {
  std::uint64_t batch = 0;
  std::uint64_t len = 0;     // query length
  std::uint64_t kv_len = 0;  // key/value length of cross-attention (T5 decoder: s_e)
  std::uint64_t tokens() const { return batch * len; }
};

struct TableConfig {
  Bytes e = 2;  // activation bytes per element (wm §0)
  AttentionImpl attention = AttentionImpl::Eager;
  GeluImpl gelu = GeluImpl::Python;
  LossImpl loss = LossImpl::Fp32Upcast;
  bool checkpointing = true;  // T5 marks the cross-attention bias as requiring grad then (wm §2.4)
};

class TableBuilder {
 public:
  TableBuilder(std::string name, const UnitDef& unit, const GpuTiming& timing);

  int input(std::string name, Bytes size, bool requires_grad = true);
  int output(std::string name, Bytes size);
  int tensor(std::string name, Bytes size, bool requires_grad = true);
  int view(std::string name, int base, Bytes size);  // shares base's storage
  void scope(int t, int last_op) { table_.tensors[static_cast<std::size_t>(t)].scope_end = last_op; }
  int ops() const { return static_cast<int>(table_.ops.size()); }

  // One operator. Chain the setters: op(...).saves({...}).module("c_fc").matmul(flops).
  class Op {
   public:
    Op& saves(std::initializer_list<int> tensors);
    Op& module(std::string_view name);
    Op& matmul(double flops);  // GPU time from FLOPs (backward: twice)
    Op& fwd_temp(Bytes b);
    Op& bwd_temp(Bytes b);
    Op& alias();  // gradients pass through (wm §2.1)
    int index() const { return index_; }

   private:
    friend class TableBuilder;
    Op(TableBuilder& b, int index) : b_(b), index_(index) {}
    OpDef& def();
    TableBuilder& b_;
    int index_;
  };
  Op op(std::string name, std::initializer_list<int> in, std::initializer_list<int> out);

  LayerTable finish();

 private:
  LayerTable table_;
  const UnitDef& unit_;
  const GpuTiming& timing_;
  std::vector<bool> timed_;  // ops with an explicit matmul time
};

// ---- pieces shared by the families (tables_common.cpp) ----------------------------------------

// Native LayerNorm (GPT2, wm §2.3): saves its input and fp32 mean/rstd. Returns the output.
int native_layer_norm(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t width,
                      std::string_view module, const std::string& prefix);
// T5LayerNorm / LlamaRMSNorm in Python (wm §2.4, §2.5): 8·sbh saved with bf16 or fp32.
int rms_norm(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t width,
             std::string_view module, const std::string& prefix);
// nn.Dropout in training: output + bool mask, the mask saved. Returns the output.
// `output_tensor` < 0: a new Internal tensor.
int dropout(TableBuilder& b, const TableConfig& c, int x, std::uint64_t elements, const std::string& prefix,
            int output_tensor = -1);
// Linear / Conv1D: y = x W (+ b); saves x. Returns y.
int linear(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t in, std::uint64_t out,
           std::string_view module, const std::string& name, int output_tensor = -1);
// Causal-LM head loss on `logits` ([tokens, vocab], e-dtype), wm §2.6: the HF >= 4.46 fp32
// upcast (ForCausalLMLoss) or the older bf16 shift + CrossEntropy. Adds Output "loss".
void causal_lm_loss(TableBuilder& b, const TableConfig& c, int logits, int labels, std::uint64_t batch,
                    std::uint64_t len, std::uint64_t vocab);

}  // namespace fraglab::workload
