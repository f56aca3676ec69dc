// T5 v1.0 blocks, HF eager attention (T5 has no SDPA path), wm §2.4. Tq / Tkv = tokens on the
// query / key side; inner = heads · d_kv; e = activation bytes per element.
#include "workload/tables.hpp"

namespace fraglab::workload {

namespace {

struct Attention {
  std::string kind;  // "self" or "cross" (module prefix)
  int query_in;      // normed hidden states
  int kv_in;         // same tensor (self) or the encoder output (cross)
  int bias;          // [b, a, sq, skv], added in place to the scores
  std::uint64_t sq, skv;
};

// T5Attention.forward: q, k, v Linears (locals until return), contiguous copies for matmul,
// scores += position_bias in place, fp32 softmax, dropout, P·v, unshape, o. Returns o's output.
int t5_attention(TableBuilder& b, const TableContext& ctx, const TableShape& shape, const Attention& at) {
  const ModelConfig& m = ctx.model;
  const TableConfig& c = ctx.config;
  const std::uint64_t bt = shape.batch, h = m.hidden, in = m.inner(), a = m.heads, d = m.head_dim;
  const std::uint64_t tq = bt * at.sq, tkv = bt * at.skv, s2 = a * at.sq * at.skv * bt;
  const Bytes e = c.e;
  const std::string p = at.kind + ".";
  const int q = linear(b, c, at.query_in, tq, h, in, at.kind + ".q", p + "q");
  const int k = linear(b, c, at.kv_in, tkv, h, in, at.kind + ".k", p + "k");
  const int v = linear(b, c, at.kv_in, tkv, h, in, at.kind + ".v", p + "v");
  const int qc = b.tensor(p + "q_contig", e * tq * in), kc = b.tensor(p + "k_contig", e * tkv * in);
  b.op(p + "copy_qk", {q, k}, {qc, kc}).alias();
  const int sc = b.tensor(p + "scores", e * s2);
  b.op(p + "bmm_qk", {qc, kc}, {sc}).saves({qc, kc}).matmul(2.0 * s2 * d);
  const int sb = b.view(p + "scores_biased", sc, e * s2);
  b.op(p + "add_bias_", {sc, at.bias}, {sb}).alias();  // in place: no allocation
  int sm_in = sb;
  if (e != 4) {
    sm_in = b.tensor(p + "scores_fp32", 4 * s2);
    b.op(p + "scores.float", {sb}, {sm_in});
  }
  const int pr = b.tensor(p + "softmax", 4 * s2);
  b.op(p + "softmax", {sm_in}, {pr}).saves({pr});
  int drop_in = pr;
  if (e != 4) {
    drop_in = b.tensor(p + "softmax.type_as", e * s2);
    b.op(p + "type_as", {pr}, {drop_in});
  }
  const int pd = dropout(b, c, drop_in, s2, p + "attn_dropout");
  const int vc = b.tensor(p + "v_contig", e * tkv * in);
  b.op(p + "copy_v", {v}, {vc}).alias();
  const int pv = b.tensor(p + "pv", e * tq * in);
  b.op(p + "bmm_pv", {pd, vc}, {pv}).saves({pd, vc}).matmul(2.0 * s2 * d);
  const int un = b.tensor(p + "unshape", e * tq * in);
  b.op(p + "unshape", {pv}, {un}).alias();
  const int o = linear(b, c, un, tq, in, h, at.kind + ".o", p + "o");
  for (int t : {q, k, v}) b.scope(t, b.ops() - 1);
  return o;
}

// compute_bias (wm §2.4): int64 relative positions and buckets [sq, skv] (the bucket matrix is
// saved by the embedding lookup), values [sq, skv, a] permuted to [1, a, sq, skv], plus the
// extended mask → [b, a, sq, skv].
int relative_bias(TableBuilder& b, const TableContext& ctx, std::uint64_t sq, std::uint64_t skv, int mask, int out,
                  const std::string& kind) {
  const std::uint64_t a = ctx.model.heads, n = sq * skv;
  const Bytes e = ctx.config.e;
  const int bucket = b.tensor(kind + ".bucket", 8 * n, false);
  // _relative_position_bucket: relative_position, abs/min, is_small, float log chain, where —
  // about three [sq, skv] temporaries alive at once.
  b.op(kind + ".relative_position_bucket", {}, {bucket}).fwd_temp(8 * n).fwd_temp(8 * n).fwd_temp(4 * n);
  const int values = b.tensor(kind + ".bias_values", e * n * a);
  b.op(kind + ".relative_attention_bias", {bucket}, {values})
      .saves({bucket})
      .module(kind + ".relative_attention_bias")
      .bwd_temp(8 * n)
      .bwd_temp(8 * n);
  b.op(kind + ".add_mask", {values, mask}, {out});  // broadcast over b: its backward sums into values
  return out;
}

}  // namespace

LayerTable t5_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape, bool decoder, bool first) {
  const ModelConfig& m = ctx.model;
  const TableConfig& c = ctx.config;
  const std::uint64_t bt = shape.batch, h = m.hidden, f = m.ffn, a = m.heads;
  const std::uint64_t s = shape.len, se = shape.kv_len, T = bt * s;
  const Bytes e = c.e;
  TableBuilder b(decoder ? "t5.decoder_block" : "t5.encoder_block", unit, ctx.timing);
  const int x = b.input("x", e * T * h);
  const int enc_out = decoder ? b.input("enc_out", e * bt * se * h) : -1;
  int self_bias, cross_bias = -1;
  if (first) {
    const int self_mask = b.input("self_mask", e * bt * (decoder ? s : 1) * s, false);
    self_bias = b.output("self_bias", e * bt * a * s * s);
    relative_bias(b, ctx, s, s, self_mask, self_bias, "self");
    if (decoder) {
      // No relative bias for cross-attention: zeros [1, a, s_d, s_e] + mask. Under gradient
      // checkpointing HF sets requires_grad on the zeros so the bias gets a gradient (wm §2.4).
      const int cross_mask = b.input("cross_mask", e * bt * se, false);
      const int zeros = b.tensor("cross.bias_zeros", e * a * s * se, c.checkpointing);
      b.op("cross.zeros", {}, {zeros});
      cross_bias = b.output("cross_bias", e * bt * a * s * se);
      b.op("cross.add_mask", {zeros, cross_mask}, {cross_bias});
    }
  } else {
    self_bias = b.input("self_bias", e * bt * a * s * s);
    if (decoder) cross_bias = b.input("cross_bias", e * bt * a * s * se, c.checkpointing);
  }
  // layer[0]: T5LayerSelfAttention
  const int n0 = rms_norm(b, c, x, T, h, "ln_self", "ln_self");
  const int o0 = t5_attention(b, ctx, shape, {"self", n0, n0, self_bias, s, s});
  const int d0 = dropout(b, c, o0, T * h, "self.dropout");
  int hidden = b.tensor("residual_self", e * T * h);
  b.op("add_self", {x, d0}, {hidden}).alias();
  if (decoder) {
    // layer[1]: T5LayerCrossAttention, keys and values from the encoder output (s_e)
    const int n1 = rms_norm(b, c, hidden, T, h, "ln_cross", "ln_cross");
    const int o1 = t5_attention(b, ctx, shape, {"cross", n1, enc_out, cross_bias, s, se});
    const int d1 = dropout(b, c, o1, T * h, "cross.dropout");
    const int r = b.tensor("residual_cross", e * T * h);
    b.op("add_cross", {hidden, d1}, {r}).alias();
    hidden = r;
  }
  // last layer: T5LayerFF with DenseReluDense (wi, ReLU, dropout, wo)
  const int n2 = rms_norm(b, c, hidden, T, h, "ln_ffn", "ln_ffn");
  const int wi = linear(b, c, n2, T, h, f, "ffn.wi", "ffn.wi");
  const int relu = b.tensor("ffn.relu", e * T * f);
  b.op("ffn.relu", {wi}, {relu}).saves({relu});
  const int drop = dropout(b, c, relu, T * f, "ffn.dropout");
  const int wo = linear(b, c, drop, T, f, h, "ffn.wo", "ffn.wo");
  const int d2 = dropout(b, c, wo, T * h, "ffn.out_dropout");
  const int y = b.output("y", e * T * h);
  b.op("add_ffn", {hidden, d2}, {y}).alias();
  return b.finish();
}

LayerTable t5_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape, bool decoder) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden;
  TableBuilder b(decoder ? "t5.decoder_embedding" : "t5.encoder_embedding", root, ctx.timing);
  int ids = b.input("ids", 8 * T, false);
  if (decoder) {
    // _shift_right(labels): new_zeros + copy + masked_fill_, a local of the model's forward.
    const int shifted = b.tensor("decoder_input_ids", 8 * T, false);
    b.op("shift_right", {ids}, {shifted});
    ids = shifted;
  }
  const int emb = b.tensor("embed.out", c.e * T * h);
  b.op("shared", {ids}, {emb})
      .saves({ids})
      .module("shared")
      .bwd_temp(8 * T)
      .bwd_temp(8 * T)
      .bwd_temp(8 * T)
      .bwd_temp(8 * T);
  const int h0 = b.output("h0", c.e * T * h);
  dropout(b, c, emb, T * h, "dropout", h0);
  return b.finish();
}

LayerTable t5_encoder_final(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden;
  TableBuilder b("t5.encoder_final", root, ctx.timing);
  const int x = b.input("h", c.e * T * h);
  const int n = rms_norm(b, c, x, T, h, "encoder.final_layer_norm", "encoder.final_layer_norm");
  const int out = b.output("enc_out", c.e * T * h);
  dropout(b, c, n, T * h, "encoder.dropout", out);
  return b.finish();
}

LayerTable t5_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape) {
  const TableConfig& c = ctx.config;
  const std::uint64_t T = shape.tokens(), h = ctx.model.hidden, V = ctx.model.vocab;
  TableBuilder b("t5.head", root, ctx.timing);
  const int x = b.input("h", c.e * T * h);
  const int labels = b.input("labels", 8 * T, false);
  const int n = rms_norm(b, c, x, T, h, "decoder.final_layer_norm", "decoder.final_layer_norm");
  const int dr = dropout(b, c, n, T * h, "decoder.dropout");
  // Tied embeddings: sequence_output * d_model^-0.5 before lm_head (a scalar mul saves nothing).
  int head_in = dr;
  if (ctx.model.tied_embeddings) {
    head_in = b.tensor("rescaled", c.e * T * h);
    b.op("rescale", {dr}, {head_in});
  }
  const int logits = b.output("logits", c.e * T * V);
  linear(b, c, head_in, T, h, V, "lm_head", "lm_head", logits);
  // CrossEntropyLoss directly on the model-dtype logits (no upcast): log_softmax saved.
  const int lsm = b.tensor("log_softmax", c.e * T * V);
  b.op("log_softmax", {logits}, {lsm}).saves({lsm});
  const int loss = b.output("loss", 4);
  b.op("nll_loss", {lsm, labels}, {loss}).saves({labels});
  return b.finish();
}

LayerTable t5_masks(const TableContext& ctx, const UnitDef& root, const TableShape& shape, bool decoder) {
  const Bytes e = ctx.config.e;
  const std::uint64_t bt = shape.batch, s = shape.len, se = shape.kv_len;
  TableBuilder b(decoder ? "t5.decoder_masks" : "t5.encoder_masks", root, ctx.timing);
  if (!decoder) {
    // get_extended_attention_mask: mask[:, None, None, :] → (1 - m) * min, in the model dtype.
    const int cast = b.tensor("mask_cast", e * bt * s, false);
    b.op("mask.to", {}, {cast});
    const int out = b.output("self_mask", e * bt * s);
    b.op("mask.invert", {cast}, {out});
  } else {
    // Causal: seq_ids.repeat(b, s, 1) <= seq_ids[None, :, None] (bool), cast, times the padding
    // mask, then (1 - m) * min → [b, 1, s_d, s_d] in the model dtype.
    const std::uint64_t n = bt * s * s;
    const int causal = b.tensor("causal_bool", n, false);
    b.op("causal", {}, {causal}).fwd_temp(8 * n);
    const int cast = b.tensor("causal_cast", e * n, false);
    b.op("causal.to", {causal}, {cast});
    const int prod = b.tensor("causal_masked", e * n, false);
    b.op("causal.mul_mask", {cast}, {prod});
    const int out = b.output("self_mask", e * n);
    b.op("causal.invert", {prod}, {out});
    const int ccast = b.tensor("cross_mask_cast", e * bt * se, false);
    b.op("cross_mask.to", {}, {ccast});
    const int cross = b.output("cross_mask", e * bt * se);
    b.op("cross_mask.invert", {ccast}, {cross});
  }
  return b.finish();
}

}  // namespace fraglab::workload
