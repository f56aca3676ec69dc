// The generic forward / recompute / backward rules of workload-model §2.1 on a hand-made table,
// and the saved-tensor totals of the per-family tables against the formulas of §2.3-§2.4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workload/layer_exec.hpp"
#include "workload/param_layout.hpp"
#include "workload/tables.hpp"

namespace fraglab::workload {
namespace {

// Counts the weight-gradient hooks; nothing else.
class NoHooks : public ModuleHooks {
 public:
  void weight_grads(ModuleRef) override { ++grads; }
  int grads = 0;
};

std::vector<std::string> ops_of(const Trace& t, std::size_t from = 0) {
  std::vector<std::string> out;
  for (std::size_t i = from; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.op == Op::Alloc)
      out.push_back("alloc " + std::to_string(e.size));
    else if (e.op == Op::Free)
      out.push_back("free #" + std::to_string(e.id));
  }
  return out;
}

struct Rig {
  Trace trace;
  GpuTiming gpu{TimingOptions{}, Precision::Bf16, 2, 0, 0};
  TraceBuilder tb{trace, gpu};
  GradPool pool{tb};
  NoHooks hooks;
  StepContext ctx{tb, hooks, pool};
  UnitDef unit{"u", {{"w", 4, 4}}, {{"lin", {0}}}};
};

// x (Input, 100) → A → a (200, A saves x) → B → b (300, B saves b) → C(a, b) → y (Output, 100)
LayerTable toy(const UnitDef& unit, const GpuTiming& gpu) {
  TableBuilder b("toy", unit, gpu);
  const int x = b.input("x", 100);
  const int a = b.tensor("a", 200);
  b.op("A", {x}, {a}).saves({x}).module("lin");
  const int bb = b.tensor("b", 300);
  b.op("B", {a}, {bb}).saves({bb});
  const int y = b.output("y", 100);
  b.op("C", {a, bb}, {y});
  return b.finish();
}

TEST(LayerExec, ForwardKeepsSavedTensorsAndBackwardWalksInReverse) {
  Rig r;
  const LayerTable table = toy(r.unit, r.gpu);
  Act x{r.tb.alloc(100, Stream::Default, Tag::Act), 100, -1}, y;
  LayerRun run(table, 0, Recompute::None);
  run.bind(table.find("x"), &x);
  run.bind(table.find("y"), &y);
  run.forward(r.ctx);
  // a dies after its last use (C); b is saved by B and stays.
  EXPECT_EQ(ops_of(r.trace, 1), (std::vector<std::string>{"alloc 200", "alloc 300", "alloc 100", "free #2"}));
  const std::size_t mark = r.trace.events.size();
  y.grad = r.pool.adopt(r.tb.alloc(100, Stream::Default, Tag::Act));  // id 5
  run.backward(r.ctx);
  // C: grads of a (6) and b (7), then its incoming grad (5) is consumed. B: a second grad of a is
  // accumulated in place (8, freed at once), b's grad (7) and b itself (3) go. A: grad of x (9),
  // the weight's gradient hook, a's grad (6) goes. x's grad (9) is left to the caller.
  EXPECT_EQ(ops_of(r.trace, mark),
            (std::vector<std::string>{"alloc 100", "alloc 200", "alloc 300", "free #5", "alloc 200", "free #8",
                                      "free #7", "free #3", "alloc 100", "free #6"}));
  EXPECT_EQ(r.hooks.grads, 1);
  EXPECT_GE(x.grad, 0);
}

TEST(LayerExec, CheckpointedForwardKeepsNothingAndRecomputesUpToTheLastSaver) {
  Rig r;
  const LayerTable table = toy(r.unit, r.gpu);
  Act x{r.tb.alloc(100, Stream::Default, Tag::Act), 100, -1}, y;
  LayerRun run(table, 0, Recompute::NonReentrant);
  run.bind(table.find("x"), &x);
  run.bind(table.find("y"), &y);
  run.forward(r.ctx);
  EXPECT_EQ(ops_of(r.trace, 1),
            (std::vector<std::string>{"alloc 200", "alloc 300", "alloc 100", "free #2", "free #3"}));
  const std::size_t mark = r.trace.events.size();
  y.grad = r.pool.adopt(r.tb.alloc(100, Stream::Default, Tag::Act));  // id 5
  run.backward(r.ctx);
  // Recompute A (a = 6) and B (b = 7), B being the last op that saves anything; a is nobody's
  // saved tensor and dies with the recomputation; b stays for B's backward. Then as above: C's
  // grads of a (8) and b (9), y's grad (5) consumed; B: a's second grad (10) added in place, b's
  // grad and b go; A: x's grad (11), a's grad goes.
  EXPECT_EQ(
      ops_of(r.trace, mark),
      (std::vector<std::string>{"alloc 100", "alloc 200", "alloc 300", "free #6", "alloc 200", "alloc 300", "free #5",
                                "alloc 200", "free #10", "free #9", "free #7", "alloc 100", "free #8"}));
}

TEST(LayerTables, Gpt2BlockSavesWhatSection23Says) {
  const ModelConfig m = builtin_model("gpt2-xl");
  const ModelLayout layout = build_layout(m);
  const GpuTiming gpu(TimingOptions{}, Precision::Bf16, 2, 0, 0);
  const std::uint64_t b = 2, s = 1024, T = b * s, h = m.hidden, a = m.heads;
  for (Bytes e : {2u, 4u}) {
    for (GeluImpl gelu : {GeluImpl::Python, GeluImpl::Fused}) {
      TableConfig c;
      c.e = e;
      c.gelu = gelu;
      const LayerTable t = gpt2_block({m, c, gpu}, layout.units[1], {b, s, 0});
      // Block ≈ (28e+2)·sbh + (2e+1)·as²b with the Python GELU, (16e+2)·sbh + ... fused; the block
      // input x (e·sbh) is the caller's; each LayerNorm adds fp32 mean and rstd (2 × 4·T).
      const std::uint64_t coef = (gelu == GeluImpl::Python ? 28 : 16) * e + 2 - e;
      const Bytes expected = coef * T * h + (2 * e + 1) * a * s * s * b + 2 * 8 * T;
      EXPECT_EQ(t.saved_bytes(), expected) << "e=" << e;
    }
  }
}

TEST(LayerTables, T5EncoderBlockSavesWhatSection24Says) {
  const ModelConfig m = builtin_model("t5-3b");
  const ModelLayout layout = build_layout(m);
  const GpuTiming gpu(TimingOptions{}, Precision::Bf16, 2, 0, 0);
  const std::uint64_t b = 2, s = 512, T = b * s, h = m.hidden, a = m.heads;
  TableConfig c;
  c.e = 2;
  const LayerTable t = t5_block({m, c, gpu}, layout.units[2], {b, s, 0}, false, false);
  // 130·sbh + 7·as²b at e=2 (≈ 127 MB per sample), plus the two fp32 rsqrt tensors ([b, s]).
  EXPECT_EQ(t.saved_bytes(), 130 * T * h + 7 * a * s * s * b + 2 * 4 * T);
  EXPECT_NEAR(static_cast<double>(t.saved_bytes()) / b, 127e6, 1e6);
  // fp32: the casts vanish; §2.4 gives 226·sbh + 9·as²b. By hand, the FFN norm's pow also saves
  // its input, the residual stream (4·sbh), which the doc's count leaves out.
  c.e = 4;
  const LayerTable t32 = t5_block({m, c, gpu}, layout.units[2], {b, s, 0}, false, false);
  EXPECT_EQ(t32.saved_bytes(), (226 + 4) * T * h + 9 * a * s * s * b + 2 * 4 * T);
}

TEST(LayerTables, T5DecoderBlockIsAbout207MBPerSample) {
  const ModelConfig m = builtin_model("t5-3b");
  const ModelLayout layout = build_layout(m);
  const GpuTiming gpu(TimingOptions{}, Precision::Bf16, 2, 0, 0);
  TableConfig c;
  const LayerTable t = t5_block({m, c, gpu}, layout.units[26], {1, 512, 512}, true, false);
  EXPECT_NEAR(static_cast<double>(t.saved_bytes()), 207e6, 0.03 * 207e6);
}

}  // namespace
}  // namespace fraglab::workload
