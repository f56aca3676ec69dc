// The generator's numbers (issue 16): every model dimension has a range, every size it computes is
// checked before it builds anything, and it never writes a trace its own reader refuses. The
// property is tested at the largest value each dimension accepts.
#include <gtest/gtest.h>

#include <sstream>

#include "fraglab/memory_budget.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/workload.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

using testing::error_of;

// Sets the memory budget for one test and restores it.
class BudgetScope {
 public:
  explicit BudgetScope(Bytes bytes) : saved_(memory_budget()) { set_memory_budget(bytes); }
  ~BudgetScope() { set_memory_budget(saved_); }
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

 private:
  Bytes saved_;
};

// A small model of each family; dimensions are then raised one at a time.
std::string small_model(const std::string& family) {
  if (family == "t5")
    return R"("family":"t5","encoder_layers":1,"decoder_layers":1,"hidden":64,"heads":4,"ffn":64,"vocab":64)";
  return R"("family":")" + family + R"(","layers":1,"hidden":64,"heads":4,"ffn":64,"vocab":64,"max_positions":64)";
}

int readable = 0;  // cases that generated a trace (the rest were refused)

// Either gen refuses in one line, or the trace it writes reads back.
void expect_refused_or_readable(const std::string& json, const std::vector<std::string>& options_text,
                                const WorkloadOptions& base) {
  WorkloadOptions o = base;
  std::string error;
  std::string text;
  try {
    o.model = parse_model_json(json, "max.json");
    o.attention = default_attention(o.model.family);  // the one modelled for each family
    const Trace trace = generate_trace(o);
    std::ostringstream out;
    write_jsonl(trace, out);
    text = out.str();
  } catch (const InputError& e) {
    error = e.what();
  }
  std::string context = json;
  for (const std::string& t : options_text) context += " " + t;
  if (!error.empty()) {
    EXPECT_EQ(error.find('\n'), std::string::npos) << context << ": " << error;
    return;
  }
  try {
    const Trace back = parse_jsonl(text, "max.jsonl");
    EXPECT_FALSE(back.events.empty()) << context;
    ++readable;
  } catch (const InputError& e) {
    ADD_FAILURE() << context << ": gen wrote a trace its reader refuses: " << e.what();
  }
}

TEST(GenLimits, AtTheLargestValueOfEachDimensionTheTraceReadsBackOrGenRefusesInOneLine) {
  // 64 MiB: enough for the small runs, so the largest layer counts meet the estimate instead of
  // building hundreds of megabytes (and the test stays fast under sanitizers).
  const BudgetScope budget(Bytes{64} << 20);
  WorkloadOptions base;
  base.micro_batch = 1;
  base.steps = 1;
  base.world_size = 2;
  const std::vector<std::pair<std::string, std::uint64_t>> dimensions{
      {"layers", ModelLimits::kLayers},  {"hidden", ModelLimits::kHidden},           {"heads", ModelLimits::kHeads},
      {"kv_heads", ModelLimits::kHeads}, {"head_dim", ModelLimits::kHeadDim},        {"ffn", ModelLimits::kFfn},
      {"vocab", ModelLimits::kVocab},    {"max_positions", ModelLimits::kPositions},
  };
  for (const std::string family : {"gpt2", "llama", "t5"}) {
    for (const auto& [key, max] : dimensions) {
      if (family == "t5" && key == "layers") continue;         // t5 spells it encoder_layers (below)
      if (family == "t5" && key == "max_positions") continue;  // t5 has no position limit
      std::string json = "{" + small_model(family) + ",\"" + key + "\":" + std::to_string(max);
      if (key == "heads" && family != "t5") json += R"(,"kv_heads":1)";
      json += "}";
      // Duplicate keys: nlohmann keeps the last, the one raised here.
      expect_refused_or_readable(json, {}, base);
    }
  }
  expect_refused_or_readable("{" + small_model("t5") + R"(,"encoder_layers":100000})", {}, base);
  expect_refused_or_readable("{" + small_model("t5") + R"(,"decoder_layers":100000})", {}, base);
  // The command-line numbers at their largest, on a small model.
  const std::string llama = "{" + small_model("llama") + "}";
  for (auto [name, set] : std::vector<std::pair<std::string, std::function<void(WorkloadOptions&)>>>{
           {"--micro-batch 65536", [](WorkloadOptions& o) { o.micro_batch = 65536; }},
           {"--world-size 65536", [](WorkloadOptions& o) { o.world_size = 65536; }},
           {"--steps 100000", [](WorkloadOptions& o) { o.steps = 100000; }},
           {"--grad-accum 1024", [](WorkloadOptions& o) { o.grad_accum = 1024; }},
           {"--ds-reduce-bucket-size 2^50", [](WorkloadOptions& o) {
              o.framework = Framework::Zero3;
              o.deepspeed.reduce_bucket_size = std::uint64_t{1} << 50;
              o.deepspeed.prefetch_bucket_size = std::uint64_t{1} << 50;
            }}}) {
    WorkloadOptions o = base;
    set(o);
    expect_refused_or_readable(llama, {name}, o);
  }
  // Everything at once: refused in one line (the products), never a trace the reader refuses.
  WorkloadOptions all = base;
  all.micro_batch = 65536;
  all.seq_len = 1'000'000;
  expect_refused_or_readable(R"({"family":"llama","layers":100000,"hidden":1048576,"heads":65536,"head_dim":65536,)"
                             R"("ffn":16777216,"vocab":16777216,"max_positions":1000000})",
                             {"all"}, all);
  // The limits are not so tight that every largest value is refused: most single ones generate.
  EXPECT_GE(readable, 15);
}

TEST(GenLimits, DimensionsOutOfRangeAreRefusedNamingTheKeyAndTheRange) {
  const std::string base = R"({"family":"llama","layers":2,"heads":8,"ffn":64,"vocab":100,)";
  EXPECT_EQ(error_of([&] { parse_model_json(base + R"("hidden":1000000000000})", "m.json"); }),
            "m.json: 'hidden' = 1000000000000: expected 0..1048576");
  EXPECT_EQ(error_of([&] { parse_model_json(base + R"("hidden":64,"max_positions":4294967296})", "m.json"); }),
            "m.json: 'max_positions' = 4294967296: expected 0..1000000");
  EXPECT_EQ(error_of([&] {
              parse_model_json(
                  R"({"architectures":["GPT2LMHeadModel"],"n_layer":2,"n_embd":64,"n_head":4,"vocab_size":50257,)"
                  R"("n_positions":4294967296})",
                  "config.json");
            }),
            "config.json: 'n_positions' = 4294967296: expected 0..1000000");
}

TEST(GenLimits, TheEventEstimateBoundsWhatGenerationMakes) {
  // The estimate must be an upper bound for every family, framework and recomputation choice
  // (check_sizes compares it with the budget), and not absurdly loose.
  for (const std::string family : {"gpt2", "llama", "t5"}) {
    for (const Framework fw :
         {Framework::Fsdp1, Framework::Fsdp2, Framework::Zero1, Framework::Zero2, Framework::Zero3}) {
      for (const bool recompute : {false, true}) {
        WorkloadOptions o;
        std::string json = "{" + small_model(family) + "}";
        if (family == "t5")
          json = R"({"family":"t5","encoder_layers":1,"decoder_layers":3,"hidden":64,"heads":4,)"
                 R"("ffn":64,"vocab":64})";
        o.model = parse_model_json(json, "m.json");
        o.framework = fw;
        o.recompute = recompute ? Recompute::NonReentrant : Recompute::None;
        o.attention = default_attention(o.model.family);
        o.optimizer = std::nullopt;
        o.micro_batch = 1;
        o.steps = 3;
        o.grad_accum = 2;
        const Trace trace = generate_trace(o);
        const std::uint64_t estimate = estimated_events(resolved_options(o));
        EXPECT_GE(estimate, trace.events.size()) << json << " " << name_of(fw) << " " << recompute;
        EXPECT_LT(estimate, 40 * trace.events.size()) << json << " " << name_of(fw) << " " << recompute;
      }
    }
  }
}

}  // namespace
}  // namespace fraglab
