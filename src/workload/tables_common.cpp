// Layer pieces several families share (wm §2.3-§2.6). Sizes in bytes; T = tokens, e = bytes per
// activation element.
#include "workload/table_builder.hpp"

namespace fraglab::workload {

int native_layer_norm(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t width,
                      std::string_view module, const std::string& prefix) {
  // torch.native_layer_norm saves its input and fp32 mean/rstd ([tokens] each), wm §2.1.
  const int y = b.tensor(prefix + ".out", c.e * tokens * width);
  const int mean = b.tensor(prefix + ".mean", 4 * tokens, false);
  const int rstd = b.tensor(prefix + ".rstd", 4 * tokens, false);
  b.op(prefix, {x}, {y, mean, rstd}).saves({x, mean, rstd}).module(module);
  return y;
}

int rms_norm(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t width,
             std::string_view module, const std::string& prefix) {
  // T5LayerNorm / LlamaRMSNorm, wm §2.4: x.to(fp32) (saved by pow), pow(2) (transient), mean,
  // rsqrt (saved), x * r (transient with bf16; saved by the weight mul with fp32), .to(bf16)
  // (saved by the weight mul), weight * · (saved by the following Linears).
  const Bytes wide = 4 * tokens * width;
  int x32 = x;
  if (c.e != 4) {
    x32 = b.tensor(prefix + ".x_fp32", wide);
    b.op(prefix + ".to_fp32", {x}, {x32});
  }
  const int sq = b.tensor(prefix + ".pow", wide);
  b.op(prefix + ".pow", {x32}, {sq}).saves({x32}).bwd_temp(wide);
  const int var = b.tensor(prefix + ".variance", 4 * tokens);
  b.op(prefix + ".mean", {sq}, {var});
  const int var_eps = b.tensor(prefix + ".variance_eps", 4 * tokens);
  b.op(prefix + ".add_eps", {var}, {var_eps}).alias();
  const int r = b.tensor(prefix + ".rsqrt", 4 * tokens);
  b.op(prefix + ".rsqrt", {var_eps}, {r}).saves({r});
  const int normed = b.tensor(prefix + ".normed", wide);
  b.op(prefix + ".mul", {x32, r}, {normed}).saves({x32, r}).bwd_temp(wide);
  int weight_in = normed;
  if (c.e != 4) {
    weight_in = b.tensor(prefix + ".to_bf16", c.e * tokens * width);
    b.op(prefix + ".to_bf16", {normed}, {weight_in});
  }
  const int y = b.tensor(prefix + ".out", c.e * tokens * width);
  // The weight's gradient is (grad * normed) summed over tokens: one full-size temporary.
  b.op(prefix, {weight_in}, {y}).saves({weight_in}).module(module).bwd_temp(c.e * tokens * width);
  return y;
}

int dropout(TableBuilder& b, const TableConfig& c, int x, std::uint64_t elements, const std::string& prefix,
            int output_tensor) {
  // native_dropout returns the output and a bool mask; only the mask is saved.
  const int y = output_tensor >= 0 ? output_tensor : b.tensor(prefix + ".out", c.e * elements);
  const int mask = b.tensor(prefix + ".mask", elements, false);
  b.op(prefix, {x}, {y, mask}).saves({mask});
  return y;
}

int linear(TableBuilder& b, const TableConfig& c, int x, std::uint64_t tokens, std::uint64_t in, std::uint64_t out,
           std::string_view module, const std::string& name, int output_tensor) {
  const int y = output_tensor >= 0 ? output_tensor : b.tensor(name, c.e * tokens * out);
  b.op(name, {x}, {y}).saves({x}).module(module).matmul(2.0 * static_cast<double>(tokens * in * out));
  return y;
}

void causal_lm_loss(TableBuilder& b, const TableConfig& c, int logits, int labels, std::uint64_t batch,
                    std::uint64_t len, std::uint64_t vocab) {
  const std::uint64_t tokens = batch * len;
  const int loss = b.output("loss", 4);
  if (c.loss == LossImpl::Fp32Upcast) {
    // HF >= 4.46 ForCausalLMLoss (wm §2.6): logits.float() lives until the loss function returns;
    // log_softmax (fp32) is saved; backward: nll grad, log_softmax grad, cast back.
    // With fp32 compute .float() returns the logits themselves.
    int l32 = logits;
    if (c.e != 4) {
      l32 = b.tensor("logits_fp32", 4 * tokens * vocab);
      b.op("logits.float", {logits}, {l32});
    }
    const int padded = b.tensor("labels_padded", 8 * batch * (len + 1), false);
    b.op("pad_labels", {labels}, {padded});
    const int shifted = b.tensor("shift_labels", 8 * tokens, false);
    b.op("shift_labels", {padded}, {shifted});
    const int lsm = b.tensor("log_softmax", 4 * tokens * vocab);
    b.op("log_softmax", {l32}, {lsm}).saves({lsm});
    const int nll = b.op("nll_loss", {lsm, shifted}, {loss}).saves({shifted}).index();
    if (l32 != logits) b.scope(l32, nll);
  } else {
    // Older GPT2LMHeadModel (wm §2.6): shift_logits = logits[..., :-1, :].contiguous() in bf16;
    // CrossEntropy in bf16; the slice backward allocates a zero-filled [b, s, V].
    const std::uint64_t shifted_tokens = batch * (len - 1);
    const int shl = b.tensor("shift_logits", c.e * shifted_tokens * vocab);
    b.op("shift_logits", {logits}, {shl});
    const int labels_shifted = b.tensor("shift_labels", 8 * shifted_tokens, false);
    b.op("shift_labels", {labels}, {labels_shifted});
    const int lsm = b.tensor("log_softmax", c.e * shifted_tokens * vocab);
    b.op("log_softmax", {shl}, {lsm}).saves({lsm});
    const int nll = b.op("nll_loss", {lsm, labels_shifted}, {loss}).saves({labels_shifted}).index();
    b.scope(shl, nll);
  }
}

}  // namespace fraglab::workload
