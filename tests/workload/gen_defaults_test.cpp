// fraglab gen for a newcomer: every shipped model (built-in names and traces/models/*.json) under
// every framework works with only the required flags; an HF config.json generates the same
// trace as the built-in model it describes; an existing output file is not replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::run_fraglab;

const std::string kSource = FRAGLAB_SOURCE_DIR;

std::vector<std::string> shipped_models() {
  std::vector<std::string> models = builtin_model_names();
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kSource + "/traces/models"))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  models.insert(models.end(), files.begin(), files.end());
  return models;
}

TEST(GenDefaults, HelpListsEveryBuiltinModel) {
  const auto help = run_fraglab("gen --help");
  ASSERT_EQ(help.status, 0) << help.err;
  for (const std::string& name : builtin_model_names()) EXPECT_NE(help.out.find(name), std::string::npos) << name;
}

TEST(GenDefaults, EveryShippedModelUnderEveryFrameworkWithOnlyTheRequiredFlags) {
  const fs::path dir = testing::scratch_dir("gen-defaults");
  const std::vector<std::string> models = shipped_models();
  ASSERT_GE(models.size(), 8u) << "4 built-in names and their 4 files";
  for (const std::string& model : models) {
    for (const char* framework : {"fsdp1", "fsdp2", "zero1", "zero2", "zero3"}) {
      const fs::path out = dir / "t.jsonl";
      fs::remove(out);
      const std::string what = model + " " + framework;
      const auto run = run_fraglab("gen --model " + model + " --framework " + framework +
                                   " --micro-batch 1 --steps 1 -o " + out.string());
      ASSERT_EQ(run.status, 0) << what << "\n" << run.err;
      const Trace t = read_trace(out.string());
      EXPECT_NO_THROW(validate_trace(t, what)) << what;
      // The choice made for the missing --attention is said, and is the family's modelled one.
      const ModelConfig m = load_model(model);
      const std::string expected = m.family == ModelFamily::Llama ? "sdpa" : "eager";
      EXPECT_NE(run.err.find("gen: --attention not given: " + expected), std::string::npos) << what << run.err;
      EXPECT_NE(t.source.find("attention=" + expected), std::string::npos) << what << t.source;
    }
  }
}

TEST(GenDefaults, TheIssueCommandWorks) {
  // issue 14: this failed with "--attention eager: only sdpa is modelled for llama".
  const fs::path out = testing::scratch_dir("gen-issue") / "x.jsonl";
  fs::remove(out);
  const auto run = run_fraglab("gen --model llama3-8b --framework fsdp2 --micro-batch 4 --steps 2 -o " + out.string());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("gen: --attention not given: sdpa (the only one modelled for llama)\n"), std::string::npos)
      << run.err;
  // An explicit unsupported value is still refused.
  const auto eager = run_fraglab("gen --model llama3-8b --attention eager --micro-batch 1 --steps 1 -o /dev/null");
  EXPECT_EQ(eager.status, 2);
  EXPECT_EQ(eager.err,
            "fraglab gen: error: --attention eager: only sdpa is modelled for llama (docs/workload-model.md §2.5)\n");
}

TEST(GenDefaults, HfConfigGeneratesTheBuiltinModelsTrace) {
  const fs::path dir = testing::scratch_dir("gen-hf");
  for (const char* name : {"gpt2-xl", "llama3-8b", "t5-3b"}) {
    const std::string common = std::string(" --framework zero3 --micro-batch 2 --steps 1 --overwrite -o ");
    const auto builtin = run_fraglab(std::string("gen --model ") + name + common + (dir / "builtin.jsonl").string());
    const auto hf = run_fraglab("gen --model " + kSource + "/tests/workload/hf/" + name + "/config.json" + common +
                                (dir / "hf.jsonl").string());
    ASSERT_EQ(builtin.status, 0) << builtin.err;
    ASSERT_EQ(hf.status, 0) << hf.err;
    EXPECT_EQ(testing::read_text(dir / "hf.jsonl"), testing::read_text(dir / "builtin.jsonl")) << name;
  }
}

TEST(GenDefaults, UnsupportedHfArchitectureIsOneLineExitTwo) {
  const std::string path = kSource + "/tests/workload/hf/mixtral/config.json";
  const auto run = run_fraglab("gen --model " + path + " --micro-batch 1 --steps 1 -o /dev/null");
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.err, "fraglab gen: error: " + path +
                         ": architectures [\"MixtralForCausalLM\"]: the workload model covers only GPT2LMHeadModel, "
                         "T5ForConditionalGeneration, T5WithLMHeadModel, LlamaForCausalLM\n");
}

TEST(GenDefaults, ExistingOutputNeedsOverwrite) {
  const fs::path out = testing::scratch_dir("gen-exists") / "old.jsonl";
  testing::write_text(out, "keep me\n");
  const std::string args = "gen --model gpt2-xl --micro-batch 1 --steps 1 -o " + out.string();
  const auto refused = run_fraglab(args);
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err, "fraglab gen: error: " + out.string() + ": already exists (--overwrite replaces it)\n");
  EXPECT_EQ(testing::read_text(out), "keep me\n");
  const auto replaced = run_fraglab(args + " --overwrite");
  ASSERT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_NO_THROW(read_trace(out.string()));
}

}  // namespace
}  // namespace fraglab
