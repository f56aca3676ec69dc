// Results files: exact round trips in CSV and JSONL, the canonical order, whole lines only, the
// append stream's resume, and the sweep metadata line (shard, grid, device, traces).
#include <gtest/gtest.h>

#include "fraglab/sweep.hpp"
#include "fraglab/types.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::write_text;

SweepRow row(std::string trace, std::vector<std::optional<std::string>> knobs, Bytes reserved) {
  SweepRow r;
  r.trace = std::move(trace);
  r.device = "sim";
  r.spec = "pytorch";
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (knobs[k])
      r.spec += (r.spec.find(':') == std::string::npos ? ":" : ",") + std::string(k == 0 ? "a" : "b") + ":" + *knobs[k];
  }
  r.knobs = std::move(knobs);
  r.metrics.peak_reserved = reserved;
  r.metrics.peak_allocated = reserved / 2;
  r.metrics.peak_requested = reserved / 3;
  r.metrics.fragmentation_at_peak = 1.0 / 3.0;  // no short decimal: tests the exact round trip
  r.metrics.peak_utilization = 0.1;
  r.metrics.num_alloc_retries = 7;
  r.metrics.num_ooms = 0;
  r.metrics.num_device_alloc = 123;
  r.metrics.num_device_free = 45;
  r.metrics.device_time_s = 0.1 + 0.2;  // 0.30000000000000004: the exact round trip of a time
  r.metrics.stall_time_s = 1e-6 / 3;
  return r;
}

TEST(Results, NaturalOrderComparesNumbersByValue) {
  EXPECT_LT(natural_compare("64", "128"), 0);
  EXPECT_LT(natural_compare("0.5", "0.75"), 0);
  EXPECT_LT(natural_compare("0.75", "0.8"), 0);  // by value, not digit runs
  EXPECT_LT(natural_compare("step2", "step10"), 0);
  EXPECT_LT(natural_compare("False", "True"), 0);
  EXPECT_EQ(natural_compare("abc", "abc"), 0);
  EXPECT_NE(natural_compare("064", "64"), 0);  // a total order: equal only when equal text
  EXPECT_LT(natural_compare("[256:1,>:8]", "[512:1,>:8]"), 0);
}

TEST(Results, CanonicalOrderIsTraceThenKnobsNoneFirst) {
  std::vector<SweepRow> rows = {row("t2", {"128", "True"}, 1), row("t10", {std::nullopt, "False"}, 2),
                                row("t2", {"64", "True"}, 3), row("t2", {std::nullopt, "True"}, 4),
                                row("t2", {"64", "False"}, 5)};
  sort_rows(rows);
  std::vector<Bytes> order;
  order.reserve(rows.size());
  for (const SweepRow& r : rows) order.push_back(r.metrics.peak_reserved);
  EXPECT_EQ(order, (std::vector<Bytes>{4, 5, 3, 1, 2}));  // t2: none, 64/False, 64/True, 128; then t10
}

TEST(Results, CsvAndJsonlRoundTripExactly) {
  const fs::path dir = testing::scratch_dir("results");
  ResultsTable table;
  table.knob_keys = {"a", "b"};
  table.rows = {row("two-phase", {"64", std::nullopt}, 300 * MiB), row("x,\"quoted\"", {"[1:2,>:4]", "True"}, 5)};
  for (const char* name : {"t.csv", "t.jsonl"}) {
    const std::string path = (dir / name).string();
    write_results(path, table);
    const ResultsTable back = read_results(path);
    EXPECT_EQ(back.knob_keys, table.knob_keys) << name;
    std::vector<SweepRow> expected = table.rows;
    sort_rows(expected);
    EXPECT_EQ(back.rows, expected) << name;
    EXPECT_EQ(back.rows[1].metrics.fragmentation_at_peak, 1.0 / 3.0) << name;
    // Writing what was read gives the same bytes.
    const std::string first = read_text(path);
    write_results(path, back);
    EXPECT_EQ(read_text(path), first) << name;
  }
  EXPECT_EQ(csv_header({"a", "b"}),
            "trace,device,spec,a,b,peak_reserved_bytes,peak_allocated_bytes,peak_requested_bytes,"
            "fragmentation_at_peak,peak_utilization,num_alloc_retries,num_ooms,num_device_alloc,num_device_free,"
            "device_time_s,stall_time_s");
}

TEST(Results, OnlyWholeLinesAreRead) {
  const fs::path dir = testing::scratch_dir("results");
  const std::string path = (dir / "partial.csv").string();
  ResultsTable table{{"a"}, {row("t", {"64"}, 1000)}};
  write_results(path, table);
  const std::string whole = read_text(path);
  // A killed writer leaves a row without its newline: a prefix of a real row that would parse as
  // a (wrong) number if it were read.
  const std::string cut = format_row(row("t", {"128"}, 123456789), {"a"}, ResultsFormat::Csv).substr(0, 40);
  write_text(path, whole + cut);
  size_t tail = 0;
  const ResultsTable back = read_results(path, &tail);
  EXPECT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(tail, cut.size());
}

TEST(Results, BadLinesNameFileAndLine) {
  const fs::path dir = testing::scratch_dir("results");
  const std::string path = (dir / "bad.csv").string();
  write_text(path, csv_header({"a"}) + "\nt,sim,pytorch,64,1,2\n");
  try {
    read_results(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2: expected 15 fields"), std::string::npos) << e.what();
  }
  write_text(path, "trace,spec\n");
  EXPECT_THROW(read_results(path), InputError);
  const std::string jsonl = (dir / "bad.jsonl").string();
  write_text(jsonl, "{\"trace\":\"t\"}\n");
  try {
    read_results(jsonl);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(jsonl + ":1:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(results_format("out.txt"), InputError);
}

TEST(Results, StreamAppendsFlushedRowsAndResumes) {
  const fs::path dir = testing::scratch_dir("results");
  for (const char* name : {"s.csv", "s.jsonl"}) {
    const std::string path = (dir / name).string();
    fs::remove(path);
    {
      ResultsStream stream(path, {"a"}, false);
      stream.append(row("t", {"64"}, 1));
      stream.append(row("t", {std::nullopt}, 2));
      // Flushed as they are appended: a reader sees them before the stream is closed.
      EXPECT_EQ(read_results(path).rows.size(), 2u) << name;
    }
    // A half-written row, as a kill in the middle of a write would leave.
    write_text(path, read_text(path) + "t,sim,pytorch:a:2");
    {
      ResultsStream stream(path, {"a"}, true);
      ASSERT_EQ(stream.existing().size(), 2u) << name;
      EXPECT_EQ(stream.existing()[0].metrics.peak_reserved, 1u);
      stream.append(row("t", {"128"}, 3));
      std::vector<SweepRow> all = stream.existing();
      all.push_back(row("t", {"128"}, 3));
      stream.finish(all);
    }
    const ResultsTable back = read_results(path);
    ASSERT_EQ(back.rows.size(), 3u) << name;
    // finish() leaves the canonical order: none, 64, 128.
    EXPECT_EQ(back.rows[0].metrics.peak_reserved, 2u);
    EXPECT_EQ(back.rows[1].metrics.peak_reserved, 1u);
    EXPECT_EQ(back.rows[2].metrics.peak_reserved, 3u);
    // Resuming with other swept options is refused, naming the file.
    try {
      ResultsStream other(path, {"b"}, true);
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": its swept options (a) differ from this sweep's (b)"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Results, ResumingAMissingFileStartsIt) {
  const fs::path dir = testing::scratch_dir("results");
  const std::string path = (dir / "fresh.csv").string();
  fs::remove(path);
  ResultsStream stream(path, {"a"}, true);
  EXPECT_TRUE(stream.existing().empty());
  EXPECT_EQ(read_text(path), csv_header({"a"}) + "\n");
}

SweepMeta meta(std::size_t shard, std::size_t shards) {
  SweepGrid grid;
  grid.base_spec = "pytorch:expandable_segments:False";
  grid.axes = {parse_grid_axis("a=none,64"), parse_grid_axis("b=[1:2,>:4],True")};
  return sweep_meta(grid, "sim:40GiB", {{"t", 12, "fnv1a64:0123456789abcdef"}, {"u \"q\"", 3, "fnv1a64:ff"}},
                    Shard{shard, shards});
}

TEST(Results, RecordedBaselinesTravelInTheMetadata) {
  const fs::path dir = testing::scratch_dir("results");
  SweepMeta with_context = meta(0, 2);
  with_context.start_state = "cold";
  SweepTraceContext context;
  context.start_state = "cold";
  context.recorded_spec = "pytorch:garbage_collection_threshold:0.8";
  context.recorded_run = row("t", {std::nullopt, std::nullopt}, 7);
  context.recorded_run->spec = context.recorded_spec;
  with_context.contexts["t"] = context;
  with_context.contexts["u \"q\""] = SweepTraceContext{"pytorch", std::nullopt, "recorded"};
  ResultsTable table{{"a", "b"}, {row("t", {"64", "True"}, 5)}, with_context};
  for (const char* name : {"c.csv", "c.jsonl"}) {
    const std::string path = (dir / name).string();
    write_results(path, table);
    const std::string text = read_text(path);
    const std::string first = text.substr(0, text.find('\n'));
    EXPECT_NE(first.find(R"("start_state":"cold","contexts":[{"trace":"t","start_state":"cold",)"
                         R"("recorded_settings":"pytorch:garbage_collection_threshold:0.8","recorded_run":{)"),
              std::string::npos)
        << first;
    const ResultsTable back = read_results(path);
    ASSERT_TRUE(back.meta.has_value()) << name;
    EXPECT_EQ(*back.meta, *table.meta) << name;
  }
}

TEST(Results, MetadataLineRoundTripsAndComesFirst) {
  const fs::path dir = testing::scratch_dir("results");
  ResultsTable table{{"a", "b"}, {row("t", {"64", "True"}, 5)}, meta(1, 3)};
  for (const char* name : {"m.csv", "m.jsonl"}) {
    const std::string path = (dir / name).string();
    write_results(path, table);
    const std::string text = read_text(path);
    // Written by hand from the format in sweep.hpp: one line, fixed key order.
    const std::string line = R"({"fraglab_sweep":1,"shard":"1/3","policy":"pytorch:expandable_segments:False",)"
                             R"("grid":["a=none,64","b=[1:2,>:4],True"],"device":"sim:40GiB","traces":[)"
                             R"({"name":"t","events":12,"request_hash":"fnv1a64:0123456789abcdef"},)"
                             R"({"name":"u \"q\"","events":3,"request_hash":"fnv1a64:ff"}],"start_state":"auto"})";
    EXPECT_EQ(text.substr(0, text.find('\n')), std::string(name == std::string("m.csv") ? "# " : "") + line) << name;
    const ResultsTable back = read_results(path);
    ASSERT_TRUE(back.meta.has_value()) << name;
    EXPECT_EQ(*back.meta, *table.meta) << name;
    EXPECT_EQ(back.rows, table.rows) << name;
    EXPECT_EQ(back.knob_keys, table.knob_keys) << name;
  }
  // The grid text parses back to the same axes.
  const SweepGrid grid = meta_grid(*table.meta);
  ASSERT_EQ(grid.axes.size(), 2u);
  EXPECT_EQ(grid.axes[1].values, (std::vector<std::optional<std::string>>{"[1:2,>:4]", "True"}));
  EXPECT_EQ(grid.axes[0].values, (std::vector<std::optional<std::string>>{std::nullopt, "64"}));
}

TEST(Results, FilesWithoutMetadataStillRead) {
  // As written before the metadata line existed.
  const fs::path dir = testing::scratch_dir("results");
  const std::string csv = (dir / "old.csv").string();
  write_text(csv, csv_header({"a"}) + "\n" + format_row(row("t", {"64"}, 9), {"a"}, ResultsFormat::Csv));
  const ResultsTable back = read_results(csv);
  EXPECT_FALSE(back.meta.has_value());
  ASSERT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(back.rows[0].metrics.peak_reserved, 9u);
}

TEST(Results, ResumeRefusesRowsOfAnotherTraceOfTheSameName) {
  const fs::path dir = testing::scratch_dir("results");
  for (const char* name : {"r.csv", "r.jsonl"}) {
    const std::string path = (dir / name).string();
    fs::remove(path);
    {
      ResultsStream stream(path, {"a", "b"}, false, meta(0, 2));
      stream.append(row("t", {"64", "True"}, 1));
    }
    EXPECT_EQ(read_results(path).meta, meta(0, 2)) << name;
    // Another shard or grid of the same traces resumes, and the file takes its metadata.
    {
      ResultsStream other(path, {"a", "b"}, true, meta(1, 2));
      other.finish(other.existing());
    }
    EXPECT_EQ(read_results(path).meta, meta(1, 2)) << name;
    // Trace "t" with other requests: its rows in the file are not results of this sweep.
    SweepMeta changed = meta(1, 2);
    changed.traces[0].request_hash = "fnv1a64:1111111111111111";
    try {
      ResultsStream stream(path, {"a", "b"}, true, changed);
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": its rows are of another trace named t (t (12 events, requests "
                                                  "fnv1a64:0123456789abcdef); this sweep's is t (12 events, requests "
                                                  "fnv1a64:1111111111111111))"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Results, MalformedJsonlRowsNameFileLineAndField) {
  const fs::path dir = testing::scratch_dir("results");
  const std::string path = (dir / "bad-fields.jsonl").string();
  const std::string good = format_row(row("t", {"64"}, 9), {"a"}, ResultsFormat::Jsonl);
  auto error = [&](const std::string& second_line) {
    write_text(path, good + second_line + "\n");
    try {
      read_results(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string bad = good;
  const std::string field = "\"peak_reserved_bytes\":9,";
  bad.replace(bad.find(field), field.size(), "\"peak_reserved_bytes\":\"x\",");
  bad.pop_back();
  EXPECT_EQ(error(bad), path + ":2: peak_reserved_bytes = \"x\": expected a byte count (an integer 0..2^63-1)");
  EXPECT_EQ(error("[1,2]"), path +
                                ":2: expected a results row (a JSON object with trace, device, spec, knobs and the "
                                "metrics); got array '[1,2]'");
  // The JSON error's column (10: the end of the line) and the parser's words, without its id.
  EXPECT_EQ(error("{\"trace\":"),
            path +
                ":2: expected a results row (a JSON object with trace, device, spec, knobs and "
                "the metrics); got '{\"trace\":' (not valid JSON at column 10: syntax error "
                "while parsing value - unexpected end of input; expected '[', '{', or a literal)");
  EXPECT_EQ(error("{\"trace\":1}"), path + ":2: 'trace' = 1: expected a string");
  std::string knob = good;
  const std::string value = "\"a\":\"64\"";
  knob.replace(knob.find(value), value.size(), "\"a\":64");
  knob.pop_back();
  EXPECT_EQ(error(knob), path + ":2: knobs.a = 64: expected a string or null");
}

}  // namespace
}  // namespace fraglab
