#include "workload/framework.hpp"

namespace fraglab::workload {

std::unique_ptr<FrameworkModel> make_framework(const FrameworkContext& ctx) {
  switch (ctx.options.framework) {
    case Framework::Fsdp1:
      return make_fsdp1(ctx);
    case Framework::Fsdp2:
      return make_fsdp2(ctx);
    case Framework::Zero3:
      return make_zero3(ctx);
    case Framework::Zero1:
    case Framework::Zero2:
      return make_zero12(ctx);
  }
  return nullptr;
}

GradContributions::GradContributions(const ModelLayout& layout) : layout_(layout) {
  for (const UnitDef& u : layout.units) {
    expected_.emplace_back(u.params.size(), 0);
    received_.emplace_back(u.params.size(), 0);
  }
}

void GradContributions::reset() {
  for (auto& v : expected_) std::fill(v.begin(), v.end(), 0);
  for (auto& v : received_) std::fill(v.begin(), v.end(), 0);
}

void GradContributions::forward_use(ModuleRef m) {
  for (int p : layout_.units[static_cast<std::size_t>(m.unit)].modules[static_cast<std::size_t>(m.module)].params)
    ++expected_[static_cast<std::size_t>(m.unit)][static_cast<std::size_t>(p)];
}

std::vector<int> GradContributions::backward(ModuleRef m) {
  std::vector<int> complete;
  const auto u = static_cast<std::size_t>(m.unit);
  for (int p : layout_.units[u].modules[static_cast<std::size_t>(m.module)].params) {
    const int got = ++received_[u][static_cast<std::size_t>(p)];
    if (got >= expected_[u][static_cast<std::size_t>(p)]) complete.push_back(p);
  }
  return complete;
}

}  // namespace fraglab::workload
