// Model shapes and parameter counts against the published totals (workload-model §1).
#include <gtest/gtest.h>

#include <filesystem>

#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"

namespace fraglab {
namespace {

TEST(ModelConfig, Gpt2XlParameterCount) {
  // HF gpt2-xl: 1,557,611,200 (wm §1.1; 48 blocks of 30,740,800 + 82,052,800 root).
  EXPECT_EQ(parameter_count(builtin_model("gpt2-xl")), 1'557'611'200u);
}

TEST(ModelConfig, T5ThreeBParameterCount) {
  // "2851M total params" in DeepSpeed's estimator docs; exact 2,851,598,336 (wm §1.2).
  EXPECT_EQ(parameter_count(builtin_model("t5-3b")), 2'851'598'336u);
}

TEST(ModelConfig, LlamaParameterCounts) {
  EXPECT_EQ(parameter_count(builtin_model("llama2-7b")), 6'738'415'616u);
  EXPECT_EQ(parameter_count(builtin_model("llama3-8b")), 8'030'261'248u);
}

TEST(ModelConfig, ShippedModelFilesMatchTheBuiltins) {
  const std::string dir = std::string(FRAGLAB_SOURCE_DIR) + "/traces/models";
  for (const std::string& name : builtin_model_names()) {
    const std::string path = dir + "/" + name + ".json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(load_model(path), builtin_model(name)) << path;
  }
}

TEST(ModelConfig, SmallCustomModel) {
  // A 2-layer GPT2 with h=64, 4 heads, f=256, V=100, 32 positions, tied:
  // block = 4h² + 2hf + 9h + f = 16384 + 32768 + 576 + 256 = 49,984; root = Vh + Ph + 2h = 8576.
  const ModelConfig m = parse_model_json(
      R"({"name":"tiny","family":"gpt2","layers":2,"hidden":64,"heads":4,"ffn":256,"vocab":100,"max_positions":32})",
      "tiny.json");
  EXPECT_EQ(m.head_dim, 16u);
  EXPECT_EQ(m.kv_heads, 4u);
  EXPECT_EQ(parameter_count(m), 2u * 49'984u + 8'576u);
}

TEST(ModelConfig, BadModelFilesNameTheKey) {
  try {
    parse_model_json(R"({"family":"gpt2","layers":2,"hiden":64})", "typo.json");
    FAIL() << "accepted an unknown key";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("typo.json: unknown key 'hiden'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_model_json(R"({"family":"bert","layers":2,"heads":2})", "x.json"), InputError);
  EXPECT_THROW(parse_model_json(R"({"family":"t5","layers":2,"heads":2,"hidden":8,"ffn":8,"vocab":8})", "x.json"),
               InputError);  // t5 without decoder_layers
  EXPECT_THROW(builtin_model("gpt3"), InputError);
}

}  // namespace
}  // namespace fraglab
