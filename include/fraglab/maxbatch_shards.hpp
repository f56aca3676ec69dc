// `fraglab maxbatch --shard I/N` and `--merge`: a maxbatch run split across machines by spec, its
// results files (-o) starting with a metadata line that says what they belong to, and the merge
// that rebuilds the single-machine answer from them.
//
// Why the merge can be exact: each spec's search (fraglab/maxbatch.hpp) reads only that spec's
// outcome at the batches it asks for, so it asks for the same batches whatever other specs run
// beside it. A shard's file holds a row for every (batch, spec) its specs' searches asked for;
// the merge re-runs find_max_batches over every spec with those rows as the evaluator, which
// gives the same MaxbatchResult as one machine replaying all specs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fraglab/maxbatch.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/trace_identity.hpp"

namespace fraglab {

// What a maxbatch results file belongs to. Written as its first line (in CSV after "# "):
// {"fraglab_maxbatch":1,"shard":"I/N","workload":S,"generator":S,"first_trace":{...},"device":S,
//  "specs":[S...],"grid_policy":S,"grid":[S...],"min_batch":N,"max_batch":N,"verify_below":N,
//  "scan_above":N}
struct MaxbatchMeta {
  Shard shard;
  std::string workload;            // MaxbatchContext::workload ("gpt2-xl fsdp1, world size 2, 2 steps")
  std::string generator;           // describe_options() of the run at --min-batch
  TraceIdentity first_trace;       // the trace generated at --min-batch: its request hash covers every gen option
  std::string device;              // the device spec
  std::vector<std::string> specs;  // every spec searched (the -p specs, then the grid's points), unsharded
  std::string grid_policy;         // the grid's base spec
  std::vector<std::string> grid;   // grid_axis_text() of each --grid axis
  MaxbatchBounds bounds;
  bool operator==(const MaxbatchMeta&) const;
};

// The specs searched: the -p specs, then every point of the grid (grid_setting order).
std::vector<std::string> maxbatch_specs(const std::vector<std::string>& policies, const SweepGrid& grid);

std::string maxbatch_meta_line(const MaxbatchMeta& meta);  // the JSON object, no '\n'

// A results file of `fraglab maxbatch -o`, written as runs finish: the metadata line, (CSV) the
// header, then a row per run; finish() rewrites it whole in canonical row order (through a
// temporary file and a rename). The knob column is micro_batch.
class MaxbatchResultsFile {
 public:
  // Writes the metadata line, then `rows_so_far` (the runs a resumed search found in the file).
  MaxbatchResultsFile(std::string path, MaxbatchMeta meta, const std::vector<SweepRow>& rows_so_far = {});
  ~MaxbatchResultsFile();
  MaxbatchResultsFile(const MaxbatchResultsFile&) = delete;
  MaxbatchResultsFile& operator=(const MaxbatchResultsFile&) = delete;
  void append(const SweepRow& row);
  void finish(std::vector<SweepRow> rows);

 private:
  std::string path_;
  MaxbatchMeta meta_;
  ResultsFormat format_;
  std::FILE* file_ = nullptr;
};

// `maxbatch --resume`: the complete rows an interrupted run of the same search (`meta`, shard
// included) left in `path`; none when the file is missing or empty. Throws InputError (one line,
// naming the file) when it is not a maxbatch results file or holds another run's results.
std::vector<SweepRow> rows_to_resume(const std::string& path, const MaxbatchMeta& meta);

// The runs among a maxbatch results file's rows, by (micro-batch, spec), added to `runs`. A row
// whose micro_batch cell is not a decimal count of at most 9 digits is no run a search asks for
// and is left out; of two rows of one run, the one added first is kept. The pointers are into
// `rows`.
using MaxbatchRuns = std::map<std::pair<std::uint32_t, std::string>, const SweepRow*>;
void add_runs_by_batch(const std::vector<SweepRow>& rows, MaxbatchRuns& runs);

// Reads the shard files of one maxbatch run and rebuilds its result. Throws InputError (one line,
// naming the files) when a file is not a maxbatch results file, files come from different runs,
// a shard is given twice or missing, or a spec's search needs a run no file holds.
struct MaxbatchMerge {
  MaxbatchMeta meta;  // the run's (shard 0/1)
  MaxbatchResult result;
};
MaxbatchMerge merge_maxbatch_files(const std::vector<std::string>& paths);

}  // namespace fraglab
