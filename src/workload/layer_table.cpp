#include "workload/layer_table.hpp"

#include <algorithm>
#include <stdexcept>

namespace fraglab::workload {

void LayerTable::finalize() {
  auto bad = [&](const std::string& what) { throw std::logic_error("layer table " + name + ": " + what); };
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    TensorDef& d = tensors[t];
    if (d.view_of >= 0) {
      if (d.view_of >= static_cast<int>(t)) bad(d.name + " is a view of a later tensor");
      d.view_of = base(d.view_of);
    }
    d.producer = -1;
    d.last_fwd_use = -1;
    d.first_saver = -1;
  }
  last_saving_op = -1;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const int op = static_cast<int>(k);
    for (int t : ops[k].out) {
      if (tensors[t].kind == TensorKind::Input) bad(ops[k].name + " writes Input " + tensors[t].name);
      if (tensors[t].producer >= 0) bad(tensors[t].name + " produced twice");
      tensors[t].producer = op;
    }
    for (int t : ops[k].in) {
      if (tensors[t].kind != TensorKind::Input && tensors[t].producer < 0)
        bad(ops[k].name + " reads " + tensors[t].name + " before it exists");
      TensorDef& b = tensors[base(t)];
      b.last_fwd_use = std::max(b.last_fwd_use, op);
    }
    for (int t : ops[k].saves) {
      TensorDef& b = tensors[base(t)];
      if (b.first_saver < 0) b.first_saver = op;
      last_saving_op = op;
    }
  }
  // A view's own producer and scope keep the base alive too.
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const TensorDef& d = tensors[t];
    TensorDef& b = tensors[base(static_cast<int>(t))];
    b.last_fwd_use = std::max({b.last_fwd_use, d.producer, d.scope_end});
  }
  dies_after.assign(ops.size(), {});
  released_by.assign(ops.size(), {});
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const TensorDef& d = tensors[t];
    if (d.kind == TensorKind::Input || d.view_of >= 0) continue;
    if (d.producer < 0) bad(d.name + " is never produced");
    dies_after[static_cast<std::size_t>(d.last_fwd_use)].push_back(static_cast<int>(t));
    if (d.first_saver >= 0) released_by[static_cast<std::size_t>(d.first_saver)].push_back(static_cast<int>(t));
  }
}

int LayerTable::find(std::string_view tensor_name) const {
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].name == tensor_name) return static_cast<int>(t);
  throw std::logic_error("layer table " + name + " has no tensor " + std::string(tensor_name));
}

Bytes LayerTable::saved_bytes() const {
  Bytes total = 0;
  for (const TensorDef& d : tensors)
    if (d.view_of < 0 && d.kind == TensorKind::Internal && d.first_saver >= 0) total += d.size;
  return total;
}

}  // namespace fraglab::workload
