// fraglab policies: every registered policy with its options, defaults and what it models.
#include <fmt/format.h>

#include <iostream>

#include "cli/common.hpp"
#include "fraglab/policy.hpp"

namespace fraglab::cli {

int cmd_policies(int argc, char** argv) {
  po::options_description options("options");
  options.add_options()("json", "print as JSON");
  po::positional_options_description positional;
  po::variables_map vm;
  if (!parse_command_line(argc, argv, "usage: fraglab policies [--json]", options, positional, vm)) return 0;
  const auto all = PolicyRegistry::instance().all();
  if (vm.count("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const PolicyInfo* p : all) {
      nlohmann::json opts = nlohmann::json::array();
      for (const PolicyOption& o : p->options)
        opts.push_back({{"name", o.name}, {"default", o.default_value}, {"help", o.help}});
      j.push_back({{"name", p->name}, {"summary", p->summary}, {"source", p->source}, {"options", opts}});
    }
    std::cout << j.dump(2) << '\n';
    return 0;
  }
  for (const PolicyInfo* p : all) {
    std::cout << fmt::format("{}\n  {}\n  source: {}\n", p->name, p->summary, p->source);
    if (p->options.empty()) std::cout << "  options: none\n";
    for (const PolicyOption& o : p->options) {
      std::cout << fmt::format("  {:<32} default {:<10} {}\n", o.name, o.default_value.empty() ? "-" : o.default_value,
                               o.help);
    }
    std::cout << '\n';
  }
  return 0;
}

}  // namespace fraglab::cli
