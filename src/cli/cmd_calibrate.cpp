// fraglab calibrate [--device cuda:N] -o costs.json [--repeat K]: measures the cost model's device
// calls on a GPU and writes them as a cost-model file (fraglab/cost_model_file.hpp).
#include <fmt/format.h>

#include <iostream>

#include "cli/common.hpp"
#include "cli/output_guard.hpp"
#include "fraglab/cost_model_file.hpp"
#include "fraglab/device_spec.hpp"

#ifdef FRAGLAB_HAVE_CUDA
#include "device/cuda/calibrate.hpp"
#endif

namespace fraglab::cli {

int cmd_calibrate(int argc, char** argv) {
  po::options_description options("options");
  std::string device_text = "cuda:0";
  std::string out_path;
  int repeat = 5;
  options.add_options()("device", po::value(&device_text), "the GPU to measure: cuda or cuda:N (default cuda:0)")(
      "output,o", po::value(&out_path)->required(), "the cost-model file to write (- for stdout)")(
      "repeat", po::value(&repeat), "calls of each kind at each size; the median is kept (default 5, 1 to 1000)")(
      "overwrite", "replace an existing output file (without it, an existing non-empty file is an error)");
  po::positional_options_description positional;
  po::variables_map vm;
  if (!parse_command_line(argc, argv,
                          "usage: fraglab calibrate [--device cuda:N] -o costs.json [--repeat K]\n"
                          "Times cudaMalloc, cudaFree, cudaDeviceSynchronize and the VMM calls (cuMemAddressReserve/"
                          "Free, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease) on the GPU at "
                          "sizes from 2 MiB to 1 GiB and writes a --cost-model file. Needs a GPU and its driver.",
                          options, positional, vm)) {
    return 0;
  }
  if (repeat < 1 || repeat > 1000) throw InputError(fmt::format("--repeat {}: expected 1 to 1000", repeat));
  if (device_text.rfind("cuda", 0) != 0) {
    throw InputError(fmt::format("--device '{}': calibrate measures a GPU (expected cuda or cuda:N)", device_text));
  }
  refuse_overwrite(out_path, vm.count("overwrite") > 0);
  const DeviceSpec device = parse_device_spec(device_text);  // "no CUDA driver" / no backend: exit 2
#ifdef FRAGLAB_HAVE_CUDA
  const Calibration calibration =
      cuda::measure_costs(*device.cuda_driver, device.cuda_ordinal, repeat, fmt::format("--device '{}'", device_text));
  write_output(out_path, cost_model_file_text(calibration));
  if (out_path != "-") {
    std::cout << fmt::format("{} (driver {}): {}\n", calibration.gpu, calibration.driver, out_path);
    for (const CallFit& call : calibration.calls) {
      std::cout << fmt::format("  {:<22} {:>10.2f} us + {:>10.2f} us/GiB  ({} calls)\n", call.name, call.fixed_us,
                               call.per_gib_us, call.samples);
    }
  }
  return 0;
#else
  (void)device;
  return 2;  // not reached: parse_device_spec says the build has no CUDA backend
#endif
}

}  // namespace fraglab::cli
