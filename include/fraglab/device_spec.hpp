// DeviceSpec: the description of the device a replay runs on, parsed once from its text
// ("sim", "sim:40GiB", "sim:80GiB,external:1GiB"; sim_device.hpp has the grammar; "cuda" or
// "cuda:N", a real GPU through the CUDA driver, src/device/cuda/cuda_device.hpp). Every run
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

namespace cuda {
class CudaDriver;      // src/device/cuda/cuda_driver.hpp (built with the CUDA Toolkit's headers only)
class PrimaryContext;  // src/device/cuda/cuda_device.hpp
}  // namespace cuda

struct DeviceSpec {
  std::string text = "sim";  // as given: results files and messages name the device by it
  // A simulated device's configuration; for a CUDA device its total memory, and as external the
  // memory that was not free when the spec was parsed (cuMemGetInfo).
  SimDeviceConfig sim;
  // The call times every device built from it charges (`--cost-model`); null = the defaults.
  std::shared_ptr<const CostModel> costs;
  int cuda_ordinal = -1;                                // >= 0: the CUDA device of that ordinal
  std::shared_ptr<const cuda::CudaDriver> cuda_driver;  // loaded when the spec was parsed
  // The device's primary context, retained while any copy of the spec lives: every run of a
  // command uses the same context.
  std::shared_ptr<const cuda::PrimaryContext> cuda_context;
  bool is_cuda() const { return cuda_ordinal >= 0; }
  std::string kind() const { return is_cuda() ? "cuda:" + std::to_string(cuda_ordinal) : "sim"; }
  Bytes capacity() const { return sim.capacity; }
  Bytes external() const { return sim.external; }
};

// "sim[:...]" -> its spec; "cuda[:N]" loads the CUDA driver and reads device N's memory (a build
// without the CUDA Toolkit says it has no CUDA backend). Throws InputError, one line naming the
// text as `--device '...'` and what was expected, or that there is no CUDA driver or device.
DeviceSpec parse_device_spec(std::string_view text);
// The spec of a simulated device of this configuration; its text ("sim:<capacity>B,external:<N>B")
// parses back to it.
DeviceSpec device_spec(const SimDeviceConfig& config);
// A fresh device. A sim device does not throw (the spec was checked when it was parsed); a CUDA
// device throws when the driver fails it.
std::unique_ptr<Device> make_device(const DeviceSpec& spec);

}  // namespace fraglab
