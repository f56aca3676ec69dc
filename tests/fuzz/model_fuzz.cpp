// The model JSON `fraglab gen --model FILE` reads (parse_model_json, src/workload/model_config.cpp
// and hf_config.cpp): a Hugging Face config.json or fraglab's own model description.
// Properties:
//  - bad input is an InputError, never anything else (nlohmann's exceptions included);
//  - a model that reads, written in fraglab's own format, reads back as the same model (the two
//    formats accept the same models);
//  - the parameter count of any model that reads is computed (what gen prints first).
#include <nlohmann/json.hpp>

#include "fraglab/workload.hpp"
#include "fuzz_support.hpp"

namespace fraglab::fuzz {

namespace {

std::string own_format(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["family"] = m.family == ModelFamily::Gpt2 ? "gpt2" : m.family == ModelFamily::T5 ? "t5" : "llama";
  j["layers"] = m.layers;
  if (m.encoder_decoder()) j["decoder_layers"] = m.decoder_layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["head_dim"] = m.head_dim;
  j["ffn"] = m.ffn;
  j["vocab"] = m.vocab;
  j["max_positions"] = m.max_positions;
  j["tied_embeddings"] = m.tied_embeddings;
  j["relative_attention_buckets"] = m.relative_attention_buckets;
  return j.dump();
}

}  // namespace

void fuzz_one(std::string_view data) {
  const ModelConfig model = parse_model_json(data, "model.json");
  const std::string text = own_format(model);
  ModelConfig back;
  const std::string error = input_error_of([&] { back = parse_model_json(text, "own.json"); });
  if (!error.empty()) fail("a model that read does not read in fraglab's own format: " + error + "\n" + text);
  require(back == model, "written in fraglab's own format and read back, the model differs: " + text);
  (void)parameter_count(model);
}

}  // namespace fraglab::fuzz
