// Hugging Face config.json files as --model. The configs under tests/workload/hf/ are written by
// hand from the public HF files (gpt2-xl, Meta-Llama-3-8B, t5-3b, Mixtral-8x7B); the built-in
// models are transcribed separately from the workload model (wm §1), so equality is a real check
// of the key mapping.
#include <gtest/gtest.h>

#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"

namespace fraglab {
namespace {

const std::string kHf = std::string(FRAGLAB_SOURCE_DIR) + "/tests/workload/hf/";

std::string error_of(const std::string& json, const std::string& origin = "config.json") {
  try {
    parse_model_json(json, origin);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfConfig, ShippedArchitecturesEqualTheBuiltins) {
  // The folder names the model (models/NAME/config.json), as a downloaded HF snapshot does.
  for (const char* name : {"gpt2-xl", "llama3-8b", "t5-3b"}) {
    EXPECT_EQ(load_model(kHf + name + "/config.json"), builtin_model(name)) << name;
  }
}

TEST(HfConfig, Llama3FieldsByHand) {
  // Meta-Llama-3-8B: 32 layers, hidden 4096, 32 heads, 8 kv heads (head_dim 4096 / 32 = 128),
  // intermediate 14336, vocab 128256, 8192 positions, untied head.
  const ModelConfig m = load_model(kHf + "llama3-8b/config.json");
  EXPECT_EQ(m.family, ModelFamily::Llama);
  EXPECT_EQ(m.layers, 32u);
  EXPECT_EQ(m.hidden, 4096u);
  EXPECT_EQ(m.heads, 32u);
  EXPECT_EQ(m.kv_heads, 8u);
  EXPECT_EQ(m.head_dim, 128u);
  EXPECT_EQ(m.ffn, 14336u);
  EXPECT_EQ(m.vocab, 128256u);
  EXPECT_EQ(m.max_positions, 8192u);
  EXPECT_FALSE(m.tied_embeddings);
}

TEST(HfConfig, Gpt2InnerDefaultsToFourTimesHidden) {
  // n_inner null or absent: GPT2MLP uses 4 * n_embd; head_dim = n_embd / n_head = 64 / 4 = 16.
  const ModelConfig m = parse_model_json(
      R"({"architectures":["GPT2LMHeadModel"],"n_layer":2,"n_embd":64,"n_head":4,"n_inner":null,
          "n_positions":32,"vocab_size":100})",
      "tiny/config.json");
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.ffn, 256u);
  EXPECT_EQ(m.head_dim, 16u);
  EXPECT_TRUE(m.tied_embeddings);
  // Same shape as model_config_test's tiny model: 2 * 49,984 + 8,576 parameters.
  EXPECT_EQ(parameter_count(m), 2u * 49'984u + 8'576u);
}

TEST(HfConfig, T5DecoderLayersDefaultToEncoderLayersAndOldClassNameIsAccepted) {
  const ModelConfig m = parse_model_json(
      R"({"architectures":["T5WithLMHeadModel"],"d_model":64,"d_ff":128,"d_kv":8,"num_heads":4,
          "num_layers":3,"vocab_size":100,"n_positions":512})",
      "t5-tiny.json");
  EXPECT_EQ(m.name, "t5-tiny");
  EXPECT_EQ(m.family, ModelFamily::T5);
  EXPECT_EQ(m.layers, 3u);
  EXPECT_EQ(m.decoder_layers, 3u);
  EXPECT_EQ(m.head_dim, 8u);
  EXPECT_EQ(m.max_positions, 0u) << "relative positions: no length limit";
  EXPECT_EQ(m.relative_attention_buckets, 32u);
}

TEST(HfConfig, ModelTypeAloneIsEnough) {
  const ModelConfig m = parse_model_json(
      R"({"model_type":"llama","_name_or_path":"org/my-llama","hidden_size":256,"intermediate_size":512,
          "num_attention_heads":4,"num_hidden_layers":2,"vocab_size":1000})",
      "x.json");
  EXPECT_EQ(m.name, "my-llama");
  EXPECT_EQ(m.kv_heads, 4u);
  EXPECT_EQ(m.max_positions, 0u);
}

TEST(HfConfig, UnsupportedArchitectureIsNamedWithTheSupportedOnes) {
  const std::string e = error_of(R"({"architectures":["MixtralForCausalLM"],"hidden_size":4096})", "mixtral.json");
  EXPECT_NE(e.find("mixtral.json: architectures [\"MixtralForCausalLM\"]"), std::string::npos) << e;
  for (const char* supported : {"GPT2LMHeadModel", "LlamaForCausalLM", "T5ForConditionalGeneration"})
    EXPECT_NE(e.find(supported), std::string::npos) << e;
  EXPECT_NE(error_of(R"({"model_type":"bert"})").find("model_type 'bert'"), std::string::npos);
}

TEST(HfConfig, MissingAndMistypedShapesNameTheKey) {
  EXPECT_EQ(error_of(R"({"architectures":["GPT2LMHeadModel"],"n_layer":2,"n_head":4,"n_positions":32,"vocab_size":9})"),
            "config.json: GPT2LMHeadModel config has no 'n_embd' or 'hidden_size'");
  EXPECT_EQ(error_of(R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":"32"})"),
            "config.json: 'num_hidden_layers' must be a non-negative integer");
}

TEST(HfConfig, VariantsTheTablesDoNotCoverAreRefused) {
  // Flan-T5 / T5 v1.1: gated-GELU FFN, not the v1.0 tables.
  const std::string t5 = error_of(
      R"({"architectures":["T5ForConditionalGeneration"],"d_model":64,"d_ff":128,"num_heads":4,"num_layers":2,
          "vocab_size":100,"feed_forward_proj":"gated-gelu"})");
  EXPECT_NE(t5.find("feed_forward_proj 'gated-gelu'"), std::string::npos) << t5;
  const std::string llama = error_of(
      R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
          "num_hidden_layers":2,"vocab_size":100,"attention_bias":true})");
  EXPECT_NE(llama.find("'attention_bias'"), std::string::npos) << llama;
}

TEST(HfConfig, OwnFormatStillRejectsUnknownKeys) {
  // Without architectures / model_type the file is fraglab's format, where a typo is an error.
  EXPECT_NE(error_of(R"({"family":"gpt2","layers":2,"n_embd":64})").find("unknown key 'n_embd'"), std::string::npos);
}

}  // namespace
}  // namespace fraglab
