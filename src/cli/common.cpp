#include "cli/common.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>

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
