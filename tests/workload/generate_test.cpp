// generate_trace as a whole: valid, round-trips, deterministic, marks and tags, side streams,
// ranks, and option errors that name the flag.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "fraglab/trace_io.hpp"
#include "trace_walk.hpp"

namespace fraglab {

// gtest prints a Framework by its --framework spelling, not as a byte dump. (In fraglab, not in
// the unnamed namespace, so that argument-dependent lookup finds it.)
static void PrintTo(Framework framework, std::ostream* os) { *os << name_of(framework); }

namespace {

using testing::reference_options;

std::string jsonl(const Trace& t) {
  std::ostringstream out;
  write_jsonl(t, out);
  return std::move(out).str();
}

class EveryFramework : public ::testing::TestWithParam<std::tuple<Framework, std::string>> {};

TEST_P(EveryFramework, ValidRoundTripsAndDeterministic) {
  const auto [framework, model] = GetParam();
  WorkloadOptions o = reference_options(model, 2, 3);
  o.framework = framework;
  if (model == "llama2-7b") {
    o.attention = AttentionImpl::Sdpa;
    o.seq_len = 512;
  }
  if (model == "t5-3b") o.padding = Padding::Longest;
  const Trace t = generate_trace(o);
  EXPECT_NO_THROW(validate_trace(t, "generated"));
  const std::string text = jsonl(t);
  EXPECT_EQ(parse_jsonl(text, "generated"), t);
  EXPECT_EQ(jsonl(generate_trace(o)), text) << "same options, same bytes";
}

INSTANTIATE_TEST_SUITE_P(All, EveryFramework,
                         ::testing::Combine(::testing::Values(Framework::Fsdp1, Framework::Fsdp2, Framework::Zero1,
                                                              Framework::Zero2, Framework::Zero3),
                                            ::testing::Values("gpt2-xl", "t5-3b", "llama2-7b")),
                         // (Fsdp2, "gpt2-xl") -> fsdp2_gpt2_xl
                         [](const ::testing::TestParamInfo<EveryFramework::ParamType>& info) {
                           std::string name =
                               std::string(name_of(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(Generate, MarksStepsAndPhasesAndUsesEveryTag) {
  const Trace t = generate_trace(reference_options("gpt2-xl", 2, 2));
  std::vector<std::string> marks;
  std::set<std::string> tags;
  for (const Event& e : t.events) {
    if (e.op == Op::Mark)
      marks.push_back(std::string(t.string_at(static_cast<std::uint32_t>(e.id))) + "=" +
                      std::string(t.string_at(static_cast<std::uint32_t>(e.size))));
    if (e.op == Op::Alloc) tags.insert(std::string(t.string_at(e.tag)));
  }
  EXPECT_EQ(marks,
            (std::vector<std::string>{"phase=\"init\"", "step=1", "phase=\"zero_grad\"", "phase=\"forward\"",
                                      "phase=\"backward\"", "phase=\"optimizer\"", "step=2", "phase=\"zero_grad\"",
                                      "phase=\"forward\"", "phase=\"backward\"", "phase=\"optimizer\""}));
  EXPECT_EQ(tags, (std::set<std::string>{"param", "grad", "act", "opt", "comm", "temp"}));
}

TEST(Generate, NoActivationOutlivesItsStep) {
  // When the optimizer step starts, the only activation-tagged memory left is the batch
  // (input_ids, attention_mask, labels: int64) and the loss scalar the loop holds for .item().
  for (Framework f : {Framework::Fsdp1, Framework::Fsdp2, Framework::Zero1, Framework::Zero2, Framework::Zero3}) {
    WorkloadOptions o = reference_options("gpt2-xl", 2);
    o.framework = f;
    EXPECT_EQ(testing::allocated_at(generate_trace(o), 2, "optimizer").at("act"), 3u * 8 * 2 * 1024 + 4) << name_of(f);
    o = reference_options("t5-3b", 2);
    o.framework = f;
    o.recompute = Recompute::Reentrant;
    EXPECT_EQ(testing::allocated_at(generate_trace(o), 2, "optimizer").at("act"), 2u * 8 * 2 * 512 + 8 * 2 * 150 + 4)
        << name_of(f);
  }
}

TEST(Generate, Fsdp1UsesItsSideStreamsAndDefersCrossStreamFrees) {
  const Trace t = generate_trace(reference_options("gpt2-xl", 2, 2));
  std::set<StreamId> streams;
  std::uint64_t requested = 0, completed = 0;
  for (const Event& e : t.events) {
    if (e.op == Op::Alloc) streams.insert(e.stream);
    requested += e.op == Op::FreeRequested;
    completed += e.op == Op::FreeCompleted;
  }
  EXPECT_EQ(streams.size(), 4u);  // DEFAULT, PRE_UNSHARD, UNSHARD, POST_BWD (wm §3.1)
  EXPECT_GT(requested, 0u);
  EXPECT_EQ(requested, completed);
}

TEST(Generate, DynamicPaddingChangesShapesPerStepAndPerRank) {
  WorkloadOptions o = reference_options("t5-3b", 8, 4);
  o.padding = Padding::Longest;
  auto sizes = [](const Trace& t) {
    std::vector<Bytes> v;
    for (const Event& e : t.events)
      if (e.op == Op::Alloc) v.push_back(e.size);
    return v;
  };
  const Trace r0 = generate_trace(o);
  o.rank = 1;
  const Trace r1 = generate_trace(o);
  EXPECT_NE(sizes(r0), sizes(r1));
  // Fixed shapes: the ranks ask for the same sizes (only the timing jitter differs).
  o.padding = Padding::MaxLength;
  const Trace f1 = generate_trace(o);
  o.rank = 0;
  EXPECT_EQ(sizes(generate_trace(o)), sizes(f1));
  // The labels tensor (8·b·s_d bytes) is the third input of each step: s_d varies by step.
  std::set<Bytes> label_sizes;
  testing::TraceWalk w(r0);
  int inputs_seen = 0;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Mark) inputs_seen = 0;
    if (e.op == Op::Alloc && w.pos.phase == "forward" && ++inputs_seen == 3) label_sizes.insert(e.size);
  });
  EXPECT_GT(label_sizes.size(), 1u);
  for (Bytes s : label_sizes) EXPECT_LE(s, 8u * 8 * 150);
}

TEST(Generate, OptionErrorsNameTheFlag) {
  auto message = [](const WorkloadOptions& o) {
    try {
      generate_trace(o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  WorkloadOptions o = reference_options("gpt2-xl", 2);
  o.rank = 2;
  EXPECT_EQ(message(o), "--rank 2: expected 0..1 (below --world-size)");
  o = reference_options("gpt2-xl", 2);
  o.seq_len = 2048;
  EXPECT_EQ(message(o), "--seq-len 2048: gpt2-xl accepts at most 1024 positions");
  o = reference_options("t5-3b", 2);
  o.attention = AttentionImpl::Sdpa;
  EXPECT_NE(message(o).find("--attention sdpa"), std::string::npos);
  o = reference_options("gpt2-xl", 2);
  o.micro_batch = 0;
  EXPECT_EQ(message(o), "--micro-batch 0: expected 1..65536");
  EXPECT_THROW(parse_framework("zero4"), InputError);
  try {
    parse_framework("zero4");
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--framework 'zero4': expected one of fsdp1, fsdp2, zero1, zero2, zero3");
  }
}

std::pair<int, std::string> run(const std::string& args) {
  const std::string cmd = std::string(FRAGLAB_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(GenCommand, BadValuesExitTwoWithOneLine) {
  if (!std::filesystem::exists(FRAGLAB_BINARY)) GTEST_SKIP() << "fraglab not built";
  const auto [code, out] = run("gen --model gpt2-xl --framework zero4 --micro-batch 8 --steps 1 -o /dev/null");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out, "fraglab gen: error: --framework 'zero4': expected one of fsdp1, fsdp2, zero1, zero2, zero3\n");
  const auto [code2, out2] = run("gen --model gpt2-xl --precision fp16 --micro-batch 8 --steps 1 -o /dev/null");
  EXPECT_EQ(code2, 2);
  EXPECT_EQ(out2, "fraglab gen: error: --precision 'fp16': expected one of bf16, fp32\n");
}

TEST(GenCommand, WritesATraceTheReaderAccepts) {
  if (!std::filesystem::exists(FRAGLAB_BINARY)) GTEST_SKIP() << "fraglab not built";
  const std::string path = (std::filesystem::temp_directory_path() / "fraglab_gen_test.jsonl").string();
  // --overwrite: a file left by an interrupted earlier run must not fail this one.
  const auto [code, out] =
      run("gen --model t5-3b --framework zero3 --world-size 2 --micro-batch 2 --steps 2 --src-len 128 --tgt-len 32 "
          "--overwrite -o " +
          path);
  ASSERT_EQ(code, 0) << out;
  const Trace t = read_trace(path);
  WorkloadOptions o = reference_options("t5-3b", 2);
  o.framework = Framework::Zero3;
  o.src_len = 128;
  o.tgt_len = 32;
  EXPECT_EQ(t.events, generate_trace(o).events);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fraglab
