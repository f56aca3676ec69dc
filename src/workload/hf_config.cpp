// A Hugging Face config.json as a ModelConfig: the file users have for their model. The
// architecture picks the family; each shape comes from the first of its HF spellings present
// (GPT2 n_*, Llama *_size / num_*, T5 d_* / num_*). Other keys are ignored: HF configs carry
// dozens (dropout rates, token ids, ...) that do not change memory.
#include "workload/hf_config.hpp"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <initializer_list>
#include <optional>

namespace fraglab::workload {

namespace {

struct Architecture {
  std::string_view hf_name;     // config.json "architectures" entry
  std::string_view model_type;  // config.json "model_type"
  ModelFamily family;
};

constexpr std::array<Architecture, 4> kArchitectures{{
    {"GPT2LMHeadModel", "gpt2", ModelFamily::Gpt2},
    {"T5ForConditionalGeneration", "t5", ModelFamily::T5},
    {"T5WithLMHeadModel", "t5", ModelFamily::T5},  // the older name the original t5-* configs carry
    {"LlamaForCausalLM", "llama", ModelFamily::Llama},
}};

std::string supported_list() {
  std::string s;
  for (const Architecture& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.hf_name);
  return s;
}

class HfReader {
 public:
  HfReader(const nlohmann::json& j, std::string_view origin, std::string_view arch)
      : j_(j), origin_(origin), arch_(arch) {}

  // The first of `keys` present (null counts as absent, as HF's n_inner: null does), at most
  // `max` (ModelLimits): a larger value is refused naming the key.
  std::optional<std::uint64_t> find(std::initializer_list<std::string_view> keys, std::uint64_t max) const {
    for (std::string_view key : keys) {
      const auto it = j_.find(std::string(key));
      if (it == j_.end() || it->is_null()) continue;
      if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0))
        throw InputError(fmt::format("{}: '{}' must be a non-negative integer", origin_, key));
      const std::uint64_t v = it->get<std::uint64_t>();
      if (v > max) throw InputError(fmt::format("{}: '{}' = {}: expected 0..{}", origin_, key, v, max));
      return v;
    }
    return std::nullopt;
  }
  std::uint64_t need(std::initializer_list<std::string_view> keys, std::uint64_t max) const {
    if (auto v = find(keys, max)) return *v;
    std::string names;
    for (std::string_view key : keys) names += (names.empty() ? "'" : "' or '") + std::string(key);
    throw InputError(fmt::format("{}: {} config has no {}'", origin_, arch_, names));
  }
  bool flag(std::string_view key, bool fallback) const {
    const auto it = j_.find(std::string(key));
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw InputError(fmt::format("{}: '{}' must be true or false", origin_, key));
    return it->get<bool>();
  }
  std::string text(std::string_view key) const {
    const auto it = j_.find(std::string(key));
    return it != j_.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

 private:
  const nlohmann::json& j_;
  std::string_view origin_;
  std::string_view arch_;
};

// HF configs rarely name the model: "_name_or_path" if set, else the folder of a config.json
// (models/Llama-3-8B/config.json -> "Llama-3-8B"), else the file's stem.
std::string model_name(const HfReader& r, std::string_view origin) {
  const std::filesystem::path from_hf(r.text("_name_or_path"));
  if (!from_hf.empty() && !from_hf.filename().empty()) return from_hf.filename().string();
  const std::filesystem::path path(origin);
  if (path.filename() == "config.json" && !path.parent_path().filename().empty())
    return path.parent_path().filename().string();
  return path.stem().string();
}

}  // namespace

bool is_hf_config(const nlohmann::json& j) { return j.contains("architectures") || j.contains("model_type"); }

ModelConfig parse_hf_config(const nlohmann::json& j, std::string_view origin) {
  // The family: "architectures" (what from_pretrained instantiates), else "model_type".
  const Architecture* arch = nullptr;
  if (const auto it = j.find("architectures"); it != j.end()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string())
      throw InputError(fmt::format("{}: 'architectures' must be a list of class names", origin));
    const std::string name = (*it)[0].get<std::string>();
    for (const Architecture& a : kArchitectures)
      if (a.hf_name == name) arch = &a;
    if (arch == nullptr || it->size() != 1)
      throw InputError(
          fmt::format("{}: architectures {}: the workload model covers only {}", origin, it->dump(), supported_list()));
  } else {
    const auto type_it = j.find("model_type");
    const std::string type = type_it != j.end() && type_it->is_string() ? type_it->get<std::string>() : "";
    for (const Architecture& a : kArchitectures)
      if (a.model_type == type) arch = &a;
    if (arch == nullptr)
      throw InputError(fmt::format("{}: model_type '{}': the workload model covers only gpt2, t5, llama ({})", origin,
                                   type, supported_list()));
  }
  const HfReader r(j, origin, arch->hf_name);

  ModelConfig m;
  m.name = model_name(r, origin);
  m.family = arch->family;
  switch (arch->family) {
    case ModelFamily::Gpt2:
      m.layers = static_cast<std::uint32_t>(r.need({"n_layer", "num_hidden_layers"}, ModelLimits::kLayers));
      m.hidden = r.need({"n_embd", "hidden_size"}, ModelLimits::kHidden);
      m.heads = r.need({"n_head", "num_attention_heads"}, ModelLimits::kHeads);
      m.ffn =
          r.find({"n_inner", "intermediate_size"}, ModelLimits::kFfn).value_or(4 * m.hidden);  // GPT2MLP: 4h when null
      m.max_positions = r.need({"n_positions", "max_position_embeddings", "n_ctx"}, ModelLimits::kPositions);
      m.tied_embeddings = r.flag("tie_word_embeddings", true);
      break;
    case ModelFamily::Llama:
      m.layers = static_cast<std::uint32_t>(r.need({"num_hidden_layers", "n_layer"}, ModelLimits::kLayers));
      m.hidden = r.need({"hidden_size", "n_embd"}, ModelLimits::kHidden);
      m.heads = r.need({"num_attention_heads", "n_head"}, ModelLimits::kHeads);
      m.ffn = r.need({"intermediate_size"}, ModelLimits::kFfn);
      m.max_positions = r.find({"max_position_embeddings"}, ModelLimits::kPositions).value_or(0);
      m.tied_embeddings = r.flag("tie_word_embeddings", false);  // LlamaConfig's default
      // The tables have no bias tensors (wm §2.5): a biased variant would be silently wrong.
      for (const char* key : {"attention_bias", "mlp_bias"})
        if (r.flag(key, false))
          throw InputError(fmt::format(
              "{}: '{}': true is not modelled (llama has no biases, docs/workload-model.md §2.5)", origin, key));
      break;
    case ModelFamily::T5: {
      m.layers = static_cast<std::uint32_t>(r.need({"num_layers", "num_hidden_layers"}, ModelLimits::kLayers));
      m.decoder_layers =
          static_cast<std::uint32_t>(r.find({"num_decoder_layers"}, ModelLimits::kLayers).value_or(m.layers));
      m.hidden = r.need({"d_model", "hidden_size"}, ModelLimits::kHidden);
      m.heads = r.need({"num_heads", "num_attention_heads"}, ModelLimits::kHeads);
      m.ffn = r.need({"d_ff", "intermediate_size"}, ModelLimits::kFfn);
      m.max_positions = 0;  // relative position buckets: no length limit
      m.tied_embeddings = r.flag("tie_word_embeddings", true);
      m.relative_attention_buckets = static_cast<std::uint32_t>(
          r.find({"relative_attention_num_buckets"}, ModelLimits::kRelativeBuckets).value_or(32));
      // v1.1 / Flan-T5 use a gated-GELU FFN (three matrices, untied head): not the v1.0 tables.
      const std::string proj = r.text("feed_forward_proj");
      if (!proj.empty() && proj != "relu")
        throw InputError(
            fmt::format("{}: feed_forward_proj '{}': only 'relu' (T5 v1.0) is modelled, not v1.1 / Flan-T5 "
                        "(docs/workload-model.md §2.4)",
                        origin, proj));
      break;
    }
  }
  m.vocab = r.need({"vocab_size"}, ModelLimits::kVocab);
  m.kv_heads = r.find({"num_key_value_heads"}, ModelLimits::kHeads).value_or(m.heads);
  if (m.heads != 0) m.head_dim = r.find({"head_dim", "d_kv"}, ModelLimits::kHeadDim).value_or(m.hidden / m.heads);
  return m;
}

}  // namespace fraglab::workload
