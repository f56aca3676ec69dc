// DeviceSpec: the description of the device a replay runs on, parsed once from its text
// ("sim", "sim:40GiB", "sim:80GiB,external:1GiB"; sim_device.hpp has the grammar). Every run
// builds its own fresh Device from it (make_device), so a bad description fails once, before any
// trace is read, and the replay layer takes a device without knowing the command line.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "fraglab/cost_model.hpp"
#include "fraglab/device.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab {

struct DeviceSpec {
  std::string text = "sim";  // as given: results files and messages name the device by it
  SimDeviceConfig sim;       // the only device kind this build has
  // The call times every device built from it charges (`--cost-model`); null = the defaults.
  std::shared_ptr<const CostModel> costs;
  Bytes capacity() const { return sim.capacity; }
  Bytes external() const { return sim.external; }
};

// "sim[:...]" -> its spec. Throws InputError, one line naming the text as `--device '...'` and
// what was expected; "cuda..." says this build has no CUDA backend.
DeviceSpec parse_device_spec(std::string_view text);
// The spec of a simulated device of this configuration; its text ("sim:<capacity>B,external:<N>B")
// parses back to it.
DeviceSpec device_spec(const SimDeviceConfig& config);
// A fresh device. Does not throw: the spec was checked when it was parsed.
std::unique_ptr<Device> make_device(const DeviceSpec& spec);

}  // namespace fraglab
