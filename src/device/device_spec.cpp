// parse_device_spec / make_device: see device_spec.hpp.
#include "fraglab/device_spec.hpp"

#include <fmt/format.h>

namespace fraglab {

DeviceSpec parse_device_spec(std::string_view text) {
  if (text.rfind("sim", 0) == 0) return DeviceSpec{std::string(text), parse_sim_device(text), nullptr};
  if (text.rfind("cuda", 0) == 0) {
    throw InputError(fmt::format("--device '{}': this build has no CUDA device backend yet (use sim)", text));
  }
  throw InputError(fmt::format("--device '{}': unknown device (expected sim[:CAPACITY][,external:BYTES])", text));
}

DeviceSpec device_spec(const SimDeviceConfig& config) {
  return DeviceSpec{fmt::format("sim:{}B,external:{}B", config.capacity, config.external), config, nullptr};
}

std::unique_ptr<Device> make_device(const DeviceSpec& spec) {
  std::unique_ptr<Device> device = std::make_unique<SimDevice>(spec.sim);
  if (spec.costs) device->set_cost_model(*spec.costs);
  return device;
}

}  // namespace fraglab
