#include "workload/optimizer.hpp"

namespace fraglab::workload {

AdamModel::AdamModel(OptimizerKind kind, std::vector<std::uint64_t> numels)
    : kind_(kind),
      numels_(std::move(numels)),
      exp_avg_(numels_.size(), 0),
      exp_avg_sq_(numels_.size(), 0),
      step_counter_(numels_.size(), 0),
      initialised_(numels_.size(), false) {}

void AdamModel::init_state(TraceBuilder& tb, std::size_t i) {
  if (initialised_[i]) return;
  initialised_[i] = true;
  // torch fused/capturable keeps `step` as a device scalar; foreach keeps it on the CPU.
  if (kind_ == OptimizerKind::AdamwFused) step_counter_[i] = tb.alloc(4, Stream::Default, Tag::Opt);
  exp_avg_[i] = tb.alloc(4 * numels_[i], Stream::Default, Tag::Opt);
  exp_avg_sq_[i] = tb.alloc(4 * numels_[i], Stream::Default, Tag::Opt);
}

void AdamModel::step(TraceBuilder& tb) {
  GpuTiming& gpu = tb.gpu();
  double total = 0;
  for (std::size_t i = 0; i < numels_.size(); ++i) {
    init_state(tb, i);
    total += static_cast<double>(numels_[i]);
  }
  const bool foreach = kind_ == OptimizerKind::AdamwForeach || kind_ == OptimizerKind::AdamL2Foreach;
  auto temp_list = [&] {
    std::vector<TensorId> ids;
    for (std::uint64_t n : numels_) ids.push_back(tb.alloc(4 * n, Stream::Default, Tag::Temp));
    return ids;
  };
  if (kind_ == OptimizerKind::AdamL2Foreach) {
    std::vector<TensorId> grads = temp_list();  // device_grads = _foreach_add(grads, params, wd)
    gpu.launch(Stream::Default, gpu.memory_us(12 * total));
    gpu.launch(Stream::Default, gpu.memory_us(24 * total));  // lerp_, mul_, addcmul_
    for (TensorId id : grads) tb.free(id);                   // del device_grads
  } else if (foreach) {
    gpu.launch(Stream::Default, gpu.memory_us(32 * total));  // mul_ (wd), lerp_, mul_, addcmul_
  }
  if (foreach) {
    std::vector<TensorId> sqrt = temp_list();                // _foreach_sqrt(exp_avg_sq)
    gpu.launch(Stream::Default, gpu.memory_us(28 * total));  // div_, add_, addcdiv_
    for (TensorId id : sqrt) tb.free(id);
  } else {
    gpu.launch(Stream::Default, gpu.memory_us(28 * total));  // one fused kernel per chunk
  }
}

void AdamModel::step_one(TraceBuilder& tb, std::size_t i) {
  init_state(tb, i);
  GpuTiming& gpu = tb.gpu();
  const bool foreach = kind_ == OptimizerKind::AdamwForeach || kind_ == OptimizerKind::AdamL2Foreach;
  TensorId l2 = 0;
  if (kind_ == OptimizerKind::AdamL2Foreach) l2 = tb.alloc(4 * numels_[i], Stream::Default, Tag::Temp);
  gpu.launch(Stream::Default, gpu.memory_us(28.0 * static_cast<double>(numels_[i])));
  tb.free(l2);
  if (foreach) {
    const TensorId s = tb.alloc(4 * numels_[i], Stream::Default, Tag::Temp);
    gpu.launch(Stream::Default, gpu.memory_us(16.0 * static_cast<double>(numels_[i])));
    tb.free(s);
  }
}

}  // namespace fraglab::workload
