#include "cli/common.hpp"

#include <fmt/format.h>

#include <cctype>

#include <fstream>
#include <iostream>

#include "cli/device_choice.hpp"
#include "cli/log.hpp"
#include "fraglab/memory_budget.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::cli {

Bytes parse_max_memory(const std::string& text) {
  constexpr Bytes kSmallest = 16 * MiB;  // below this not even the command's own start fits
  const bool has_unit = !text.empty() && std::isalpha(static_cast<unsigned char>(text.back())) != 0;
  if (!has_unit)
    throw InputError(fmt::format("--max-memory '{}': expected a size with a unit, e.g. 8GiB, 512MiB or 2GB", text));
  const Bytes bytes = parse_byte_size(text, "--max-memory");
  if (bytes < kSmallest)
    throw InputError(fmt::format("--max-memory '{}': expected at least {}", text, format_bytes(kSmallest)));
  return bytes;
}

bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& options,
                        const po::positional_options_description& positional, po::variables_map& vm) {
  po::options_description all(options);
  const std::string max_memory_help = fmt::format(
      "the most heap memory the command may use, e.g. 8GiB (default: three quarters of this machine's "
      "memory, {}); an input that needs more is refused with an error (exit 2)",
      format_bytes(default_memory_budget()));
  all.add_options()("max-memory", po::value<std::string>(), max_memory_help.c_str())(
      "cost-model", po::value<std::string>(),
      "FILE.json: the time of each device call for device_time_s / stall_time_s (README \"Device time\"; default: "
      "published figures); for the commands that replay")("help,h", "show this help");
  // The global options (log.hpp), which may also come before the command.
  all.add_options()("verbose,v", "also show details on stderr (files read, settings chosen, timing)")(
      "quiet,q", "show only errors on stderr")(
      "no-progress", "never show progress on stderr (shown only on a terminal, after a second)");
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
  if (vm.count("verbose")) log::set_verbosity(log::Verbosity::Verbose);
  if (vm.count("quiet")) log::set_verbosity(log::Verbosity::Quiet);
  if (log::verbose_and_quiet()) throw InputError(log::kVerboseAndQuiet);
  if (vm.count("no-progress")) log::disable_progress();
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << all << '\n';
    return false;
  }
  if (vm.count("max-memory")) set_memory_budget(parse_max_memory(vm["max-memory"].as<std::string>()));
  if (vm.count("cost-model")) use_cost_model_file(vm["cost-model"].as<std::string>());
  po::notify(vm);
  return true;
}

std::uint32_t frames_option(const po::variables_map& vm, std::int64_t value, std::uint32_t absent) {
  constexpr std::int64_t kMost = std::int64_t{1} << 20;  // far beyond any recorded stack's depth
  if (!vm.count("frames")) return absent;
  if (value < 0 || value > kMost)
    throw InputError(fmt::format("--frames {}: expected a number of stack frames from 0 to {}", value, kMost));
  return static_cast<std::uint32_t>(value);
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
