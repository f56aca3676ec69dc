// parse_device_spec / make_device: see device_spec.hpp.
#include "fraglab/device_spec.hpp"

#include <fmt/format.h>

#include <charconv>

#ifdef FRAGLAB_HAVE_CUDA
#include "device/cuda/cuda_device.hpp"
#endif

namespace fraglab {
namespace {

// "cuda" -> 0, "cuda:3" -> 3.
int cuda_ordinal(std::string_view text) {
  if (text == "cuda") return 0;
  const std::string_view number = text.substr(std::min<size_t>(text.size(), 5));
  int ordinal = -1;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), ordinal);
  if (text.substr(0, 5) != "cuda:" || number.empty() || ec != std::errc() || end != number.data() + number.size() ||
      ordinal < 0) {
    throw InputError(fmt::format("--device '{}': expected cuda or cuda:N, N a device ordinal (e.g. cuda:0)", text));
  }
  return ordinal;
}

DeviceSpec parse_cuda(std::string_view text) {
  DeviceSpec spec;
  spec.text = std::string(text);
  spec.cuda_ordinal = cuda_ordinal(text);
#ifdef FRAGLAB_HAVE_CUDA
  const std::string what = fmt::format("--device '{}'", text);
  spec.cuda_driver = cuda::CudaDriver::load(what);
  const cuda::CudaDeviceInfo info = cuda::query_device(*spec.cuda_driver, spec.cuda_ordinal, what);
  // Retained from here on (query_device read the free memory with it retained too, so the
  // context's own memory counts as external).
  spec.cuda_context = std::make_shared<const cuda::PrimaryContext>(spec.cuda_driver, spec.cuda_ordinal);
  spec.sim.capacity = info.total;
  spec.sim.external = info.total - std::min(info.free, info.total);
  return spec;
#else
  throw InputError(fmt::format(
      "--device '{}': this build has no CUDA device backend (built without the CUDA Toolkit; use sim)", text));
#endif
}

}  // namespace

DeviceSpec parse_device_spec(std::string_view text) {
  if (text.rfind("sim", 0) == 0) {
    DeviceSpec spec;
    spec.text = std::string(text);
    spec.sim = parse_sim_device(text);
    return spec;
  }
  if (text.rfind("cuda", 0) == 0) return parse_cuda(text);
  throw InputError(
      fmt::format("--device '{}': unknown device (expected sim[:CAPACITY][,external:BYTES] or cuda[:N])", text));
}

DeviceSpec device_spec(const SimDeviceConfig& config) {
  DeviceSpec spec;
  spec.text = fmt::format("sim:{}B,external:{}B", config.capacity, config.external);
  spec.sim = config;
  return spec;
}

std::unique_ptr<Device> make_device(const DeviceSpec& spec) {
#ifdef FRAGLAB_HAVE_CUDA
  if (spec.is_cuda()) {
    auto device = std::make_unique<cuda::CudaDevice>(spec.cuda_driver, spec.cuda_ordinal, spec.sim,
                                                     fmt::format("--device '{}'", spec.text));
    if (spec.costs) device->set_cost_model(*spec.costs);
    return device;
  }
#endif
  std::unique_ptr<Device> device = std::make_unique<SimDevice>(spec.sim);
  if (spec.costs) device->set_cost_model(*spec.costs);
  return device;
}

}  // namespace fraglab
