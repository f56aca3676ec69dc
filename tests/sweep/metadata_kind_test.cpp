// The one recogniser of results-file metadata (metadata_line): which command's file a line opens,
// and that each command refuses the other's files by name (exit 2, one line) instead of reading
// them as rows: `merge` and `sweep --resume` a maxbatch file, `maxbatch --merge` a sweep file.
#include <gtest/gtest.h>

#include <algorithm>

#include "fraglab/sweep.hpp"
#include "support/command.hpp"

namespace fraglab {
namespace {

using testing::run_fraglab;
using testing::write_text;

// By hand from the formats (include/fraglab/sweep.hpp, maxbatch_shards.hpp): each metadata object
// opens with its kind's version key; in CSV after "# ", in JSONL as the line itself.
const std::string kSweepJson = R"({"fraglab_sweep":1,"shard":"0/1","policy":"pytorch","grid":[]})";
const std::string kMaxbatchJson = R"({"fraglab_maxbatch":1,"shard":"0/2","workload":"w"})";
// A maxbatch CSV file without rows: its metadata, then the header of its knob column (the header
// itself is results_format.cpp's, tested in results_test.cpp).
std::string maxbatch_csv() { return "# " + kMaxbatchJson + "\n" + csv_header({"micro_batch"}) + "\n"; }

TEST(MetadataLine, NamesItsKindInEitherFormat) {
  EXPECT_EQ(metadata_line(kSweepJson, ResultsFormat::Jsonl).kind, MetadataKind::Sweep);
  EXPECT_EQ(metadata_line(kMaxbatchJson, ResultsFormat::Jsonl).kind, MetadataKind::Maxbatch);
  EXPECT_EQ(metadata_line("# " + kSweepJson, ResultsFormat::Csv).kind, MetadataKind::Sweep);
  const std::string csv_line = "# " + kMaxbatchJson;
  const MetadataLine m = metadata_line(csv_line, ResultsFormat::Csv);
  EXPECT_EQ(m.kind, MetadataKind::Maxbatch);
  EXPECT_EQ(m.json, kMaxbatchJson);  // without the "# "
}

TEST(MetadataLine, RowsHeadersAndBareCsvJsonAreNotMetadata) {
  EXPECT_EQ(metadata_line(R"({"trace":"a","device":"sim"})", ResultsFormat::Jsonl).kind, MetadataKind::None);
  EXPECT_EQ(metadata_line("trace,device,spec", ResultsFormat::Csv).kind, MetadataKind::None);
  // CSV metadata is a comment line: the JSON without "# " is not metadata there, nor "# " in JSONL.
  EXPECT_EQ(metadata_line(kSweepJson, ResultsFormat::Csv).kind, MetadataKind::None);
  EXPECT_EQ(metadata_line("# " + kMaxbatchJson, ResultsFormat::Jsonl).kind, MetadataKind::None);
  EXPECT_EQ(metadata_line("", ResultsFormat::Jsonl).kind, MetadataKind::None);
}

TEST(MetadataLine, ReadResultsRecordsTheKind) {
  const testing::fs::path dir = testing::scratch_dir("metadata-kind-read");
  const testing::fs::path mb = dir / "mb.csv", plain = dir / "plain.csv";
  write_text(mb, maxbatch_csv());
  write_text(plain, csv_header({"a"}) + "\n");
  const ResultsTable t = read_results(mb.string());
  EXPECT_EQ(t.kind, MetadataKind::Maxbatch);
  EXPECT_FALSE(t.meta.has_value());
  EXPECT_EQ(t.knob_keys, std::vector<std::string>{"micro_batch"});  // the header after the metadata
  EXPECT_EQ(read_results(plain.string()).kind, MetadataKind::None);
}

void expect_one_line_error(const testing::CommandResult& r, const std::string& file, const std::string& advice) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(advice), std::string::npos) << r.err;
}

TEST(MetadataLine, MergeRefusesAMaxbatchFileNamingMaxbatchMerge) {
  const testing::fs::path dir = testing::scratch_dir("metadata-kind-merge");
  for (const std::string name : {"mb.csv", "mb.jsonl"}) {
    const testing::fs::path file = dir / name;
    write_text(file, name.ends_with(".csv") ? maxbatch_csv() : kMaxbatchJson + "\n");
    const auto r = run_fraglab("merge " + file.string() + " -o " + (dir / "out.csv").string() + " --overwrite");
    expect_one_line_error(r, file.string(), "fraglab maxbatch --merge");
    EXPECT_EQ(r.err.find("no sweep metadata"), std::string::npos) << r.err;
    EXPECT_FALSE(testing::fs::exists(dir / "out.csv"));
  }
}

TEST(MetadataLine, MaxbatchMergeRefusesASweepFileNamingMerge) {
  const testing::fs::path dir = testing::scratch_dir("metadata-kind-mbmerge");
  const testing::fs::path csv = dir / "sweep.csv", jsonl = dir / "sweep.jsonl";
  write_text(csv, "# " + kSweepJson + "\n" + csv_header({}) + "\n");
  write_text(jsonl, kSweepJson + "\n");
  expect_one_line_error(run_fraglab("maxbatch --merge " + csv.string()), csv.string(), "fraglab merge");
  expect_one_line_error(run_fraglab("maxbatch --merge " + jsonl.string()), jsonl.string(), "fraglab merge");
}

TEST(MetadataLine, SweepResumeRefusesAMaxbatchFile) {
  const testing::fs::path dir = testing::scratch_dir("metadata-kind-resume");
  const testing::fs::path file = dir / "mb.csv";
  const std::string text = maxbatch_csv();
  write_text(file, text);
  const std::string trace = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";
  const auto r = run_fraglab("sweep " + trace + " -p pytorch --no-progress --resume -o " + file.string());
  expect_one_line_error(r, file.string(), "maxbatch results file");
  EXPECT_EQ(testing::read_text(file), text);  // left as it was
}

}  // namespace
}  // namespace fraglab
