// fraglab: the command. Thin: parse, call, print. Exit codes: 0 success, 1 a check failed
// (e.g. validate found a divergence), 2 usage or input error, 3 internal error.
#include <fmt/format.h>

#include <cstring>
#include <iostream>
#include <new>
#include <string_view>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "fraglab/memory_budget.hpp"

namespace {

struct Subcommand {
  const char* name;
  fraglab::cli::Command run;
  const char* help;
};

constexpr Subcommand kSubcommands[] = {
    {"replay", fraglab::cli::cmd_replay, "replay a trace through allocator policies on a device"},
    {"inspect", fraglab::cli::cmd_inspect, "describe a trace: events, sizes, streams, initial state"},
    {"convert", fraglab::cli::cmd_convert, "write a trace (e.g. a PyTorch snapshot) as fraglab JSONL"},
    {"validate", fraglab::cli::cmd_validate, "check the pytorch policy against a recorded PyTorch snapshot"},
    {"gen", fraglab::cli::cmd_gen, "generate a synthetic FSDP / DeepSpeed ZeRO training-step trace"},
    {"maxbatch", fraglab::cli::cmd_maxbatch, "the largest micro-batch a generated run fits, per policy spec"},
    {"compare", fraglab::cli::cmd_compare, "every policy side by side on one trace, with the lower bound"},
    {"policies", fraglab::cli::cmd_policies, "list the allocator policies and their options"},
    {"sweep", fraglab::cli::cmd_sweep, "replay traces under a grid of policy options and rank the settings"},
    {"merge", fraglab::cli::cmd_merge, "join the results files of sweep shards"},
    {"check", fraglab::cli::cmd_check, "CI gate: compare a replay with a baseline results JSON (exit 1 on regression)"},
    {"diff", fraglab::cli::cmd_diff, "show where two traces (before / after a change) differ in memory"},
    {"report", fraglab::cli::cmd_report, "write a self-contained HTML report of a trace's replays or a sweep"},
    {"calibrate", fraglab::cli::cmd_calibrate, "measure the device calls' costs on a GPU, as a --cost-model file"},
};

void print_usage(std::ostream& out) {
  out << "fraglab " << FRAGLAB_VERSION
      << " — GPU memory-fragmentation simulator and allocator-policy lab\n\n"
         "usage: fraglab [-v|-q] [--no-progress] COMMAND [OPTIONS]   (fraglab help COMMAND or fraglab COMMAND --help "
         "for its options)\n\n"
         "commands:\n";
  for (const Subcommand& s : kSubcommands) out << fmt::format("  {:<10} {}\n", s.name, s.help);
  out << "\nglobal options (before or after COMMAND):\n"
         "  -v, --verbose  also show details on stderr (files read, settings chosen, timing)\n"
         "  -q, --quiet    show only errors on stderr\n"
         "  --no-progress  never show progress on stderr (it is shown only on a terminal, after a second)\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Global options before the command (they are also accepted after it: parse_command_line).
  while (argc > 1 && fraglab::cli::log::apply_global_option(argv[1])) {
    argv[1] = argv[0];
    --argc;
    ++argv;
  }
  if (fraglab::cli::log::verbose_and_quiet()) {
    fraglab::cli::log::error(fmt::format("fraglab: {}", fraglab::cli::log::kVerboseAndQuiet));
    return 2;
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::cout << "fraglab " << FRAGLAB_VERSION << '\n';
    return 0;
  }
  // "fraglab help CMD" is "fraglab CMD --help"; "fraglab help" alone is the usage above.
  const bool help = std::strcmp(argv[1], "help") == 0;
  if (help && argc == 2) {
    print_usage(std::cout);
    return 0;
  }
  const std::string_view name = help ? argv[2] : argv[1];
  if (help && argc > 3) {
    fraglab::cli::log::error(fmt::format("fraglab help: expected one command (fraglab help {})", name));
    return 2;
  }
  for (const Subcommand& s : kSubcommands) {
    if (name != s.name) continue;
    fraglab::cli::log::set_command(name);
    try {
      if (help) {
        char help_flag[] = "--help";
        char* help_argv[] = {argv[2], help_flag, nullptr};
        return s.run(2, help_argv);
      }
      return s.run(argc - 1, argv + 1);
    } catch (const fraglab::InputError& e) {
      fraglab::cli::log::error(fmt::format("fraglab {}: error: {}", name, e.what()));
      return 2;
    } catch (const std::bad_alloc&) {
      // The memory budget (or the machine) ran out after the readers, which name their input
      // themselves: in a replay, a sweep, the generator.
      const std::string trace = fraglab::cli::last_trace_path();
      fraglab::cli::log::error(
          fmt::format("fraglab {}: error: {}needs more memory than the memory budget of {} allows (--max-memory)", name,
                      trace.empty() ? "" : trace + ": ", fraglab::format_bytes(fraglab::memory_budget())));
      return 2;
    } catch (const boost::program_options::error& e) {
      fraglab::cli::log::error(fmt::format("fraglab {}: error: {} (see fraglab {} --help)", name, e.what(), name));
      return 2;
    } catch (const std::exception& e) {
      fraglab::cli::log::error(fmt::format("fraglab {}: internal error: {}", name, e.what()));
      return 3;
    }
  }
  if (help) {
    std::string names;
    for (const Subcommand& s : kSubcommands) names += (names.empty() ? "" : ", ") + std::string(s.name);
    fraglab::cli::log::error(fmt::format("fraglab help: unknown command '{}' (expected one of {})", name, names));
    return 2;
  }
  fraglab::cli::log::error(fmt::format("fraglab: unknown command '{}'", name));
  print_usage(std::cerr);
  return 2;
}
