// Inputs that are no trace, fed to every command that reads one: each must end with exit 2 and
// one line on stderr naming the input and what it looks like, never "internal error" (exit 3).
// And "-" reads the trace from standard input, for every command, as the file itself would.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "support/command.hpp"

namespace fraglab::testing {
namespace {

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";
const std::string kBaseline = std::string(FRAGLAB_SOURCE_DIR) + "/traces/baselines/two-phase.json";
const std::string kTwoGpus = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/two-gpus.pickle";

// Every command that reads a trace, with the trace's place marked @ (diff twice: as A and as B).
const std::vector<std::string> kCommands = {
    "replay @",
    "compare @",
    "validate @",
    "inspect @",
    "convert @ --overwrite -o " + (scratch_dir("input-errors") / "out.jsonl").string(),
    "sweep @ --grid max_split_size_mb=32,64",
    "check @ --baseline " + kBaseline,
    "diff @ " + kSample,
    "diff " + kSample + " @",
};

std::string with_input(std::string command, const std::string& input) {
  command.replace(command.find('@'), 1, input);
  return command;
}

// A whole shell command line (pipes included), as run_fraglab runs `fraglab ARGS`.
CommandResult run_shell(const std::string& command) {
  static int counter = 0;
  const fs::path err = scratch_dir("input-errors") / ("sh-stderr-" + std::to_string(counter++));
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>" + err.string()).c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.out.append(buffer, n);
  const int raw = ::pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.err = read_text(err);
  return result;
}

const std::string kBinary = FRAGLAB_BINARY;

struct BadInput {
  std::string path;        // what is passed as the trace
  std::string extra;       // more arguments
  std::string looks_like;  // a part of the message saying what it is
};

// The two-phase sample, gzip-compressed by fraglab's own writer.
fs::path gzipped_sample(const fs::path& dir) {
  const fs::path gz = dir / "two-phase.jsonl.gz";
  write_jsonl_file(read_trace(kSample), gz.string());
  return gz;
}

std::vector<BadInput> bad_inputs() {
  const fs::path dir = scratch_dir("input-errors");
  std::vector<BadInput> inputs;
  fs::create_directories(dir / "a-folder");
  inputs.push_back({(dir / "a-folder").string(), "", "is a directory"});
  write_text(dir / "empty.jsonl", "");
  inputs.push_back({(dir / "empty.jsonl").string(), "", "is empty"});
  // torch.save() since 1.6: a zip archive (local file header "PK\3\4").
  write_text(dir / "model.pt", std::string("PK\x03\x04\x14\x00\x00\x00\x08\x00", 10) + "archive/data.pkl");
  inputs.push_back({(dir / "model.pt").string(), "", "looks like a torch.save/zip archive"});
  // A results / baseline JSON passed by mistake: pretty-printed, and on one line.
  write_text(dir / "results.json", "{\n  \"trace\": {\"name\": \"x\"},\n  \"runs\": []\n}\n");
  inputs.push_back({(dir / "results.json").string(), "", "looks like pretty-printed JSON"});
  write_text(dir / "one-line.json", "{\"trace\": {\"name\": \"x\"}, \"runs\": []}\n");
  inputs.push_back({(dir / "one-line.json").string(), "", "looks like JSON, not a fraglab JSONL"});
  write_text(dir / "plain.jsonl.gz", read_text(kSample));
  inputs.push_back({(dir / "plain.jsonl.gz").string(), "", "is named .gz but is not gzip data"});
  const std::string gz = read_text(gzipped_sample(dir));
  write_text(dir / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  inputs.push_back({(dir / "cut.jsonl.gz").string(), "", "truncated gzip data"});
  write_text(dir / "zeros.bin", std::string(4096, '\0'));
  inputs.push_back({(dir / "zeros.bin").string(), "", "looks like binary data (it starts with 00 00 00 00)"});
  inputs.push_back({kTwoGpus, "--device-index 7", "device 7 has no trace entries"});
  inputs.push_back({(dir / "no-such-file.jsonl").string(), "", "cannot open"});
  // An endless character device: refused from its first bytes, not read until memory runs out.
  if (fs::exists("/dev/zero")) inputs.push_back({"/dev/zero", "", "looks like binary data"});
  if (::geteuid() != 0) {  // root reads any file
    write_text(dir / "locked.jsonl", read_text(kSample));
    ::chmod((dir / "locked.jsonl").c_str(), 0);
    inputs.push_back({(dir / "locked.jsonl").string(), "", "cannot open: Permission denied"});
  }
  return inputs;
}

TEST(InputErrors, EveryCommandRefusesEveryBadInputInOneLine) {
  for (const BadInput& input : bad_inputs()) {
    for (const std::string& command : kCommands) {
      const std::string args = with_input(command, input.path) + " " + input.extra;
      SCOPED_TRACE(args);
      const CommandResult r = run_fraglab(args);
      EXPECT_EQ(r.status, 2) << r.err;
      EXPECT_EQ(count_lines(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find(input.path + ": "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(input.looks_like), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    }
  }
}

TEST(InputErrors, SameStdinTwiceOrEmptyOrEndless) {
  CommandResult r = run_fraglab("diff - - < " + kSample);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("<stdin>: already read"), std::string::npos) << r.err;

  r = run_fraglab("inspect - < /dev/null");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("<stdin>: is empty"), std::string::npos) << r.err;

  // Endless input (a device, a pipe): refused after its first bytes (or the test would hang).
  r = run_fraglab("inspect - < /dev/zero");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("<stdin>: looks like binary data"), std::string::npos) << r.err;
  r = run_shell("cat /dev/zero | " + kBinary + " inspect -");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("<stdin>: looks like binary data"), std::string::npos) << r.err;
}

// A named pipe is read like stdin: to its end when a trace comes through it, refused after its
// first bytes when junk does (the writer then dies of SIGPIPE instead of writing forever).
TEST(InputErrors, NamedPipes) {
  const fs::path dir = scratch_dir("input-errors");
  const fs::path fifo = dir / "trace.fifo", junk = dir / "junk.fifo";
  fs::remove(fifo);
  fs::remove(junk);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(junk.c_str(), 0600), 0);
  const CommandResult file = run_fraglab("inspect " + kSample);
  CommandResult r = run_shell("cat " + kSample + " > " + fifo.string() + " & " + kBinary + " inspect " + fifo.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, file.out);
  r = run_shell("cat /dev/zero > " + junk.string() + " & " + kBinary + " inspect " + junk.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(junk.string() + ": looks like binary data"), std::string::npos) << r.err;
}

// The same command on a file and on "-" fed that file must print the same (the sample names
// itself in its header, so even the trace name agrees).
TEST(Stdin, EveryCommandReadsATraceFromStandardInput) {
  const fs::path gz = gzipped_sample(scratch_dir("input-errors"));
  for (const std::string& command : kCommands) {
    if (command.starts_with("check")) continue;  // prints the path it was given: below
    SCOPED_TRACE(command);
    const CommandResult file = run_fraglab(with_input(command, kSample));
    const CommandResult piped = run_fraglab(with_input(command, "-") + " < " + kSample);
    const CommandResult gzipped = run_shell("cat " + gz.string() + " | " + kBinary + " " + with_input(command, "-"));
    ASSERT_NE(file.status, 2) << file.err;
    EXPECT_EQ(piped.status, file.status) << piped.err;
    EXPECT_EQ(piped.out, file.out);
    EXPECT_EQ(gzipped.status, file.status) << gzipped.err;
    EXPECT_EQ(gzipped.out, file.out);
  }
  const CommandResult check = run_fraglab("check - --baseline " + kBaseline + " < " + kSample);
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_NE(check.out.find("check - against"), std::string::npos) << check.out;
}

TEST(Stdin, ASnapshotFromStandardInputIsNamedStdin) {
  const CommandResult file = run_fraglab("inspect " + kTwoGpus + " --device-index 1");
  const CommandResult piped = run_fraglab("inspect - --device-index 1 < " + kTwoGpus);
  ASSERT_EQ(file.status, 0) << file.err;
  ASSERT_EQ(piped.status, 0) << piped.err;
  const std::size_t eol = file.out.find('\n');
  EXPECT_EQ(file.out.substr(0, eol), "trace        two-gpus (pytorch-snapshot)");
  EXPECT_EQ(piped.out.substr(0, piped.out.find('\n')), "trace        stdin (pytorch-snapshot)");
  EXPECT_EQ(piped.out.substr(piped.out.find('\n')), file.out.substr(eol));
}

}  // namespace
}  // namespace fraglab::testing
