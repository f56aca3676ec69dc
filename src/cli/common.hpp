// Pieces shared by the subcommands: device creation, trace loading, output files.
#pragma once

#include <boost/program_options.hpp>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "fraglab/device.hpp"
#include "fraglab/report.hpp"
#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"

namespace fraglab::cli {

namespace po = boost::program_options;

// A subcommand: parses its own arguments (argv[0] is the subcommand name), returns an exit code.
using Command = int (*)(int argc, char** argv);

int cmd_replay(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_policies(int argc, char** argv);
int cmd_validate(int argc, char** argv);
int cmd_gen(int argc, char** argv);
int cmd_sweep(int argc, char** argv);
int cmd_merge(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_diff(int argc, char** argv);

// Parses argv against `options` (+ positional), handling --help. Returns false if help was
// printed (the caller returns 0).
bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& options,
                        const po::positional_options_description& positional, po::variables_map& vm);

// "sim[:...]" -> a fresh device. Every replay gets its own.
std::unique_ptr<Device> make_device(const std::string& spec);
DeviceDescription describe_device(const std::string& spec);

// Writes `text` to FILE, or to stdout when FILE is "-".
void write_output(const std::string& path, const std::string& text);

}  // namespace fraglab::cli
