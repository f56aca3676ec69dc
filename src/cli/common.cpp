#include "cli/common.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "fraglab/sim_device.hpp"

namespace fraglab::cli {

bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& options,
                        const po::positional_options_description& positional, po::variables_map& vm) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << all << '\n';
    return false;
  }
  po::notify(vm);
  return true;
}

std::unique_ptr<Device> make_device(const std::string& spec) {
  if (spec.rfind("sim", 0) == 0) return std::make_unique<SimDevice>(parse_sim_device(spec));
  if (spec.rfind("cuda", 0) == 0) {
    throw InputError(fmt::format("--device '{}': this build has no CUDA device backend yet (use sim)", spec));
  }
  throw InputError(fmt::format("--device '{}': unknown device (expected sim[:CAPACITY][,external:BYTES])", spec));
}

DeviceDescription describe_device(const std::string& spec) {
  std::unique_ptr<Device> device = make_device(spec);
  DeviceDescription d{device->kind(), device->capacity(), 0, ""};
  if (const auto* sim = dynamic_cast<const SimDevice*>(device.get())) d.external = sim->external();
  return d;
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(fmt::format("{}: cannot open for writing", path));
  out << text;
  if (!out) throw InputError(fmt::format("{}: write failed", path));
}

}  // namespace fraglab::cli
