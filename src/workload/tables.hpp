// Per-layer tensor tables of each model family (wm §2.3-§2.6). Tensor names the model drivers
// bind: blocks "x" (input) and "y" (output); T5 also "self_bias", "cross_bias" (Input in blocks
// >= 1, Output of block 0), "enc_out", "self_mask", "cross_mask"; embeddings "ids" → "h0";
// heads "h" + "labels" → "logits", "loss"; T5 encoder final "h" → "enc_out".
#pragma once

#include "workload/table_builder.hpp"

namespace fraglab::workload {

struct TableContext {
  const ModelConfig& model;
  const TableConfig& config;
  const GpuTiming& timing;
};

// GPT2 (wm §2.3, §2.6)
LayerTable gpt2_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape);
LayerTable gpt2_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape);
LayerTable gpt2_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape);

// T5 (wm §2.4). `first`: block 0 of its stack, which computes the position bias(es).
LayerTable t5_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape, bool decoder, bool first);
LayerTable t5_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape, bool decoder);
LayerTable t5_encoder_final(const TableContext& ctx, const UnitDef& root, const TableShape& shape);
LayerTable t5_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape);
// The extended attention masks T5Stack builds (no gradients): encoder "self_mask" [b,1,1,s_e];
// decoder "self_mask" (causal, [b,1,s_d,s_d]) and "cross_mask" [b,1,1,s_e].
LayerTable t5_masks(const TableContext& ctx, const UnitDef& root, const TableShape& shape, bool decoder);

// Llama (wm §2.5)
LayerTable llama_block(const TableContext& ctx, const UnitDef& unit, const TableShape& shape);
LayerTable llama_embedding(const TableContext& ctx, const UnitDef& root, const TableShape& shape);
LayerTable llama_head(const TableContext& ctx, const UnitDef& root, const TableShape& shape);

}  // namespace fraglab::workload
