// The parameters of a model, grouped the way every framework here wraps them: one unit per
// transformer block plus a root unit with everything else (wm §3.1: transformer_auto_wrap_policy
// over the block class → GPT2-XL and T5-3B have 49 units). Inside a unit, parameters belong to
// leaf modules (Linear, LayerNorm, Embedding): the granularity DeepSpeed ZeRO-3 gathers at
// (wm §4.1) and the order autograd produces their gradients in.
//
// Invariants: units[0] is the root; block units follow in forward execution order (T5: encoder
// blocks, then decoder blocks). Tied weights appear once as a parameter and may be referenced by
// several modules (GPT2 wte / lm_head, T5 shared / lm_head).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/workload.hpp"

namespace fraglab::workload {

struct ParamDef {
  std::string name;
  std::uint64_t rows = 0;  // dim 0 (FSDP2 shards along it, wm §3.2)
  std::uint64_t cols = 1;  // product of the other dims (1 for vectors)
  std::uint64_t numel() const { return rows * cols; }
};

struct ModuleDef {
  std::string name;
  std::vector<int> params;  // indices into UnitDef::params
};

struct UnitDef {
  std::string name;
  std::vector<ParamDef> params;
  std::vector<ModuleDef> modules;
  std::uint64_t numel() const;
  // Index of the module called `name`; throws std::logic_error if absent (a table bug).
  int module(std::string_view name) const;
};

struct ModelLayout {
  std::vector<UnitDef> units;        // [0] root, then blocks in forward order
  std::uint32_t encoder_blocks = 0;  // decoder-only models: all blocks are "encoder" blocks here
  std::uint32_t decoder_blocks = 0;
  std::uint64_t numel() const;
  int block_unit(std::uint32_t block) const { return 1 + static_cast<int>(block); }
};

ModelLayout build_layout(const ModelConfig& model);

}  // namespace fraglab::workload
