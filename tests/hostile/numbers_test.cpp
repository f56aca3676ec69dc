// Numbers no command may take on trust, and non-trace files that are no file to read (README
// "Reliability", issue 16). Each input is made here; each is refused with exit 2 in one line naming
// the file, option or key and what was expected, at once: the memory and CPU bounds are far below
// what the unbounded behaviour took (a 10^9-setting grid grew past 6 GiB in 30 s before it was
// counted; 10^5 layers x 5 steps passed 7 GiB in a minute of generation).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <regex>

#include "fraglab/memory_budget.hpp"
#include "support/resource_use.hpp"

namespace fraglab::testing {
namespace {

// Every refusal here happens before anything sizable is built: 64 MiB of resident memory and a
// second of CPU are generous (each measured at ~6 MiB and ~0.01 s in a Release build).
constexpr std::uint64_t kRssBound = std::uint64_t{64} << 20;
constexpr double kCpuBound = 1.0;

const fs::path& dir() {
  static const fs::path d = scratch_dir("hostile-numbers");
  return d;
}

std::string sample_trace() { return std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/streams.jsonl"; }

// Runs fraglab and checks the refusal: exit 2, one line, containing each of `needles`, bounded.
void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& needles) {
  const MeasuredRun run = run_fraglab_measured(args);
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a.substr(0, 80);
  EXPECT_EQ(run.status, 2) << command << "\n" << run.err;
  EXPECT_TRUE(is_one_line(run.err)) << command << "\n" << run.err;
  for (const std::string& needle : needles)
    EXPECT_NE(run.err.find(needle), std::string::npos) << needle << "\n" << run.err;
  EXPECT_LT(run.max_rss_bytes, kRssBound + kSanitizerAllowance) << command;
  EXPECT_LT(run.cpu_seconds, kCpuBound * kSanitizerSlowdown) << command;
}

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path path = dir() / name;
  write_text(path, text);
  return path.string();
}

std::vector<std::string> gen_args(const std::string& model, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"gen", "--model", model, "-o", (dir() / "gen.jsonl").string(), "--overwrite"};
  for (const char* option : {"--micro-batch", "--steps"}) {
    if (std::find(more.begin(), more.end(), option) == more.end()) args.insert(args.end(), {option, "1"});
  }
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Row 1: model dimensions and gen options beyond what the generator and its trace format hold.
TEST(HostileNumbers, GenRefusesDimensionsAndSizesItsTraceCouldNotHold) {
  // fraglab's model JSON: hidden 10^12 (was: exit 0 and a trace the reader refused as "impossible
  // size"); max_positions 2^32 (was: sequence length 0, silently).
  const std::string hidden = write_file(
      "hidden.json", R"({"family":"llama","layers":2,"hidden":1000000000000,"heads":8,"ffn":64,"vocab":100})");
  expect_refused(gen_args(hidden), {hidden + ":", "'hidden' = 1000000000000", "expected 0..1048576"});
  const std::string positions = write_file(
      "positions.json",
      R"({"family":"llama","layers":2,"hidden":64,"heads":8,"ffn":64,"vocab":100,"max_positions":4294967296})");
  expect_refused(gen_args(positions), {positions + ":", "'max_positions' = 4294967296", "expected 0..1000000"});
  // A Hugging Face config.json: the key as the file spells it.
  const std::string hf = write_file(
      "config.json",
      R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":8,)"
      R"("intermediate_size":64,"vocab_size":18446744073709551615})");
  expect_refused(gen_args(hf), {hf + ":", "'vocab_size' = 18446744073709551615", "expected 0..16777216"});
  // Each dimension in range, their product not: the logits of 65536 x 10^5 tokens x 2^24 vocab
  // (4.4 x 10^17 bytes; the attention scores, 4 x 65536 x 1 head x 10^10, still fit).
  const std::string wide = write_file(
      "wide.json",
      R"({"family":"llama","layers":1,"hidden":64,"heads":1,"ffn":64,"vocab":16777216,"max_positions":1000000})");
  expect_refused(gen_args(wide, {"--micro-batch", "65536", "--seq-len", "100000"}),
                 {"the logits", "--micro-batch 65536", "--seq-len 100000", "vocab 16777216", "2^56"});
  // And the attention scores: 4 x 65536 x 8 heads x (10^6)^2.
  const std::string heads =
      write_file("heads.json",
                 R"({"family":"llama","layers":1,"hidden":64,"heads":8,"ffn":64,"vocab":64,"max_positions":1000000})");
  expect_refused(gen_args(heads, {"--micro-batch", "65536", "--seq-len", "1000000"}),
                 {"the attention scores", "--micro-batch 65536", "heads 8", "--seq-len 1000000", "2^56"});
  // Command-line numbers: DeepSpeed element counts and the timing model's rates.
  expect_refused(gen_args("llama2-7b", {"--framework", "zero3", "--ds-reduce-bucket-size", "18446744073709551615"}),
                 {"--ds-reduce-bucket-size 18446744073709551615", "expected 1..1125899906842624"});
  expect_refused(gen_args("llama2-7b", {"--hbm-gbps", "1e-300"}), {"--hbm-gbps 1e-300", "expected 0.001.."});
}

// Row 2: what gen would build is estimated before it is built.
TEST(HostileNumbers, GenRefusesATraceTooLargeForTheMemoryBudgetBeforeBuildingIt) {
  const std::string deep = write_file(
      "deep.json",
      R"({"family":"llama","layers":100000,"hidden":64,"heads":8,"ffn":64,"vocab":100,"max_positions":128})");
  // 10^5 layers x 5 steps: about 10^9 events, ~134 GiB by the estimate: refused under the default
  // budget of a machine with less memory, and under a stated budget on any machine. With
  // --grad-accum 1024 as well (~5 x 10^16 bytes) it is above any budget.
  if (default_memory_budget() < (Bytes{134} << 30)) {
    expect_refused(gen_args(deep, {"--steps", "5"}), {"5 steps", "100000 blocks", "memory budget"});
  }
  expect_refused(gen_args(deep, {"--steps", "5", "--max-memory", "64GiB"}),
                 {"5 steps", "100000 blocks", "memory budget of 64.00 GiB"});
  expect_refused(gen_args(deep, {"--steps", "5", "--grad-accum", "1024"}),
                 {"5 steps", "100000 blocks", "memory budget"});
}

// Row 2: a grid of 10^9 settings is counted, not expanded.
TEST(HostileNumbers, SweepRefusesAGridTooLargeToKeepItsResultsBeforeExpandingIt) {
  std::string split = "max_split_size_mb=", rounding = "max_non_split_rounding_mb=",
              gc = "garbage_collection_threshold=";
  for (int i = 0; i < 1000; ++i) {
    const char* comma = i == 0 ? "" : ",";
    split += comma + std::to_string(21 + i);
    rounding += comma + std::to_string(20 + i);
    gc += std::string(comma) + "0." +
          std::string(i + 1 < 10     ? "000"
                      : i + 1 < 100  ? "00"
                      : i + 1 < 1000 ? "0"
                                     : "") +
          std::to_string(i + 1);
  }
  expect_refused({"sweep", sample_trace(), "--grid", split, "--grid", rounding, "--grid", gc, "--no-progress"},
                 {"--grid: 1000000000 settings x 1 trace = 1000000000 runs", "results row", "memory budget"});
}

// A baseline of streams.jsonl recorded by the built binary, and a copy with one number replaced.
std::string baseline_with(const std::string& name, const std::string& key, const std::string& value) {
  static const std::string recorded = [] {
    const std::string path = (dir() / "recorded.json").string();
    const MeasuredRun run =
        run_fraglab_measured({"check", sample_trace(), "--baseline", path, "--update-baseline", "-p", "pytorch"});
    EXPECT_EQ(run.status, 0) << run.err;
    return read_text(path);
  }();
  const std::regex number("\"" + key + "\": [0-9.e+-]+");
  EXPECT_TRUE(std::regex_search(recorded, number)) << key;
  return write_file(name, std::regex_replace(recorded, number, "\"" + key + "\": " + value));
}

// Row 3: byte counts and counts out of range (was: 2^64 shown as "16 EiB" and passing the gate;
// -1 shown as "0 B").
TEST(HostileNumbers, CheckRefusesBaselineNumbersOutOfRange) {
  for (const auto& [value, why] : std::vector<std::pair<std::string, std::string>>{
           {"18446744073709551616", "out of range"}, {"-1", "negative"}, {"1.5", "not an integer"}}) {
    const std::string baseline = baseline_with("bytes.json", "peak_reserved_bytes", value);
    expect_refused({"check", sample_trace(), "--baseline", baseline},
                   {baseline + ":", "'peak_reserved_bytes'", why, "expected a byte count (an integer 0..2^63-1)"});
  }
  const std::string ooms = baseline_with("ooms.json", "num_ooms", "-3");
  expect_refused({"check", sample_trace(), "--baseline", ooms},
                 {ooms + ":", "'num_ooms' = -3", "expected a count (an integer 0..2^63-1)"});
  const std::string fraction = baseline_with("fraction.json", "fragmentation_at_peak", "7");
  expect_refused({"check", sample_trace(), "--baseline", fraction},
                 {fraction + ":", "'fragmentation_at_peak' = 7", "expected a fraction (a number 0..1)"});
  const std::string capacity = baseline_with("capacity.json", "capacity_bytes", "-1");
  expect_refused({"check", sample_trace(), "--baseline", capacity}, {capacity + ":", "device: 'capacity_bytes' = -1"});
}

// A results file of a small sweep of streams.jsonl, written by the built binary.
std::string results_file(const std::string& name) {
  const std::string path = (dir() / name).string();
  const MeasuredRun run = run_fraglab_measured(
      {"sweep", sample_trace(), "--grid", "max_split_size_mb=none,64", "-o", path, "--overwrite", "--no-progress"});
  EXPECT_EQ(run.status, 0) << run.err;
  return path;
}

TEST(HostileNumbers, MergeRefusesResultsNumbersOutOfRange) {
  const std::string jsonl = results_file("numbers.jsonl");
  const std::string text = read_text(jsonl);
  for (const std::string value : {"18446744073709551615", "-1", "9223372036854775808"}) {
    write_text(jsonl, std::regex_replace(text, std::regex("\"num_device_alloc\":[0-9]+"),
                                         "\"num_device_alloc\":" + value, std::regex_constants::format_first_only));
    // The first row is line 2 (the metadata line is line 1).
    expect_refused({"merge", jsonl, "-o", (dir() / "merged.jsonl").string(), "--overwrite"},
                   {jsonl + ":2:", "num_device_alloc = " + value, "expected a count (an integer 0..2^63-1)"});
  }
  const std::string csv = (dir() / "numbers.csv").string();
  const MeasuredRun sweep = run_fraglab_measured(
      {"sweep", sample_trace(), "--grid", "max_split_size_mb=none,64", "-o", csv, "--overwrite", "--no-progress"});
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const std::string csv_text = read_text(csv);
  // The first data row (line 3, after the metadata and the header) ends with num_device_free,
  // device_time_s, stall_time_s: replace num_device_free with 2^64, then stall_time_s with -1.
  const size_t row = csv_text.find('\n', csv_text.find('\n') + 1) + 1;
  const size_t end = csv_text.find('\n', row);
  const size_t last = csv_text.rfind(',', end);
  const size_t time = csv_text.rfind(',', last - 1);
  const size_t free_at = csv_text.rfind(',', time - 1);
  write_text(csv, csv_text.substr(0, free_at + 1) + "18446744073709551616" + csv_text.substr(time));
  expect_refused({"merge", csv, "-o", (dir() / "merged.csv").string(), "--overwrite"},
                 {csv + ":3:", "num_device_free = '18446744073709551616'", "expected a count"});
  write_text(csv, csv_text.substr(0, last + 1) + "-1" + csv_text.substr(end));
  expect_refused({"merge", csv, "-o", (dir() / "merged.csv").string(), "--overwrite"},
                 {csv + ":3:", "stall_time_s = '-1'", "expected seconds (a finite number >= 0)"});
}

// Row 2, merge's side: a results file whose metadata declares a 10^9-setting grid (was: the grid
// expanded to check the shards' coverage, 18 GiB resident before the allocation failed).
TEST(HostileNumbers, MergeRefusesAMetadataGridTooLargeForAnySweepBeforeExpandingIt) {
  const std::string jsonl = results_file("huge-meta.jsonl");
  std::string text = read_text(jsonl);
  std::string axes;
  for (const char* key : {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions"}) {
    std::string axis = std::string(key) + "=";
    for (int i = 0; i < 1000; ++i) axis += (i == 0 ? "" : ",") + std::to_string(21 + i);
    axes += (axes.empty() ? "\"" : ",\"") + axis + "\"";
  }
  text = std::regex_replace(text, std::regex("\"grid\":\\[[^\\]]*\\]"), "\"grid\":[" + axes + "]",
                            std::regex_constants::format_first_only);
  write_text(jsonl, text);
  expect_refused(
      {"merge", jsonl, "-o", (dir() / "merged.jsonl").string(), "--overwrite"},
      {jsonl + ": the sweep metadata's grid: 1000000000 settings x 1 trace = 1000000000 runs", "memory budget"});
}

// A grid a sweep could run (2,000,376 runs, within the memory budget) declared by a file that holds
// 2 rows: merge names what the shard lacks without listing the grid's runs one spec at a time (it
// took over a minute under the sanitizers; now the work is one spec per row).
TEST(HostileNumbers, MergeOfAShardThatLacksMillionsOfRunsCountsThemWithoutListingThem) {
  const std::string jsonl = results_file("big-meta.jsonl");
  std::string text = read_text(jsonl);
  std::string axes;
  for (const char* key : {"max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold"}) {
    std::string axis = std::string(key) + "=";
    for (int i = 0; i < 126; ++i) axis += (i == 0 ? "" : ",") + std::to_string(i + 2);
    axes += (axes.empty() ? "\"" : ",\"") + axis + "\"";
  }
  text = std::regex_replace(text, std::regex("\"grid\":\\[[^\\]]*\\]"), "\"grid\":[" + axes + "]",
                            std::regex_constants::format_first_only);
  write_text(jsonl, text);
  // 126^3 = 2,000,376 runs; the file's 2 rows have one knob column, not this grid's three: it holds
  // none of them. An incomplete sweep is a finding (exit 1, as for a shard left out), not bad input.
  const MeasuredRun run = run_fraglab_measured({"merge", jsonl, "-o", (dir() / "merged.jsonl").string()});
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(
      run.err.find(jsonl + " lacks 2000376 runs of its shard (e.g. trace streams, spec "
                           "pytorch:max_split_size_mb:2,roundup_power2_divisions:2,garbage_collection_threshold:2)"),
      std::string::npos)
      << run.err;
  EXPECT_LT(run.max_rss_bytes, kRssBound + kSanitizerAllowance);
  EXPECT_LT(run.cpu_seconds, kCpuBound * kSanitizerSlowdown);
}

// Row 4: malformed JSON in a results file and a baseline (was: the library's exception text).
TEST(HostileNumbers, MalformedJsonIsNamedByFileLineAndColumnWithoutTheLibrarysId) {
  const std::string jsonl = results_file("malformed.jsonl");
  const std::string text = read_text(jsonl);
  write_text(jsonl, text + "{\"trace\": \"streams\", oops}\n");
  const size_t line = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  const std::string at = jsonl + ":" + std::to_string(line) + ":";
  expect_refused({"merge", jsonl, "-o", (dir() / "merged.jsonl").string(), "--overwrite"},
                 {at, "expected a results row", "got '{\"trace\": \"streams\", oops}'", "column 22"});
  const MeasuredRun run =
      run_fraglab_measured({"merge", jsonl, "-o", (dir() / "merged.jsonl").string(), "--overwrite"});
  EXPECT_EQ(run.err.find("json.exception"), std::string::npos) << run.err;

  const std::string baseline = write_file("malformed.json", "{\"runs\": [\n  {\"policy\": \"pytorch\",}\n]}\n");
  expect_refused({"check", sample_trace(), "--baseline", baseline},
                 {baseline + ":2:24:", "the baseline is not valid JSON", "expected the baseline as a results JSON"});
  const MeasuredRun check = run_fraglab_measured({"check", sample_trace(), "--baseline", baseline});
  EXPECT_EQ(check.err.find("json.exception"), std::string::npos) << check.err;
  const std::string model = write_file("malformed-model.json", "{\"family\": \"llama\",\n \"layers\": two}");
  expect_refused(gen_args(model), {model + ":2:13:", "not valid JSON", "expected a model .json file"});
}

// Row 5: paths that are no file to read, where a command reads a non-trace file.
TEST(HostileNumbers, NonTraceInputsThatAreNoFileAreRefusedInOneLine) {
  const fs::path folder = dir() / "a-directory.jsonl";  // named like a results file
  fs::create_directories(folder);
  const fs::path fifo = dir() / "no-writer.jsonl";
  ::mkfifo(fifo.c_str(), 0600);  // a FIFO nobody writes to: opening it must not wait for a writer
  const std::string trace = sample_trace();
  const std::string merged = (dir() / "merged.jsonl").string();
  struct Case {
    std::vector<std::string> args;
    std::string path;
    std::string what;
  };
  const std::vector<Case> cases{
      {gen_args(folder.string()), folder.string(), "is a directory; expected a model .json file"},
      {gen_args("/dev/zero"), "/dev/zero", "is a character device; expected a model .json file"},
      {{"check", trace, "--baseline", folder.string()}, folder.string(), "is a directory; expected the baseline"},
      {{"check", trace, "--baseline", "/dev/zero"}, "/dev/zero", "is a character device; expected the baseline"},
      {{"check", trace, "--baseline", "/dev/null"}, "/dev/null", "is a character device; expected the baseline"},
      {{"check", trace, "--baseline", fifo.string()}, fifo.string(), "the baseline is not valid JSON"},
      {{"merge", folder.string(), "-o", merged, "--overwrite"},
       folder.string(),
       "is a directory; expected a sweep results file"},
      {{"sweep", trace, "--grid", "max_split_size_mb=none,64", "-o", folder.string(), "--resume", "--no-progress"},
       folder.string(),
       "is a directory; expected a sweep results file"},
  };
  for (const Case& c : cases) expect_refused(c.args, {c.path + ":", c.what});

  if (::geteuid() != 0) {  // root reads any file whatever its mode
    const std::string locked = write_file("locked.json", "{}");
    fs::permissions(locked, fs::perms::none);
    expect_refused({"check", trace, "--baseline", locked}, {locked + ": cannot open: Permission denied"});
  }
}

}  // namespace
}  // namespace fraglab::testing
