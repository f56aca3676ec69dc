// GPT2 with HF eager attention (or SDPA), wm §2.3; embeddings and LM head / loss, wm §2.6.
// x = block input [b, s, h]; sizes in bytes; T = b·s.
#include "workload/tables.hpp"

namespace fraglab::workload {

LayerTable gpt2_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape) {
  const ModelConfig& m = ctx.model;
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = m.hidden, f = m.ffn, a = m.heads, d = m.head_dim;
  const std::uint64_t b_ = shape.batch, s = shape.len;
  const Bytes e = c.e, act = e * T * h, scores = e * a * s * s * b_;
  TableBuilder b("gpt2.block", unit, ctx.timing);

  const int x = b.input("x", act);
  const int y1 = native_layer_norm(b, c, x, T, h, "ln_1", "ln_1");              // 1
  const int qkv = linear(b, c, y1, T, h, 3 * h, "attn.c_attn", "attn.c_attn");  // 2
  const int q = b.view("q", qkv, act), k = b.view("k", qkv, act), v = b.view("v", qkv, act);
  // split + _split_heads are views; the split's backward cats the three gradients into one.
  b.op("attn.split", {qkv}, {q, k, v});
  int attn_out;  // [b, a, s, d] before merging heads
  if (c.attention == AttentionImpl::Eager) {
    // matmul on permuted head views copies q and kᵀ; bmm saves the copies (wm §2.1).
    const int qc = b.tensor("attn.q_contig", act), kc = b.tensor("attn.k_contig", act);
    b.op("attn.copy_qk", {q, k}, {qc, kc}).alias();  // 3
    const int sc = b.tensor("attn.scores", scores);
    b.op("attn.bmm_qk", {qc, kc}, {sc}).saves({qc, kc}).matmul(2.0 * b_ * a * s * s * d);  // 4
    const int sd = b.tensor("attn.scaled", scores);
    b.op("attn.div", {sc}, {sd});  // 5
    const int sw = b.tensor("attn.causal", scores);
    b.op("attn.where", {sd}, {sw});  // 6
    const int sm = b.tensor("attn.masked", scores);
    b.op("attn.add_mask", {sw}, {sm}).alias();  // + attention_mask (HF passes it), wm §2.3 #6
    const int p = b.tensor("attn.softmax", scores);
    b.op("attn.softmax", {sm}, {p}).saves({p});                            // 7
    const int pd = dropout(b, c, p, a * s * s * b_, "attn.attn_dropout");  // 8
    const int vc = b.tensor("attn.v_contig", act);
    b.op("attn.copy_v", {v}, {vc}).alias();  // 9
    attn_out = b.tensor("attn.pv", act);
    b.op("attn.bmm_pv", {pd, vc}, {attn_out}).saves({pd, vc}).matmul(2.0 * b_ * a * s * s * d);
  } else {
    // SDPA (flash / mem-efficient): saves q, k, v (views of qkv), its output and an fp32
    // logsumexp; dropout is in-kernel; the backward keeps an fp32 dq accumulator (wm §2.3).
    attn_out = b.tensor("attn.sdpa", act);
    const int lse = b.tensor("attn.logsumexp", 4 * b_ * a * s, false);
    b.op("attn.sdpa", {q, k, v}, {attn_out, lse})
        .saves({q, k, v, attn_out, lse})
        .bwd_temp(4 * T * h)
        .matmul(2.0 * b_ * a * s * s * d);  // QKᵀ and PV, causal half
  }
  const int merged = b.tensor("attn.merged", act);
  b.op("attn.merge_heads", {attn_out}, {merged}).alias();                     // 10
  const int o = linear(b, c, merged, T, h, h, "attn.c_proj", "attn.c_proj");  // 11
  const int od = dropout(b, c, o, T * h, "attn.resid_dropout");               // 12
  b.scope(qkv, b.ops() - 1);  // query/key/value are locals of GPT2Attention.forward
  const int r1 = b.tensor("residual_1", act);
  b.op("add_1", {x, od}, {r1}).alias();                              // 13
  const int y2 = native_layer_norm(b, c, r1, T, h, "ln_2", "ln_2");  // 14
  const int u = linear(b, c, y2, T, h, f, "mlp.c_fc", "mlp.c_fc");   // 15
  const Bytes wide = e * T * f;
  int g;
  if (c.gelu == GeluImpl::Python) {
    // NewGELUActivation: 0.5 * u * (1 + tanh(sqrt(2/pi) * (u + 0.044715 * u^3))), evaluated left
    // to right; pow/mul/add temporaries die one at a time, tanh out, (1 + tanh) and 0.5u are saved.
    const int half = b.tensor("mlp.gelu.half", wide);
    b.op("mlp.gelu.mul_half", {u}, {half});
    const int cube = b.tensor("mlp.gelu.pow", wide);
    b.op("mlp.gelu.pow", {u}, {cube}).saves({u}).bwd_temp(wide);
    const int scaled = b.tensor("mlp.gelu.mul_c", wide);
    b.op("mlp.gelu.mul_c", {cube}, {scaled});
    const int inner = b.tensor("mlp.gelu.add", wide);
    b.op("mlp.gelu.add", {u, scaled}, {inner}).alias();
    const int arg = b.tensor("mlp.gelu.mul_sqrt", wide);
    b.op("mlp.gelu.mul_sqrt", {inner}, {arg});
    const int th = b.tensor("mlp.gelu.tanh", wide);
    b.op("mlp.gelu.tanh", {arg}, {th}).saves({th});
    const int onep = b.tensor("mlp.gelu.one_plus", wide);
    b.op("mlp.gelu.one_plus", {th}, {onep}).alias();
    g = b.tensor("mlp.gelu.out", wide);
    b.op("mlp.gelu.mul", {half, onep}, {g}).saves({half, onep});
  } else {
    g = b.tensor("mlp.gelu.out", wide);
    b.op("mlp.gelu", {u}, {g}).saves({u});  // F.gelu(approximate="tanh") saves its input only
  }
  const int o2 = linear(b, c, g, T, f, h, "mlp.c_proj", "mlp.c_proj");  // 17
  const int od2 = dropout(b, c, o2, T * h, "mlp.dropout");              // 18
  const int y = b.output("y", act);
  b.op("add_2", {r1, od2}, {y}).alias();  // 19
  return b.finish();
}

LayerTable gpt2_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden, s = shape.len;
  TableBuilder b("gpt2.embedding", root, ctx.timing);
  const int ids = b.input("ids", 8 * T, false);
  const int tok = b.tensor("wte.out", c.e * T * h);
  // Dense embedding backward: grad [V, h] (the weight gradient) + int64 sort/index temporaries.
  b.op("wte", {ids}, {tok}).saves({ids}).module("wte").bwd_temp(8 * T).bwd_temp(8 * T).bwd_temp(8 * T).bwd_temp(8 * T);
  const int pos_ids = b.tensor("position_ids", 8 * s, false);
  b.op("arange", {}, {pos_ids});
  const int pos = b.tensor("wpe.out", c.e * s * h);
  b.op("wpe", {pos_ids}, {pos}).saves({pos_ids}).module("wpe");
  const int sum = b.tensor("embeddings", c.e * T * h);
  b.op("add", {tok, pos}, {sum}).alias();
  const int h0 = b.output("h0", c.e * T * h);
  dropout(b, c, sum, T * h, "drop", h0);
  return b.finish();
}

LayerTable gpt2_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden, V = ctx.model.vocab;
  TableBuilder b("gpt2.head", root, ctx.timing);
  const int x = b.input("h", c.e * T * h);
  const int labels = b.input("labels", 8 * T, false);
  const int yf = native_layer_norm(b, c, x, T, h, "ln_f", "ln_f");
  const int logits = b.output("logits", c.e * T * V);
  linear(b, c, yf, T, h, V, "lm_head", "lm_head", logits);
  causal_lm_loss(b, c, logits, labels, shape.batch, shape.len, V);
  return b.finish();
}

}  // namespace fraglab::workload
