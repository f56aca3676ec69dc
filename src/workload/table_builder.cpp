#include "workload/table_builder.hpp"

namespace fraglab::workload {

TableBuilder::TableBuilder(std::string name, const UnitDef& unit, const GpuTiming& timing)
    : unit_(unit), timing_(timing) {
  table_.name = std::move(name);
}

int TableBuilder::input(std::string name, Bytes size, bool requires_grad) {
  table_.tensors.push_back(TensorDef{std::move(name), size, requires_grad, TensorKind::Input});
  return static_cast<int>(table_.tensors.size() - 1);
}

int TableBuilder::output(std::string name, Bytes size) {
  table_.tensors.push_back(TensorDef{std::move(name), size, true, TensorKind::Output});
  return static_cast<int>(table_.tensors.size() - 1);
}

int TableBuilder::tensor(std::string name, Bytes size, bool requires_grad) {
  table_.tensors.push_back(TensorDef{std::move(name), size, requires_grad, TensorKind::Internal});
  return static_cast<int>(table_.tensors.size() - 1);
}

int TableBuilder::view(std::string name, int base, Bytes size) {
  TensorDef d{std::move(name), size, table_.tensors[static_cast<std::size_t>(base)].requires_grad,
              TensorKind::Internal};
  d.view_of = base;
  table_.tensors.push_back(std::move(d));
  return static_cast<int>(table_.tensors.size() - 1);
}

TableBuilder::Op TableBuilder::op(std::string name, std::initializer_list<int> in, std::initializer_list<int> out) {
  OpDef d;
  d.name = std::move(name);
  d.in = in;
  d.out = out;
  table_.ops.push_back(std::move(d));
  timed_.push_back(false);
  return {*this, static_cast<int>(table_.ops.size() - 1)};
}

OpDef& TableBuilder::Op::def() { return b_.table_.ops[static_cast<std::size_t>(index_)]; }

TableBuilder::Op& TableBuilder::Op::saves(std::initializer_list<int> tensors) {
  def().saves.insert(def().saves.end(), tensors);
  return *this;
}

TableBuilder::Op& TableBuilder::Op::module(std::string_view name) {
  def().module = b_.unit_.module(name);
  return *this;
}

TableBuilder::Op& TableBuilder::Op::matmul(double flops) {
  // Backward of a matmul computes two products (input and weight/other operand gradients).
  def().fwd_us = b_.timing_.matmul_us(flops);
  def().bwd_us = 2 * def().fwd_us;
  b_.timed_[static_cast<std::size_t>(index_)] = true;
  return *this;
}

TableBuilder::Op& TableBuilder::Op::fwd_temp(Bytes bytes) {
  def().fwd_temps.push_back(bytes);
  return *this;
}

TableBuilder::Op& TableBuilder::Op::bwd_temp(Bytes bytes) {
  def().bwd_temps.push_back(bytes);
  return *this;
}

TableBuilder::Op& TableBuilder::Op::alias() {
  def().grad = GradRule::Alias;
  return *this;
}

LayerTable TableBuilder::finish() {
  // Ops without a matmul are memory-bound: they read their inputs and write their outputs once;
  // their backward moves about twice that.
  for (std::size_t k = 0; k < table_.ops.size(); ++k) {
    if (timed_[k]) continue;
    OpDef& op = table_.ops[k];
    double bytes = 0;
    for (int t : op.in) bytes += static_cast<double>(table_.tensors[static_cast<std::size_t>(t)].size);
    for (int t : op.out) bytes += static_cast<double>(table_.tensors[static_cast<std::size_t>(t)].size);
    op.fwd_us = timing_.memory_us(bytes);
    op.bwd_us = 2 * op.fwd_us;
  }
  table_.finalize();
  return std::move(table_);
}

}  // namespace fraglab::workload
