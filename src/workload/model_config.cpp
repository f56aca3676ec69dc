// Model shapes: the built-in models of wm §1 and the small JSON description of traces/models/.
//
// JSON keys (all integers unless noted; unknown keys are errors so a typo is never a default):
//   name (string), family ("gpt2" | "t5" | "llama"),
//   layers (decoder-only) or encoder_layers + decoder_layers (t5),
//   hidden, heads, kv_heads [= heads], head_dim [= hidden / heads], ffn, vocab,
//   max_positions [gpt2: required; others 0 = no limit], tied_embeddings (bool) [true],
//   relative_attention_buckets [32] (t5).
// A Hugging Face config.json (it has "architectures" or "model_type") is read by hf_config.cpp
// instead, where unknown keys are ignored.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fraglab/input_file.hpp"
#include "fraglab/workload.hpp"
#include "workload/hf_config.hpp"
#include "workload/param_layout.hpp"

namespace fraglab {

namespace {

ModelConfig make(std::string name, ModelFamily family, std::uint32_t layers, std::uint32_t decoder_layers,
                 std::uint64_t hidden, std::uint64_t heads, std::uint64_t kv_heads, std::uint64_t head_dim,
                 std::uint64_t ffn, std::uint64_t vocab, std::uint64_t max_positions, bool tied) {
  ModelConfig m;
  m.name = std::move(name);
  m.family = family;
  m.layers = layers;
  m.decoder_layers = decoder_layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.ffn = ffn;
  m.vocab = vocab;
  m.max_positions = max_positions;
  m.tied_embeddings = tied;
  return m;
}

// HF configs: gpt2-xl, t5-3b, Llama-2-7b-hf, Meta-Llama-3-8B (wm §1.1-§1.3).
std::vector<ModelConfig> builtins() {
  return {
      make("gpt2-xl", ModelFamily::Gpt2, 48, 0, 1600, 25, 25, 64, 6400, 50257, 1024, true),
      make("t5-3b", ModelFamily::T5, 24, 24, 1024, 32, 32, 128, 16384, 32128, 0, true),
      make("llama2-7b", ModelFamily::Llama, 32, 0, 4096, 32, 32, 128, 11008, 32000, 4096, false),
      make("llama3-8b", ModelFamily::Llama, 32, 0, 4096, 32, 8, 128, 14336, 128256, 8192, false),
  };
}

void check_model(const ModelConfig& m, std::string_view origin) {
  auto fail = [&](std::string_view what) { throw InputError(fmt::format("{}: model '{}': {}", origin, m.name, what)); };
  if (m.layers == 0) fail("needs at least one layer");
  if (m.encoder_decoder() && m.decoder_layers == 0) fail("a t5 model needs decoder_layers >= 1");
  if (!m.encoder_decoder() && m.decoder_layers != 0) fail("decoder_layers is only for t5 models");
  if (m.hidden == 0 || m.heads == 0 || m.head_dim == 0 || m.ffn == 0 || m.vocab == 0)
    fail("hidden, heads, head_dim, ffn and vocab must be positive");
  if (m.kv_heads == 0 || m.heads % m.kv_heads != 0) fail("kv_heads must divide heads");
  if (m.family != ModelFamily::Llama && m.kv_heads != m.heads) fail("kv_heads != heads needs the llama family");
  if (m.family == ModelFamily::Gpt2 && m.inner() != m.hidden) fail("gpt2 needs heads * head_dim == hidden");
  if (m.family == ModelFamily::Gpt2 && m.max_positions == 0) fail("gpt2 needs max_positions (wpe rows)");
  if (m.family == ModelFamily::T5 && m.relative_attention_buckets == 0)
    fail("relative_attention_buckets must be positive");
}

}  // namespace

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const ModelConfig& m : builtins()) names.push_back(m.name);
  return names;
}

ModelConfig builtin_model(std::string_view name) {
  for (ModelConfig& m : builtins())
    if (m.name == name) return m;
  throw InputError(fmt::format("--model '{}': expected one of {} or a path to a model .json file", name,
                               fmt::join(builtin_model_names(), ", ")));
}

ModelConfig parse_model_json(std::string_view text, std::string_view origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const JsonErrorAt at = locate_json_error(text, e.byte, e.what());
    throw InputError(
        fmt::format("{}:{}:{}: not valid JSON ({}); expected a model .json file or a Hugging Face "
                    "config.json",
                    origin, at.line, at.column, at.what));
  } catch (const nlohmann::json::exception&) {
    throw InputError(
        fmt::format("{}: not valid JSON; expected a model .json file or a Hugging Face config.json", origin));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", origin));
  if (workload::is_hf_config(j)) {
    ModelConfig hf = workload::parse_hf_config(j, origin);
    check_model(hf, origin);
    return hf;
  }
  ModelConfig m;
  bool has_family = false, has_layers = false, has_heads = false, has_kv = false, has_head_dim = false;
  for (const auto& item : j.items()) {
    // Named, not structured, bindings: clang 14 (so clang-tidy 14) cannot capture those in lambdas.
    const auto& key = item.key();
    const auto& value = item.value();
    auto integer = [&]() -> std::uint64_t {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
        throw InputError(fmt::format("{}: '{}' must be a non-negative integer", origin, key));
      return value.get<std::uint64_t>();
    };
    // Every dimension has its range (ModelLimits): a value past it is refused here, naming it.
    auto ranged = [&](std::uint64_t max) -> std::uint64_t {
      const std::uint64_t v = integer();
      if (v > max) throw InputError(fmt::format("{}: '{}' = {}: expected 0..{}", origin, key, v, max));
      return v;
    };
    auto count32 = [&]() -> std::uint32_t { return static_cast<std::uint32_t>(ranged(ModelLimits::kLayers)); };
    if (key == "name") {
      if (!value.is_string()) throw InputError(fmt::format("{}: 'name' must be a string", origin));
      m.name = value.get<std::string>();
    } else if (key == "family") {
      const std::string f = value.is_string() ? value.get<std::string>() : "";
      if (f == "gpt2")
        m.family = ModelFamily::Gpt2;
      else if (f == "t5")
        m.family = ModelFamily::T5;
      else if (f == "llama")
        m.family = ModelFamily::Llama;
      else
        throw InputError(fmt::format("{}: 'family' must be one of gpt2, t5, llama", origin));
      has_family = true;
    } else if (key == "layers" || key == "encoder_layers") {
      m.layers = count32();
      has_layers = true;
    } else if (key == "decoder_layers") {
      m.decoder_layers = count32();
    } else if (key == "hidden") {
      m.hidden = ranged(ModelLimits::kHidden);
    } else if (key == "heads") {
      m.heads = ranged(ModelLimits::kHeads);
      has_heads = true;
    } else if (key == "kv_heads") {
      m.kv_heads = ranged(ModelLimits::kHeads);
      has_kv = true;
    } else if (key == "head_dim") {
      m.head_dim = ranged(ModelLimits::kHeadDim);
      has_head_dim = true;
    } else if (key == "ffn") {
      m.ffn = ranged(ModelLimits::kFfn);
    } else if (key == "vocab") {
      m.vocab = ranged(ModelLimits::kVocab);
    } else if (key == "max_positions") {
      m.max_positions = ranged(ModelLimits::kPositions);
    } else if (key == "tied_embeddings") {
      if (!value.is_boolean()) throw InputError(fmt::format("{}: 'tied_embeddings' must be true or false", origin));
      m.tied_embeddings = value.get<bool>();
    } else if (key == "relative_attention_buckets") {
      m.relative_attention_buckets = static_cast<std::uint32_t>(ranged(ModelLimits::kRelativeBuckets));
    } else {
      throw InputError(fmt::format(
          "{}: unknown key '{}' (expected name, family, layers, encoder_layers, decoder_layers, hidden, heads, "
          "kv_heads, head_dim, ffn, vocab, max_positions, tied_embeddings, relative_attention_buckets; "
          "or a Hugging Face config.json with 'architectures')",
          origin, key));
    }
  }
  if (!has_family) throw InputError(fmt::format("{}: missing 'family' (gpt2, t5 or llama)", origin));
  if (!has_layers) throw InputError(fmt::format("{}: missing 'layers' (or 'encoder_layers' for t5)", origin));
  if (!has_heads) throw InputError(fmt::format("{}: missing 'heads'", origin));
  if (m.name.empty()) m.name = std::string(origin);
  if (!has_kv) m.kv_heads = m.heads;
  if (!has_head_dim && m.heads != 0) m.head_dim = m.hidden / m.heads;
  check_model(m, origin);
  return m;
}

ModelConfig load_model(const std::string& name_or_path) {
  const bool looks_like_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json") ||
                               std::filesystem::exists(name_or_path);
  if (!looks_like_path) return builtin_model(name_or_path);
  // A model file is a few kilobytes: 64 MiB is far beyond any, and bounds what a FIFO may send.
  constexpr Bytes kMaxModelFileBytes = 64 * MiB;
  return parse_model_json(
      read_input_file(name_or_path, "a model .json file or a Hugging Face config.json", kMaxModelFileBytes),
      name_or_path);
}

std::uint64_t parameter_count(const ModelConfig& model) { return workload::build_layout(model).numel(); }

}  // namespace fraglab
