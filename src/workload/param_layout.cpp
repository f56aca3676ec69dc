// Parameter layout per model family (wm §1.1-§1.3). The shapes are HF's; counts follow from them.
#include "workload/param_layout.hpp"

#include <stdexcept>

namespace fraglab::workload {

std::uint64_t UnitDef::numel() const {
  std::uint64_t n = 0;
  for (const ParamDef& p : params) n += p.numel();
  return n;
}

int UnitDef::module(std::string_view wanted) const {
  for (std::size_t i = 0; i < modules.size(); ++i)
    if (modules[i].name == wanted) return static_cast<int>(i);
  throw std::logic_error("unit " + name + " has no module " + std::string(wanted));
}

std::uint64_t ModelLayout::numel() const {
  std::uint64_t n = 0;
  for (const UnitDef& u : units) n += u.numel();
  return n;
}

namespace {

// Adds a leaf module owning the given new parameters.
void add_module(UnitDef& unit, std::string name, std::vector<ParamDef> params) {
  ModuleDef m{std::move(name), {}};
  for (ParamDef& p : params) {
    m.params.push_back(static_cast<int>(unit.params.size()));
    unit.params.push_back(std::move(p));
  }
  unit.modules.push_back(std::move(m));
}

// A module that reuses an existing parameter (tied lm_head).
void add_tied_module(UnitDef& unit, std::string name, int param) {
  unit.modules.push_back(ModuleDef{std::move(name), {param}});
}

// ---- GPT2 (wm §1.1): Conv1D weights are stored [in, out] ----
UnitDef gpt2_block(const ModelConfig& m, std::uint32_t i) {
  const std::uint64_t h = m.hidden, in = m.inner(), f = m.ffn;
  UnitDef u{"h." + std::to_string(i), {}, {}};
  add_module(u, "ln_1", {{"ln_1.weight", h}, {"ln_1.bias", h}});
  add_module(u, "attn.c_attn", {{"attn.c_attn.weight", h, 3 * in}, {"attn.c_attn.bias", 3 * in}});
  add_module(u, "attn.c_proj", {{"attn.c_proj.weight", in, h}, {"attn.c_proj.bias", h}});
  add_module(u, "ln_2", {{"ln_2.weight", h}, {"ln_2.bias", h}});
  add_module(u, "mlp.c_fc", {{"mlp.c_fc.weight", h, f}, {"mlp.c_fc.bias", f}});
  add_module(u, "mlp.c_proj", {{"mlp.c_proj.weight", f, h}, {"mlp.c_proj.bias", h}});
  return u;
}

UnitDef gpt2_root(const ModelConfig& m) {
  UnitDef u{"root", {}, {}};
  add_module(u, "wte", {{"wte.weight", m.vocab, m.hidden}});
  add_module(u, "wpe", {{"wpe.weight", m.max_positions, m.hidden}});
  add_module(u, "ln_f", {{"ln_f.weight", m.hidden}, {"ln_f.bias", m.hidden}});
  if (m.tied_embeddings)
    add_tied_module(u, "lm_head", 0);
  else
    add_module(u, "lm_head", {{"lm_head.weight", m.vocab, m.hidden}});
  return u;
}

// ---- T5 v1.0 (wm §1.2): bias-free Linears [out, in], RMS LayerNorm weight only ----
void t5_attention(UnitDef& u, const ModelConfig& m, const std::string& kind, bool relative_bias) {
  const std::uint64_t h = m.hidden, in = m.inner();
  add_module(u, kind + ".q", {{kind + ".q.weight", in, h}});
  add_module(u, kind + ".k", {{kind + ".k.weight", in, h}});
  add_module(u, kind + ".v", {{kind + ".v.weight", in, h}});
  add_module(u, kind + ".o", {{kind + ".o.weight", h, in}});
  if (relative_bias)
    add_module(u, kind + ".relative_attention_bias",
               {{kind + ".relative_attention_bias.weight", m.relative_attention_buckets, m.heads}});
}

UnitDef t5_block(const ModelConfig& m, bool decoder, std::uint32_t i) {
  const std::uint64_t h = m.hidden, f = m.ffn;
  UnitDef u{std::string(decoder ? "decoder" : "encoder") + ".block." + std::to_string(i), {}, {}};
  t5_attention(u, m, "self", i == 0);
  add_module(u, "ln_self", {{"ln_self.weight", h}});
  if (decoder) {
    t5_attention(u, m, "cross", false);
    add_module(u, "ln_cross", {{"ln_cross.weight", h}});
  }
  add_module(u, "ffn.wi", {{"ffn.wi.weight", f, h}});
  add_module(u, "ffn.wo", {{"ffn.wo.weight", h, f}});
  add_module(u, "ln_ffn", {{"ln_ffn.weight", h}});
  return u;
}

UnitDef t5_root(const ModelConfig& m) {
  UnitDef u{"root", {}, {}};
  add_module(u, "shared", {{"shared.weight", m.vocab, m.hidden}});
  add_module(u, "encoder.final_layer_norm", {{"encoder.final_layer_norm.weight", m.hidden}});
  add_module(u, "decoder.final_layer_norm", {{"decoder.final_layer_norm.weight", m.hidden}});
  if (m.tied_embeddings)
    add_tied_module(u, "lm_head", 0);
  else
    add_module(u, "lm_head", {{"lm_head.weight", m.vocab, m.hidden}});
  return u;
}

// ---- Llama (wm §1.3): bias-free, RMSNorm, SwiGLU, grouped-query k/v ----
UnitDef llama_block(const ModelConfig& m, std::uint32_t i) {
  const std::uint64_t h = m.hidden, f = m.ffn;
  UnitDef u{"layers." + std::to_string(i), {}, {}};
  add_module(u, "input_layernorm", {{"input_layernorm.weight", h}});
  add_module(u, "q_proj", {{"q_proj.weight", m.inner(), h}});
  add_module(u, "k_proj", {{"k_proj.weight", m.kv_inner(), h}});
  add_module(u, "v_proj", {{"v_proj.weight", m.kv_inner(), h}});
  add_module(u, "o_proj", {{"o_proj.weight", h, m.inner()}});
  add_module(u, "post_attention_layernorm", {{"post_attention_layernorm.weight", h}});
  add_module(u, "gate_proj", {{"gate_proj.weight", f, h}});
  add_module(u, "up_proj", {{"up_proj.weight", f, h}});
  add_module(u, "down_proj", {{"down_proj.weight", h, f}});
  return u;
}

UnitDef llama_root(const ModelConfig& m) {
  UnitDef u{"root", {}, {}};
  add_module(u, "embed_tokens", {{"embed_tokens.weight", m.vocab, m.hidden}});
  add_module(u, "norm", {{"norm.weight", m.hidden}});
  if (m.tied_embeddings)
    add_tied_module(u, "lm_head", 0);
  else
    add_module(u, "lm_head", {{"lm_head.weight", m.vocab, m.hidden}});
  return u;
}

}  // namespace

ModelLayout build_layout(const ModelConfig& m) {
  ModelLayout layout;
  switch (m.family) {
    case ModelFamily::Gpt2:
      layout.units.push_back(gpt2_root(m));
      for (std::uint32_t i = 0; i < m.layers; ++i) layout.units.push_back(gpt2_block(m, i));
      layout.encoder_blocks = m.layers;
      break;
    case ModelFamily::T5:
      layout.units.push_back(t5_root(m));
      for (std::uint32_t i = 0; i < m.layers; ++i) layout.units.push_back(t5_block(m, false, i));
      for (std::uint32_t i = 0; i < m.decoder_layers; ++i) layout.units.push_back(t5_block(m, true, i));
      layout.encoder_blocks = m.layers;
      layout.decoder_blocks = m.decoder_layers;
      break;
    case ModelFamily::Llama:
      layout.units.push_back(llama_root(m));
      for (std::uint32_t i = 0; i < m.layers; ++i) layout.units.push_back(llama_block(m, i));
      layout.encoder_blocks = m.layers;
      break;
  }
  return layout;
}

}  // namespace fraglab::workload
