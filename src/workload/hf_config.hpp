// Hugging Face config.json files as model descriptions (parse_model_json hands them over).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "fraglab/workload.hpp"

namespace fraglab::workload {

// An HF config names its class ("architectures") or type ("model_type"); fraglab's own model
// JSON has neither, so the two formats cannot be confused.
bool is_hf_config(const nlohmann::json& j);

// GPT2LMHeadModel, LlamaForCausalLM, T5ForConditionalGeneration (v1.0, relu FFN). Throws
// InputError naming `origin` and an unsupported architecture (with the supported ones), a missing
// shape key or a variant the tables do not cover. Unknown keys are ignored. The caller checks
// the result (check_model).
ModelConfig parse_hf_config(const nlohmann::json& j, std::string_view origin);

}  // namespace fraglab::workload
