// The results files `fraglab merge` reads (read_results: src/sweep/results_file.cpp,
// results_format.cpp, sweep_meta.cpp) and its check that they make one sweep (shards.cpp), on
// the same bytes read as a .csv and as a .jsonl file.
// Properties:
//  - bad input is an InputError, never anything else;
//  - a file that reads, written back (results_text, what merge writes), reads to the same rows,
//    and writing those again gives the same bytes.
#include "fraglab/sweep.hpp"
#include "fuzz_support.hpp"

namespace fraglab::fuzz {

namespace {

void read_as(std::string_view data, const std::string& name, ResultsFormat format) {
  const std::string path = scratch_file(name, data);
  std::size_t tail = 0;
  ResultsTable table;
  if (!input_error_of([&] { table = read_results(path, &tail); }).empty()) return;
  require(tail <= data.size(), "partial tail longer than the file");

  // What merge does with the files next: the sweep check, the grid back from the metadata.
  const std::vector<std::pair<std::string, std::optional<SweepMeta>>> files{{path, table.meta}};
  (void)input_error_of([&] { (void)sweep_mismatches(files); });
  (void)input_error_of([&] { (void)check_shards(files, table.rows); });
  if (table.meta) (void)input_error_of([&] { (void)meta_grid(*table.meta); });

  const std::string text = results_text(table, format);
  const std::string written = scratch_file("written-" + name, text);
  ResultsTable back;
  const std::string error = input_error_of([&] { back = read_results(written, nullptr); });
  if (!error.empty()) fail("a results file that read was written back as one that does not: " + error);
  require(back.knob_keys == table.knob_keys, "written and read back, the knob keys differ");
  require(back.meta == table.meta, "written and read back, the sweep metadata differs");
  std::vector<SweepRow> rows = table.rows;
  sort_rows(rows);
  require(back.rows.size() == rows.size(), "written and read back, the row count differs");
  require(results_text(back, format) == text, "writing the read-back table gives other bytes");
}

}  // namespace

void fuzz_one(std::string_view data) {
  read_as(data, "results.csv", ResultsFormat::Csv);
  read_as(data, "results.jsonl", ResultsFormat::Jsonl);
}

}  // namespace fraglab::fuzz
