// Llama decoder layer, HF SDPA path (flash), bf16, wm §2.5. RoPE's cos/sin ([s, d], shared by all
// layers) are too small to matter and are left out.
#include "workload/tables.hpp"

namespace fraglab::workload {

namespace {

// apply_rotary_pos_emb on one of q / k: q·cos + rotate_half(q)·sin. rotate_half cats a negated
// half; every intermediate is transient, only the result is saved (by SDPA).
int rope(TableBuilder& b, int x, Bytes bytes, const std::string& name) {
  const int out = b.tensor(name, bytes);
  b.op(name, {x}, {out})
      .fwd_temp(bytes)
      .fwd_temp(bytes / 2)
      .fwd_temp(bytes)
      .fwd_temp(bytes)
      .bwd_temp(bytes)
      .bwd_temp(bytes);
  return out;
}

}  // namespace

LayerTable llama_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape) {
  const ModelConfig& m = ctx.model;
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = m.hidden, f = m.ffn, a = m.heads, d = m.head_dim;
  const std::uint64_t in = m.inner(), kv = m.kv_inner(), s = shape.len, bt = shape.batch;
  const Bytes e = c.e;
  TableBuilder b("llama.block", unit, ctx.timing);
  const int x = b.input("x", e * T * h);
  const int n0 = rms_norm(b, c, x, T, h, "input_layernorm", "input_layernorm");
  const int q = linear(b, c, n0, T, h, in, "q_proj", "q_proj");
  const int k = linear(b, c, n0, T, h, kv, "k_proj", "k_proj");
  const int v = linear(b, c, n0, T, h, kv, "v_proj", "v_proj");
  const int qr = rope(b, q, e * T * in, "q_rope");
  int kr = rope(b, k, e * T * kv, "k_rope");
  int vr = v;
  if (kv != in) {
    // repeat_kv: expand + reshape copies k and v to all query heads; SDPA saves the copies.
    const int kx = b.tensor("k_repeat", e * T * in), vx = b.tensor("v_repeat", e * T * in);
    b.op("repeat_k", {kr}, {kx});
    b.op("repeat_v", {v}, {vx});
    kr = kx;
    vr = vx;
  }
  const int ao = b.tensor("sdpa", e * T * in);
  const int lse = b.tensor("logsumexp", 4 * bt * a * s, false);
  b.op("sdpa", {qr, kr, vr}, {ao, lse})
      .saves({qr, kr, vr, ao, lse})
      .bwd_temp(4 * T * in)
      .matmul(2.0 * bt * a * s * s * d);  // QKᵀ and PV with the causal half skipped
  const int merged = b.tensor("attn_output", e * T * in);
  b.op("transpose_contiguous", {ao}, {merged}).alias();
  const int o = linear(b, c, merged, T, in, h, "o_proj", "o_proj");
  for (int t : {q, k, v}) b.scope(t, b.ops() - 1);
  const int r = b.tensor("residual", e * T * h);
  b.op("add_attn", {x, o}, {r}).alias();
  const int n1 = rms_norm(b, c, r, T, h, "post_attention_layernorm", "post_attention_layernorm");
  const int gate = linear(b, c, n1, T, h, f, "gate_proj", "gate_proj");
  const int up = linear(b, c, n1, T, h, f, "up_proj", "up_proj");
  const int act = b.tensor("silu", e * T * f);
  b.op("silu", {gate}, {act}).saves({gate});
  const int prod = b.tensor("gate_up", e * T * f);
  b.op("mul", {act, up}, {prod}).saves({act, up});
  const int down = linear(b, c, prod, T, f, h, "down_proj", "down_proj");
  const int y = b.output("y", e * T * h);
  b.op("add_mlp", {r, down}, {y}).alias();
  return b.finish();
}

LayerTable llama_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden;
  TableBuilder b("llama.embedding", root, ctx.timing);
  const int ids = b.input("ids", 8 * T, false);
  const int h0 = b.output("h0", c.e * T * h);
  b.op("embed_tokens", {ids}, {h0})
      .saves({ids})
      .module("embed_tokens")
      .bwd_temp(8 * T)
      .bwd_temp(8 * T)
      .bwd_temp(8 * T)
      .bwd_temp(8 * T);
  return b.finish();
}

LayerTable llama_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden, V = ctx.model.vocab;
  TableBuilder b("llama.head", root, ctx.timing);
  const int x = b.input("h", c.e * T * h);
  const int labels = b.input("labels", 8 * T, false);
  const int n = rms_norm(b, c, x, T, h, "norm", "norm");
  const int logits = b.output("logits", c.e * T * V);
  linear(b, c, n, T, h, V, "lm_head", "lm_head", logits);
  causal_lm_loss(b, c, logits, labels, shape.batch, shape.len, V);
  return b.finish();
}

}  // namespace fraglab::workload
