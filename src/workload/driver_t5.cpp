// T5ForConditionalGeneration micro-batch (wm §2.4, §6): encoder masks and embedding, encoder
// blocks (block 0 computes the position bias the later blocks share), final norm → encoder
// output; decoder masks, shifted labels and embedding, decoder blocks (self and cross biases from
// block 0; keys/values from the encoder output), final norm, lm_head, loss. Backward in reverse:
// the decoder embedding's backward runs before the encoder's final norm (autograd takes the
// later-created node first).
#include "workload/model_driver.hpp"

namespace fraglab::workload {

namespace {

class T5Driver final : public ModelDriver {
 public:
  explicit T5Driver(const DriverContext& ctx)
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
    const std::uint64_t te = shape.batch * shape.len, td = shape.batch * shape.tgt_len;
    Batch& batch = eval_ ? eval_batch_ : batch_;
    batch.replace(tb_, {8 * te, 8 * te, 8 * td});  // input_ids, attention_mask, labels
    if (!eval_) {
      outputs_.begin_forward(tb_);
      pool_.clear();
    }
    const std::uint32_t le = layout_.encoder_blocks, ld = layout_.decoder_blocks;
    enc_.assign(le + 1, Act{});
    dec_.assign(ld + 1, Act{});
    enc_bias_ = dec_self_bias_ = dec_cross_bias_ = enc_mask_ = dec_mask_ = cross_mask_ = enc_out_ = Act{};
    enc_runs_.clear();
    dec_runs_.clear();

    fw_.pre_forward(0);
    LayerRun enc_masks(t_.enc_masks, 0, Recompute::None);
    enc_masks.bind(t_.enc_masks.find("self_mask"), &enc_mask_);
    enc_masks.forward(step_ctx_);
    enc_embed_ = run_root(t_.enc_embed, {{"ids", &batch[0]}, {"h0", &enc_[0]}});
    for (std::uint32_t k = 0; k < le; ++k) {
      const LayerTable& table = k == 0 ? t_.enc_first : t_.enc_block;
      std::vector<std::pair<const char*, Act*>> binds{{"x", &enc_[k]}, {"y", &enc_[k + 1]}, {"self_bias", &enc_bias_}};
      if (k == 0) binds.emplace_back("self_mask", &enc_mask_);
      enc_runs_.push_back(run_block(table, layout_.block_unit(k), binds));
      if (eval_) release(enc_[k]);  // no_grad: hidden_states now names the block's output
    }
    enc_final_ = run_root(t_.enc_final, {{"h", &enc_[le]}, {"enc_out", &enc_out_}});
    if (!checkpointing() || eval_) release(enc_mask_);  // T5Stack returned; nothing saved it
    if (eval_) {
      release(enc_[le]);
      release(enc_bias_);  // nothing saved the position bias either
    }

    LayerRun dec_masks(t_.dec_masks, 0, Recompute::None);
    dec_masks.bind(t_.dec_masks.find("self_mask"), &dec_mask_);
    dec_masks.bind(t_.dec_masks.find("cross_mask"), &cross_mask_);
    dec_masks.forward(step_ctx_);
    dec_embed_ = run_root(t_.dec_embed, {{"ids", &batch[2]}, {"h0", &dec_[0]}});
    for (std::uint32_t k = 0; k < ld; ++k) {
      const LayerTable& table = k == 0 ? t_.dec_first : t_.dec_block;
      std::vector<std::pair<const char*, Act*>> binds{{"x", &dec_[k]},
                                                      {"y", &dec_[k + 1]},
                                                      {"enc_out", &enc_out_},
                                                      {"self_bias", &dec_self_bias_},
                                                      {"cross_bias", &dec_cross_bias_}};
      if (k == 0) {
        binds.emplace_back("self_mask", &dec_mask_);
        binds.emplace_back("cross_mask", &cross_mask_);
      }
      dec_runs_.push_back(run_block(table, layout_.block_unit(le + k), binds));
      if (eval_) release(dec_[k]);
    }
    head_ = run_root(t_.head, {{"h", &dec_[ld]},
                               {"labels", &batch[2]},
                               {"logits", eval_ ? &eval_logits_ : &outputs_.logits()},
                               {"loss", eval_ ? &eval_loss_ : &outputs_.loss()}});
    if (!checkpointing() || eval_) {
      release(dec_mask_);
      release(cross_mask_);
    }
    fw_.post_forward(0);
    if (eval_) {
      // The outputs (loss, logits, encoder_last_hidden_state) are dropped after the loss is taken.
      for (Act* a : {&dec_[ld], &dec_self_bias_, &dec_cross_bias_, &enc_out_, &eval_logits_, &eval_loss_}) release(*a);
      enc_runs_.clear();
      dec_runs_.clear();
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
    const std::uint32_t le = layout_.encoder_blocks, ld = layout_.decoder_blocks;
    outputs_.seed_backward(tb_, pool_);
    fw_.pre_backward(0);
    head_->backward(step_ctx_);
    tb_.free(dec_[ld].id);
    for (std::uint32_t k = ld; k-- > 0;) {
      const int unit = layout_.block_unit(le + k);
      fw_.pre_backward(unit);
      dec_runs_[k]->backward(step_ctx_);
      fw_.post_backward(unit);
      tb_.free(dec_[k].id);
      dec_runs_[k].reset();
    }
    // The last decoder block is done: the encoder output, the decoder biases and masks go.
    for (Act* a : {&enc_out_, &dec_self_bias_, &dec_cross_bias_, &dec_mask_, &cross_mask_}) release(*a);
    dec_embed_->backward(step_ctx_);
    enc_final_->backward(step_ctx_);
    tb_.free(enc_[le].id);
    for (std::uint32_t k = le; k-- > 0;) {
      const int unit = layout_.block_unit(k);
      fw_.pre_backward(unit);
      enc_runs_[k]->backward(step_ctx_);
      fw_.post_backward(unit);
      tb_.free(enc_[k].id);
      enc_runs_[k].reset();
    }
    for (Act* a : {&enc_bias_, &enc_mask_}) release(*a);
    enc_embed_->backward(step_ctx_);
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
  struct Tables {
    LayerTable enc_masks, enc_embed, enc_first, enc_block, enc_final;
    LayerTable dec_masks, dec_embed, dec_first, dec_block, head;
  };

  void release(Act& a) {
    tb_.free(a.id);
    a.id = 0;
  }

  bool checkpointing() const { return o_.recompute != Recompute::None; }

  std::unique_ptr<LayerRun> run_root(const LayerTable& table,
                                     std::initializer_list<std::pair<const char*, Act*>> binds) {
    // Under no_grad a forward keeps nothing for backward: the executor's checkpointed forward.
    auto run = std::make_unique<LayerRun>(table, 0, eval_ ? Recompute::NonReentrant : Recompute::None);
    for (const auto& [name, act] : binds) run->bind(table.find(name), act);
    run->forward(step_ctx_);
    return run;
  }

  std::unique_ptr<LayerRun> run_block(const LayerTable& table, int unit,
                                      const std::vector<std::pair<const char*, Act*>>& binds) {
    fw_.pre_forward(unit);
    auto run = std::make_unique<LayerRun>(table, unit, eval_ ? Recompute::NonReentrant : o_.recompute);
    for (const auto& [name, act] : binds) run->bind(table.find(name), act);
    run->forward(step_ctx_);
    fw_.post_forward(unit);
    return run;
  }

  void build_tables(const StepShape& shape) {
    if (shape.batch == shape_.batch && shape.len == shape_.len && shape.tgt_len == shape_.tgt_len && shape_.batch != 0)
      return;
    shape_ = shape;
    const TableContext ctx{o_.model, config_, tb_.gpu()};
    const TableShape enc{shape.batch, shape.len, 0};
    const TableShape dec{shape.batch, shape.tgt_len, shape.len};
    const UnitDef& root = layout_.units[0];
    const std::uint32_t le = layout_.encoder_blocks, ld = layout_.decoder_blocks;
    // Block 0 of each stack owns the relative-bias module, so its module indices differ.
    const UnitDef& enc0 = layout_.units[static_cast<std::size_t>(layout_.block_unit(0))];
    const UnitDef& enc1 = layout_.units[static_cast<std::size_t>(layout_.block_unit(le > 1 ? 1 : 0))];
    const UnitDef& dec0 = layout_.units[static_cast<std::size_t>(layout_.block_unit(le))];
    const UnitDef& dec1 = layout_.units[static_cast<std::size_t>(layout_.block_unit(le + (ld > 1 ? 1 : 0)))];
    t_.enc_masks = t5_masks(ctx, root, enc, false);
    t_.enc_embed = t5_embedding(ctx, root, enc, false);
    t_.enc_first = t5_block(ctx, enc0, enc, false, true);
    if (le > 1) t_.enc_block = t5_block(ctx, enc1, enc, false, false);
    t_.enc_final = t5_encoder_final(ctx, root, enc);
    t_.dec_masks = t5_masks(ctx, root, dec, true);
    t_.dec_embed = t5_embedding(ctx, root, dec, true);
    t_.dec_first = t5_block(ctx, dec0, dec, true, true);
    if (ld > 1) t_.dec_block = t5_block(ctx, dec1, dec, true, false);
    t_.head = t5_head(ctx, root, dec);
  }

  const WorkloadOptions& o_;
  const ModelLayout& layout_;
  FrameworkModel& fw_;
  TraceBuilder& tb_;
  GradPool pool_;
  StepContext step_ctx_;
  TableConfig config_;
  StepShape shape_;
  Tables t_;
  Batch batch_, eval_batch_;
  LoopOutputs outputs_;
  bool eval_ = false;  // the forward in progress is an evaluation batch
  Act eval_logits_, eval_loss_;
  std::vector<Act> enc_, dec_;
  Act enc_bias_, dec_self_bias_, dec_cross_bias_, enc_mask_, dec_mask_, cross_mask_, enc_out_;
  std::unique_ptr<LayerRun> enc_embed_, enc_final_, dec_embed_, head_;
  std::vector<std::unique_ptr<LayerRun>> enc_runs_, dec_runs_;
};

}  // namespace

std::unique_ptr<ModelDriver> make_t5_driver(const DriverContext& ctx) { return std::make_unique<T5Driver>(ctx); }

}  // namespace fraglab::workload
