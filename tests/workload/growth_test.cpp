// The mechanisms that could make reserved memory grow after step 2 (docs/workloads.md "Where
// growth could come from"): each knob's effect on the emitted stream, derived by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "trace_walk.hpp"
#include "workload/gpu_timing.hpp"

namespace fraglab {
namespace {

using testing::TraceWalk;

// A two-block GPT2 small enough to generate in milliseconds; no tensor of it is 8,519,680 bytes.
WorkloadOptions tiny_gpt2(Framework framework) {
  WorkloadOptions o;
  o.model = parse_model_json(
      R"({"name":"tiny","family":"gpt2","layers":2,"hidden":64,"heads":4,"head_dim":16,"ffn":256,"vocab":1000,)"
      R"("max_positions":128,"tied_embeddings":true})",
      "tiny");
  o.framework = framework;
  o.world_size = 2;
  o.micro_batch = 4;
  o.steps = 6;
  return o;
}

// The first allocation after each "forward" mark of a training step: the batch's input_ids
// (8-byte token ids, batch x length), which Batch::replace allocates before anything else.
std::vector<Bytes> input_ids_per_step(const Trace& t) {
  std::vector<Bytes> out;
  TraceWalk w(t);
  bool armed = false;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Mark && w.pos.phase == "forward") armed = true;
    if (e.op == Op::Alloc && armed) {
      out.push_back(e.size);
      armed = false;
    }
  });
  return out;
}

// The largest activation allocated in each step's forward phase.
std::vector<Bytes> largest_forward_act(const Trace& t) {
  std::vector<Bytes> out;
  TraceWalk w(t);
  w.run([&](std::size_t, const Event& e) {
    if (e.op != Op::Alloc || w.pos.phase != "forward" || w.live.at(e.id).tag != "act") return;
    if (out.size() < static_cast<std::size_t>(w.pos.step)) out.resize(static_cast<std::size_t>(w.pos.step), 0);
    out[static_cast<std::size_t>(w.pos.step) - 1] = std::max(out[static_cast<std::size_t>(w.pos.step) - 1], e.size);
  });
  return out;
}

TEST(Growth, VariableSourceLengthsVaryTheEncoderInputStepToStep) {
  // T5 with a source median below the 512 truncation: P(longest of 8 < 512) with median 200,
  // sigma 0.5 is Phi(ln(512/200)/0.5)^8 = Phi(1.88)^8 ~ 0.78, so most steps pad below 512 and the
  // encoder input changes size; with the default median 600 it is Phi(-0.32)^8 ~ 0.0004.
  WorkloadOptions o;
  o.model = builtin_model("t5-3b");
  o.framework = Framework::Zero3;
  o.micro_batch = 8;
  o.steps = 20;
  o.padding = Padding::Longest;
  o.len_median = 200;
  const std::vector<Bytes> varied = input_ids_per_step(generate_trace(o));
  ASSERT_EQ(varied.size(), 20u);
  const std::set<Bytes> distinct(varied.begin(), varied.end());
  EXPECT_GE(distinct.size(), 10u);
  const auto below = std::count_if(varied.begin(), varied.end(), [](Bytes b) { return b < 8u * 8 * 512; });
  EXPECT_GE(below, 10);
  for (Bytes b : varied) {
    EXPECT_EQ(b % (8 * 8), 0u) << "8 bytes x 8 examples x length";
    EXPECT_LE(b, 8u * 8 * 512);
  }
  o.len_median = 600;
  const std::vector<Bytes> truncated = input_ids_per_step(generate_trace(o));
  EXPECT_GE(std::count(truncated.begin(), truncated.end(), Bytes{8 * 8 * 512}), 18);
}

TEST(Growth, LastPartialBatchOfEachEpochScalesTheActivations) {
  // 20 examples over 2 ranks: 10 per rank, batches of 4, 4 and the last 2; then the next epoch.
  WorkloadOptions o = tiny_gpt2(Framework::Zero3);
  o.dataset_size = 20;
  const Trace t = generate_trace(o);
  const std::vector<Bytes> ids = input_ids_per_step(t);
  const Bytes s = 128;
  EXPECT_EQ(ids, (std::vector<Bytes>{8 * 4 * s, 8 * 4 * s, 8 * 2 * s, 8 * 4 * s, 8 * 4 * s, 8 * 2 * s}));
  // Every activation is linear in the batch (fixed length): the largest one halves.
  const std::vector<Bytes> act = largest_forward_act(t);
  ASSERT_EQ(act.size(), 6u);
  EXPECT_EQ(act[2] * 2, act[1]);
  EXPECT_EQ(act[5] * 2, act[4]);
  EXPECT_EQ(act[0], act[1]);
  // 9 examples: 5 per rank (the sampler pads to 10), batches of 4 and 1.
  o.dataset_size = 9;
  o.steps = 4;
  EXPECT_EQ(input_ids_per_step(generate_trace(o)), (std::vector<Bytes>{8 * 4 * s, 8 * 1 * s, 8 * 4 * s, 8 * 1 * s}));
  // Unbounded (the default): every batch full.
  o.dataset_size = 0;
  EXPECT_EQ(input_ids_per_step(generate_trace(o)), std::vector<Bytes>(4, 8 * 4 * s));
}

TEST(Growth, EvaluationIsForwardOnlyAndKeepsNothing) {
  WorkloadOptions o = tiny_gpt2(Framework::Zero3);
  o.steps = 4;
  o.eval_every = 2;
  o.eval_batches = 3;
  o.eval_micro_batch = 6;
  const Trace t = generate_trace(o);
  EXPECT_NO_THROW(validate_trace(t, "generated"));
  TraceWalk w(t);
  std::vector<std::int64_t> eval_steps;
  std::size_t eval_batch_tensors = 0;  // allocations of 8 bytes x 6 examples x 128 tokens
  Bytes act_before = 0;
  bool in_eval = false;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Mark) {
      if (in_eval && w.pos.phase != "eval") {
        // The evaluation is over: every activation it allocated is gone.
        EXPECT_EQ(w.allocated_by_tag["act"], act_before) << "after the evaluation of step " << eval_steps.back();
        in_eval = false;
      }
      if (w.pos.phase == "eval" && !in_eval) {
        in_eval = true;
        eval_steps.push_back(w.pos.step);
        act_before = w.allocated_by_tag["act"];
      }
      return;
    }
    if (!in_eval || e.op != Op::Alloc) return;
    const std::string& tag = w.live.at(e.id).tag;
    EXPECT_NE(tag, "grad") << "no gradient in an evaluation";
    EXPECT_NE(tag, "opt") << "no optimizer state in an evaluation";
    if (tag == "act" && e.size == 8u * 6 * 128) ++eval_batch_tensors;
  });
  EXPECT_EQ(eval_steps, (std::vector<std::int64_t>{2, 4}));
  // Per batch: input_ids, attention_mask, labels, and the loss's shifted labels (int64 per token,
  // ForCausalLMLoss, wm §2.6): 2 evaluations x 3 batches x 4 (training batches are 4 x 128 x 8 bytes).
  EXPECT_EQ(eval_batch_tensors, 24u);
  // Nothing of the training stream changes: the phases of every step are the same.
  std::vector<std::string> phases;
  TraceWalk v(t);
  v.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Mark && v.pos.step == 2 && (phases.empty() || phases.back() != v.pos.phase))
      phases.push_back(v.pos.phase);
  });
  EXPECT_EQ(phases, (std::vector<std::string>{"", "zero_grad", "forward", "backward", "optimizer", "eval"}));
}

TEST(Growth, T5EvaluationIsForwardOnlyAndKeepsNothing) {
  // The encoder-decoder driver: no gradient or optimizer allocation in the evaluations, and the
  // activations live before each evaluation (the training loop's batch) are all that is left after.
  WorkloadOptions o;
  o.model = parse_model_json(
      R"({"architectures":["T5ForConditionalGeneration"],"d_model":64,"d_ff":128,"d_kv":8,"num_heads":4,)"
      R"("num_layers":3,"vocab_size":100,"n_positions":512})",
      "t5-tiny.json");
  o.framework = Framework::Zero3;
  o.micro_batch = 4;
  o.steps = 4;
  o.padding = Padding::Longest;
  o.eval_every = 1;
  o.eval_batches = 2;
  const Trace t = generate_trace(o);
  EXPECT_NO_THROW(validate_trace(t, "generated"));
  TraceWalk w(t);
  int evaluations = 0;
  Bytes act_before = 0;
  bool in_eval = false;
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Mark) {
      if (in_eval && w.pos.phase != "eval") {
        EXPECT_EQ(w.allocated_by_tag["act"], act_before);
        in_eval = false;
      }
      if (w.pos.phase == "eval" && !in_eval) {
        in_eval = true;
        ++evaluations;
        act_before = w.allocated_by_tag["act"];
      }
      return;
    }
    if (in_eval && e.op == Op::Alloc) {
      EXPECT_NE(w.live.at(e.id).tag, "grad");
      EXPECT_NE(w.live.at(e.id).tag, "opt");
    }
  });
  EXPECT_EQ(evaluations, 4);
}

TEST(Growth, EvaluationIsRefusedOutsideZero3AndNeedsBatches) {
  WorkloadOptions o = tiny_gpt2(Framework::Fsdp1);
  o.eval_every = 2;
  o.eval_batches = 1;
  EXPECT_THROW(generate_trace(o), InputError);
  o.framework = Framework::Zero3;
  o.eval_batches = 0;
  EXPECT_THROW(generate_trace(o), InputError);
}

TEST(Growth, CublasWorkspacesOnePerHandleAndNeverFreed) {
  // PyTorch's default on an A100 (CUDABlasHandlePool.cpp): ":4096:2:16:8" = 2 x 4096 KiB + 8 x 16 KiB.
  constexpr Bytes kWorkspace = 2 * 4096 * 1024 + 8 * 16 * 1024;
  ASSERT_EQ(kWorkspace, 8'519'680u);
  WorkloadOptions o = tiny_gpt2(Framework::Zero3);
  o.cublas_workspace = kWorkspace;
  const Trace t = generate_trace(o);
  std::vector<std::tuple<std::int64_t, std::string, StreamId>> where;
  std::set<AllocId> ids;
  TraceWalk w(t);
  w.run([&](std::size_t, const Event& e) {
    if (e.op == Op::Alloc && e.size == kWorkspace) {
      where.emplace_back(w.pos.step, w.pos.phase, e.stream);
      ids.insert(e.id);
    }
    if ((e.op == Op::Free || e.op == Op::FreeRequested) && ids.count(e.id)) ADD_FAILURE() << "workspace freed";
  });
  // The main thread's handle (forward) and the autograd thread's (backward), both on the default stream.
  EXPECT_EQ(where,
            (std::vector<std::tuple<std::int64_t, std::string, StreamId>>{{1, "forward", 0}, {1, "backward", 0}}));
  for (AllocId id : ids) EXPECT_EQ(w.live.count(id), 1u) << "still live at the end";
}

TEST(Growth, SideStreamDelayIsPerStepPerKernelOnSideStreamsOnly) {
  TimingOptions timing;
  timing.jitter = 0;
  timing.cpu_op_us = 10;
  timing.side_delay_us = 500;
  workload::GpuTiming gpu(timing, Precision::Bf16, 2, 0, 0);
  gpu.begin_step(1);
  const double d = gpu.side_delay(workload::Stream::DsAllGather);
  EXPECT_GE(d, 0.0);
  EXPECT_LE(d, 500.0);
  EXPECT_EQ(gpu.side_delay(workload::Stream::Default), 0.0);
  gpu.launch(workload::Stream::DsAllGather, 100);  // issued at 10 µs, runs 100 µs, plus the delay
  EXPECT_DOUBLE_EQ(gpu.tail(workload::Stream::DsAllGather), 10 + 100 + d);
  gpu.launch(workload::Stream::DsAllGather, 100);  // queued behind it: the same delay again
  EXPECT_DOUBLE_EQ(gpu.tail(workload::Stream::DsAllGather), 10 + 2 * (100 + d));
  gpu.launch(workload::Stream::Default, 100);  // issued at 30 µs
  EXPECT_DOUBLE_EQ(gpu.tail(workload::Stream::Default), 30 + 100);
  // Another step, another draw (seeded: the same for the same seed, rank and step).
  workload::GpuTiming again(timing, Precision::Bf16, 2, 0, 0);
  again.begin_step(1);
  EXPECT_EQ(again.side_delay(workload::Stream::DsAllGather), d);
  std::set<double> draws;
  for (std::uint32_t step = 1; step <= 8; ++step) {
    again.begin_step(step);
    draws.insert(again.side_delay(workload::Stream::DsReduce));
  }
  EXPECT_EQ(draws.size(), 8u);
}

TEST(Growth, SideStreamDelayMovesOnlyDeferredFrees) {
  // The allocations (sizes, streams, order) stay; only where the free_completed of record_stream
  // frees land changes.
  WorkloadOptions o = tiny_gpt2(Framework::Zero3);
  auto allocs = [](const Trace& t) {
    std::vector<std::tuple<Bytes, StreamId, std::uint32_t>> out;
    for (const Event& e : t.events)
      if (e.op == Op::Alloc) out.emplace_back(e.size, e.stream, e.tag);
    return out;
  };
  auto completion_positions = [](const Trace& t) {
    std::vector<std::size_t> out;
    std::size_t allocs_seen = 0;
    for (const Event& e : t.events) {
      if (e.op == Op::Alloc) ++allocs_seen;
      if (e.op == Op::FreeCompleted) out.push_back(allocs_seen);
    }
    return out;
  };
  const Trace base = generate_trace(o);
  o.timing.side_delay_us = 2000;
  const Trace delayed = generate_trace(o);
  EXPECT_EQ(allocs(delayed), allocs(base));
  EXPECT_NE(completion_positions(delayed), completion_positions(base));
}

}  // namespace
}  // namespace fraglab
