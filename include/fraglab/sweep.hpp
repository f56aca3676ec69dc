// Knob sweeps (`fraglab sweep`, `fraglab merge`): a grid of policy options replayed over one or
// more traces, results streamed to a CSV / JSONL file row by row, and the summary users act on
// (the table by peak reserved, the Pareto front, the best setting as PYTORCH_CUDA_ALLOC_CONF).
//
// Invariants:
//  - a run is identified by (trace name, device spec, policy spec); the spec is built from the
//    grid deterministically, so the same grid gives the same keys in every process (resume,
//    shards and merge rely on it);
//  - results files have one canonical order (sort_rows): whatever the thread count, shard split
//    or completion order, a finished sweep and a merge of its shards give the same bytes;
//  - a results file only ever grows by whole lines; a line without its '\n' is what a killed
//    writer left behind and is never read as a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/device_spec.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/trace.hpp"
#include "fraglab/trace_identity.hpp"

namespace fraglab {

// ---- the grid ---------------------------------------------------------------------------------

// One `--grid KEY=V1,V2,...` axis. A value of nullopt ("none" on the command line) means the
// option is left out of the spec, i.e. the policy's default.
struct GridAxis {
  std::string key;
  std::vector<std::optional<std::string>> values;
};

// "KEY=V1,V2,..." -> an axis. Commas inside [...] belong to the value
// ("roundup_power2_divisions=[256:1,>:8],4"). Throws InputError naming the argument.
GridAxis parse_grid_axis(std::string_view text);

struct SweepGrid {
  std::string base_spec = "pytorch";  // NAME[:fixed options]
  std::vector<GridAxis> axes;
};

// Checks every key against the policy's registered options (not twice, not also fixed) and
// every value by building the policy with it, so a bad grid fails before any trace is read.
// Throws InputError naming the key and what was expected.
void validate_grid(const SweepGrid& grid);

// One point of the grid: the value chosen on each axis and the spec string it makes.
struct Setting {
  std::vector<std::optional<std::string>> values;  // one per axis
  std::string spec;  // base_spec + ",key:value" for each non-none value, axes in grid order
};
// Every point, the first axis varying slowest. Holds them all: for small grids and tests; a sweep
// counts the grid (grid_size) and takes its points one at a time (grid_setting).
std::vector<Setting> expand_grid(const SweepGrid& grid);

// The number of points: the product of the axes' value counts (1 without axes). Throws InputError
// naming the axes' counts when it does not fit 64 bits.
std::uint64_t grid_size(const SweepGrid& grid);
// Point `n` (0 <= n < grid_size) of expand_grid's order, decoded from n in mixed radix (the last
// axis is the lowest digit): settings streamed one at a time instead of held all at once.
Setting grid_setting(const SweepGrid& grid, std::uint64_t n);

// What one run of a sweep costs to keep in memory until the ranking is printed: its results row
// (held by the sweep, the results file's final copy and the ranking's sorted copies) and its job.
std::uint64_t sweep_run_bytes(const SweepGrid& grid);
// Refuses, up front, a sweep whose runs (grid points x traces, the shard's share of them) would
// not fit the memory budget (fraglab/memory_budget.hpp): InputError "WHAT: N settings x T traces
// = R runs ...: needs about X, more than the memory budget B". `what` names the grid ("--grid",
// or a results file's metadata). Returns the number of runs.
std::uint64_t check_sweep_size(const SweepGrid& grid, std::uint64_t traces, std::uint64_t shard_count,
                               std::string_view what);

// `--shard I/N`: run k (in trace-major grid order) belongs to shard k mod N. Round robin keeps
// the shards balanced when neighbouring settings cost about the same.
struct Shard {
  std::size_t index = 0;
  std::size_t count = 1;
  bool contains(std::size_t run) const { return run % count == index; }
  bool operator==(const Shard&) const = default;
};
Shard parse_shard(std::string_view text);    // "I/N", 0 <= I < N; throws InputError
std::string shard_text(const Shard& shard);  // "I/N"

// An axis as `--grid` takes it, canonically: "KEY=V1,V2" with "none" for a left-out option;
// parse_grid_axis() of it gives the axis back.
std::string grid_axis_text(const GridAxis& axis);

// ---- results ----------------------------------------------------------------------------------

// One finished run: a row of the results file.
struct SweepRow {
  std::string trace;                              // Trace::name
  std::string device;                             // device spec, e.g. "sim" or "sim:40GiB"
  std::string spec;                               // policy spec
  std::vector<std::optional<std::string>> knobs;  // the swept values, one per knob column
  // The results-JSON metrics (README "Metrics"): peaks, fragmentation_at_peak, peak_utilization,
  // retries, ooms, device calls. The other fields stay 0.
  Metrics metrics;

  std::uint64_t device_calls() const { return metrics.num_device_alloc + metrics.num_device_free; }
  // Same run, same figures (the metrics a row carries, compared exactly).
  bool operator==(const SweepRow& other) const;
};

SweepRow make_row(const std::string& trace, const std::string& device, const Setting& setting,
                  const ReplayResult& result);
// What resume and merge match rows on.
std::string row_key(const SweepRow& row);
std::string row_key(std::string_view trace, std::string_view device, std::string_view spec);

// The canonical order of a results file: trace, then the knob values column by column ("none"
// first, numbers by value, other text naturally), then device and spec.
bool canonical_less(const SweepRow& a, const SweepRow& b);
void sort_rows(std::vector<SweepRow>& rows);
// Numbers by value ("64" < "128", "0.5" < "0.75"), other text with digit runs compared by value.
int natural_compare(std::string_view a, std::string_view b);

enum class ResultsFormat { Csv, Jsonl };
// By extension: ".csv" or ".jsonl". Throws InputError naming the path otherwise.
ResultsFormat results_format(const std::string& path);

// What a sweep knows of each trace beyond its rows (by trace name).
struct SweepTraceContext {
  // The trace's own recorded allocator settings as a spec (empty: not a recorded run). A grid
  // row of the same policy is the baseline; otherwise `recorded_run` is.
  std::string recorded_spec;
  std::optional<SweepRow> recorded_run;  // the recorded settings replayed, when not a grid point
  std::string start_state;               // "recorded" / "cold"; empty when the trace starts from nothing
  bool operator==(const SweepTraceContext&) const = default;
};

// What a results file records about the sweep that wrote it (sweep_meta.cpp), so that `merge`
// can tell a complete set of shards of one sweep from a partial or mixed one. Written as the
// file's first line: in JSONL the object {"fraglab_sweep":1,"shard":"I/N","policy":..,"grid":[..],
// "device":..,"traces":[{"name","events","request_hash"}..]}, in CSV the same after "# ".
// Files written before it existed have none (ResultsTable::meta is empty).
struct SweepMeta {
  Shard shard;
  std::string policy;                 // the grid's base spec (-p)
  std::vector<std::string> grid;      // grid_axis_text() of each axis, in grid order
  std::string device;                 // device spec
  std::vector<TraceIdentity> traces;  // command-line order: the shard split depends on it
  // --start-state (recorded, cold, auto): shards replayed from other starts do not merge. Files
  // that do not record it were written when every replay started from the recorded state.
  std::string start_state = "auto";
  // Per trace name: its start state and recorded settings, with their run when they are not a
  // grid point, so a merge reports against the same baseline as the sweep itself.
  std::map<std::string, SweepTraceContext> contexts;
  // The cost model that priced the rows' device_time_s / stall_time_s (README "Device time"):
  // what names it (the file given to --cost-model, or the defaults' source) and
  // cost_model_digest() of its figures. Written as "cost_model":{"source":S,"digest":S}; empty in
  // files written before fraglab recorded it, which resume and merge refuse (check_cost_model).
  std::string cost_model;
  std::string cost_model_digest;
  bool operator==(const SweepMeta&) const = default;
};
SweepMeta sweep_meta(const SweepGrid& grid, const std::string& device, const std::vector<TraceIdentity>& traces,
                     const Shard& shard, const std::string& start_state = "auto",
                     std::map<std::string, SweepTraceContext> contexts = {});
// The grid back from the metadata (throws InputError if a grid axis does not parse).
SweepGrid meta_grid(const SweepMeta& meta);
std::string meta_line(const SweepMeta& meta);  // the JSON object, no '\n'
// "-p pytorch --grid KEY=V1,V2 ..." for messages.
std::string grid_command(const SweepMeta& meta);

// Resume and merge keep rows of one cost model only: throws InputError naming `path` when its
// metadata records no cost model (a file of an older fraglab: re-run it) or another one than
// `other`'s (`other_name` says whose: "this sweep", or the first file merged).
void check_cost_model(const std::string& path, const SweepMeta& meta, const std::string& other_name,
                      const SweepMeta& other);

// The metadata line a results file may open with (in JSONL the line itself, in CSV the text after
// "# "): a sweep's (SweepMeta, `fraglab sweep -o`) or a maxbatch run's (MaxbatchMeta in
// fraglab/maxbatch_shards.hpp, `fraglab maxbatch -o`). Every reader of results files asks
// metadata_line() (metadata_line.cpp), so a file of one command given to the other is refused by name.
enum class MetadataKind { None, Sweep, Maxbatch };
inline constexpr std::string_view kCsvMetaPrefix = "# ";
struct MetadataLine {
  MetadataKind kind = MetadataKind::None;  // None: a header or a row, not metadata
  std::string_view json;                   // the metadata's JSON object (without CSV's "# ")
};
MetadataLine metadata_line(std::string_view line, ResultsFormat format);

struct ResultsTable {
  std::vector<std::string> knob_keys;  // the grid keys, in column order
  std::vector<SweepRow> rows;
  std::optional<SweepMeta> meta = std::nullopt;  // absent in files written before fraglab recorded it
  // Which metadata the file opened with: a maxbatch results file reads as rows without sweep
  // metadata (meta is empty); `merge` and `sweep --resume` refuse it by this.
  MetadataKind kind = MetadataKind::None;
};

// The CSV header line (no '\n'): trace,device,spec,<knob keys>,<metric keys>.
std::string csv_header(const std::vector<std::string>& knob_keys);
// One row as a line, '\n' included.
std::string format_row(const SweepRow& row, const std::vector<std::string>& knob_keys, ResultsFormat format);

// The whole file's text: the metadata line (when the table has one), the header (CSV), and the
// rows in canonical order.
std::string results_text(const ResultsTable& table, ResultsFormat format);

// Reads a results file. Only lines ending in '\n' count; `partial_tail`, when given, receives the
// byte count of an unterminated last line (a killed writer's). Throws InputError naming file:line.
// A missing or empty file gives an empty table.
ResultsTable read_results(const std::string& path, std::size_t* partial_tail = nullptr);
// The whole file at once, rows in canonical order, through a temporary file and a rename so a
// crash leaves either the old file or the new one.
void write_results(const std::string& path, const ResultsTable& table);

// Appends rows to a results file as runs finish, flushing each one to the OS, so a sweep that is
// killed keeps every finished result. Not thread-safe: the caller serialises append().
class ResultsStream {
 public:
  // resume = false: the file is (re)created with just its header. resume = true: its complete rows
  // are kept (existing()), an unterminated last line is cut off, and new rows are appended; the
  // knob columns must match the file's, and a trace of the file's metadata may not have changed
  // under the same name; the file takes `meta` (this sweep's). Throws InputError naming the file.
  ResultsStream(std::string path, std::vector<std::string> knob_keys, bool resume,
                std::optional<SweepMeta> meta = std::nullopt);
  ~ResultsStream();
  ResultsStream(const ResultsStream&) = delete;
  ResultsStream& operator=(const ResultsStream&) = delete;

  const std::vector<SweepRow>& existing() const { return existing_; }
  void append(const SweepRow& row);
  // Rewrites the file with `rows` in canonical order (after every run has finished).
  void finish(std::vector<SweepRow> rows);

 private:
  std::string path_;
  std::vector<std::string> knob_keys_;
  std::optional<SweepMeta> meta_;
  ResultsFormat format_;
  std::vector<SweepRow> existing_;
  std::FILE* file_ = nullptr;
};

// Whether results files make up one whole sweep (`merge`): every file with metadata must come from
// the same sweep (policy, grid, device, traces), no shard may appear twice, the shards must cover
// the grid, and every run of the grid must be among `rows`. Returns one message per problem
// (empty: complete) and adds a warning per file without metadata. `files`: path and metadata.
struct ShardCheck {
  std::vector<std::string> problems;
  std::vector<std::string> warnings;
  std::optional<SweepMeta> merged;  // the metadata of the whole sweep, when complete and known
};
ShardCheck check_shards(const std::vector<std::pair<std::string, std::optional<SweepMeta>>>& files,
                        const std::vector<SweepRow>& rows);
// Just the first test: one message per file whose sweep (policy, grid, traces, device) differs
// from the first file's (merge runs it before it compares rows, which other grids do not share).
std::vector<std::string> sweep_mismatches(const std::vector<std::pair<std::string, std::optional<SweepMeta>>>& files);

// ---- running ----------------------------------------------------------------------------------

struct SweepJob {
  const Trace* trace = nullptr;  // shared, read-only, by every thread
  std::string spec;
  StartState start_state = StartState::Recorded;  // replaces SweepRunOptions::replay's
  // This job's device, when its trace needs its own (a capacity from the trace's recorded oom);
  // nullopt: SweepRunOptions::device.
  std::optional<DeviceSpec> device = std::nullopt;
};

struct SweepRunOptions {
  unsigned threads = 1;
  ReplayOptions replay;
  DeviceSpec device;  // every run builds its own fresh device (and policy) from it
  // Watch every run with an InvariantChecker; its findings are in each ReplayResult.
  bool check_invariants = false;
  // Answer a job from a finished replay whose decision bounds cover its setting (Policy::coverage:
  // the same trace, start state, device and policy, and every decision would be the same) instead
  // of replaying it. Exact: the same rows as replaying every job. Off under check_invariants.
  bool share = true;
};

// What run_sweep did: every job was either replayed or answered from a replay that covers it.
// The split depends on thread timing (which replay finishes first); the results do not.
struct SweepRunStats {
  std::size_t replayed = 0;
  std::size_t shared = 0;
};

// Replays every job on `threads` worker threads, each through PolicyOnDevice (fraglab/run_replay.hpp),
// or answers it from a finished replay that covers it (SweepRunOptions::share; the result then
// carries that replay's Metrics and OOMs and no detailed_stats or notes). `on_done(job index,
// result)` is called as each job finishes (completion order), one call at a time. The first
// exception thrown by a run or by on_done stops the hand-out of new jobs and is rethrown once the
// workers have stopped.
SweepRunStats run_sweep(const std::vector<SweepJob>& jobs, const SweepRunOptions& options,
                        const std::function<void(std::size_t, const ReplayResult&)>& on_done);
// The same for `count` jobs made one at a time by job_at(i) as the workers take them (called
// from worker threads, one call per job), so a large sweep never holds all its jobs.
SweepRunStats run_sweep(std::size_t count, const std::function<SweepJob(std::size_t)>& job_at,
                        const SweepRunOptions& options,
                        const std::function<void(std::size_t, const ReplayResult&)>& on_done);

// ---- the summary ------------------------------------------------------------------------------

// Rows ordered as the table shows them: runs without OOMs first, then by peak reserved, retries,
// device calls, and canonical order (so the simplest setting wins a tie).
std::vector<SweepRow> rank_rows(std::vector<SweepRow> rows);
// Runs without OOMs that no other such run beats on both peak reserved and device_time_s (and is
// strictly better on one): the trade-off of memory against time in device calls (README "Device
// time"). Ordered by peak reserved, then device time; settings with identical figures all belong
// to the front.
std::vector<SweepRow> pareto_front(const std::vector<SweepRow>& rows);
// Same peak reserved and device time: the front shows such rows on one line.
bool same_front_figures(const SweepRow& a, const SweepRow& b);
// Same peak reserved, retries and device calls: the front shows such rows on one line.
bool same_rank_figures(const SweepRow& a, const SweepRow& b);

// "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128" for a pytorch spec:
// fraglab's own `version` option is dropped, and the value is single-quoted when a shell would
// otherwise read it ([, >, spaces). nullopt for other policies.
std::optional<std::string> alloc_conf_line(std::string_view spec);

}  // namespace fraglab
