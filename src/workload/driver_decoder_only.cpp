// GPT2 / Llama micro-batch (wm §6): batch → embedding (root) → blocks → final norm, lm_head and
// loss (root); backward in reverse.
#include "workload/model_driver.hpp"

namespace fraglab::workload {

namespace {

class DecoderOnlyDriver final : public ModelDriver {
 public:
  explicit DecoderOnlyDriver(const DriverContext& ctx)
      : o_(ctx.options),
        layout_(ctx.layout),
        fw_(ctx.framework),
        tb_(ctx.tb),
        pool_(ctx.tb),
        step_ctx_{ctx.tb, ctx.framework, pool_},
        config_(table_config(ctx.options)),
        outputs_(ctx.options.retain_logits) {}

  void forward(const StepShape& shape) override {
    build_tables(shape);
    const std::uint64_t T = shape.batch * shape.len;
    Batch& batch = eval_ ? eval_batch_ : batch_;
    batch.replace(tb_, {8 * T, 8 * T, 8 * T});  // input_ids, attention_mask, labels
    if (!eval_) {
      outputs_.begin_forward(tb_);
      pool_.clear();
    }
    // Under no_grad a forward keeps nothing for backward: the executor's checkpointed forward.
    const Recompute root_mode = eval_ ? Recompute::NonReentrant : Recompute::None;
    const Recompute block_mode = eval_ ? Recompute::NonReentrant : o_.recompute;
    const std::uint32_t L = layout_.encoder_blocks;
    hs_.assign(L + 1, Act{});
    fw_.pre_forward(0);
    embed_run_ = std::make_unique<LayerRun>(embed_, 0, root_mode);
    embed_run_->bind(embed_.find("ids"), &batch[0]);
    embed_run_->bind(embed_.find("h0"), &hs_[0]);
    embed_run_->forward(step_ctx_);
    runs_.clear();
    for (std::uint32_t k = 0; k < L; ++k) {
      const int unit = layout_.block_unit(k);
      fw_.pre_forward(unit);
      runs_.push_back(std::make_unique<LayerRun>(block_, unit, block_mode));
      runs_.back()->bind(block_.find("x"), &hs_[k]);
      runs_.back()->bind(block_.find("y"), &hs_[k + 1]);
      runs_.back()->forward(step_ctx_);
      fw_.post_forward(unit);
      if (eval_) tb_.free(hs_[k].id);  // hidden_states now names the block's output
    }
    head_run_ = std::make_unique<LayerRun>(head_, 0, root_mode);
    head_run_->bind(head_.find("h"), &hs_[L]);
    head_run_->bind(head_.find("labels"), &batch[2]);
    head_run_->bind(head_.find("logits"), eval_ ? &eval_logits_ : &outputs_.logits());
    head_run_->bind(head_.find("loss"), eval_ ? &eval_loss_ : &outputs_.loss());
    head_run_->forward(step_ctx_);
    fw_.post_forward(0);
    if (eval_) {
      tb_.free(hs_[L].id);
      tb_.free(eval_logits_.id);  // prediction_loss_only: the logits are dropped with the outputs
      tb_.free(eval_loss_.id);
      eval_logits_ = eval_loss_ = Act{};
      runs_.clear();
      return;
    }
    outputs_.forward_returned(tb_);
  }

  void eval_forward(const StepShape& shape) override {
    eval_ = true;
    forward(shape);
    eval_ = false;
  }

  void end_eval() override { eval_batch_.release(tb_); }

  void backward() override {
    const std::uint32_t L = layout_.encoder_blocks;
    outputs_.seed_backward(tb_, pool_);
    fw_.pre_backward(0);
    head_run_->backward(step_ctx_);
    tb_.free(hs_[L].id);
    for (std::uint32_t k = L; k-- > 0;) {
      const int unit = layout_.block_unit(k);
      fw_.pre_backward(unit);
      runs_[k]->backward(step_ctx_);
      fw_.post_backward(unit);
      tb_.free(hs_[k].id);  // the block input the checkpoint (or ln_1) held
      runs_[k].reset();
    }
    embed_run_->backward(step_ctx_);
    fw_.post_backward(0);
  }

  void end_step() override { outputs_.end_step(tb_); }

  void finish() override {
    outputs_.end_step(tb_);
    outputs_.finish(tb_);
    batch_.release(tb_);
    eval_batch_.release(tb_);
  }

 private:
  void build_tables(const StepShape& shape) {
    if (shape.batch == shape_.batch && shape.len == shape_.len && shape_.batch != 0) return;
    shape_ = shape;
    const TableContext ctx{o_.model, config_, tb_.gpu()};
    const TableShape ts{shape.batch, shape.len, 0};
    const UnitDef& root = layout_.units[0];
    const UnitDef& block_unit = layout_.units[1];  // every block has the same modules
    if (o_.model.family == ModelFamily::Gpt2) {
      embed_ = gpt2_embedding(ctx, root, ts);
      block_ = gpt2_block(ctx, block_unit, ts);
      head_ = gpt2_head(ctx, root, ts);
    } else {
      embed_ = llama_embedding(ctx, root, ts);
      block_ = llama_block(ctx, block_unit, ts);
      head_ = llama_head(ctx, root, ts);
    }
  }

  const WorkloadOptions& o_;
  const ModelLayout& layout_;
  FrameworkModel& fw_;
  TraceBuilder& tb_;
  GradPool pool_;
  StepContext step_ctx_;
  TableConfig config_;
  StepShape shape_;
  LayerTable embed_, block_, head_;
  Batch batch_, eval_batch_;
  LoopOutputs outputs_;
  bool eval_ = false;  // the forward in progress is an evaluation batch
  Act eval_logits_, eval_loss_;
  std::vector<Act> hs_;
  std::unique_ptr<LayerRun> embed_run_, head_run_;
  std::vector<std::unique_ptr<LayerRun>> runs_;
};

}  // namespace

std::unique_ptr<ModelDriver> make_decoder_only_driver(const DriverContext& ctx) {
  return std::make_unique<DecoderOnlyDriver>(ctx);
}

}  // namespace fraglab::workload
