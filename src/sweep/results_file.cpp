// Results files: reading them (only whole lines), writing them atomically in canonical order,
// and the append-and-flush stream a running sweep writes to.
//
// Why flush per row and no fsync: the promise is that a sweep that is interrupted or crashes
// loses no finished run; once fflush() has handed the line to the kernel it survives the
// process. (A power cut may lose the tail; resume then simply runs those settings again.)
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "fraglab/input_file.hpp"
#include "fraglab/memory_budget.hpp"
#include "results_lines.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void write_or_fail(std::FILE* file, const std::string& text, const std::string& path) {
  if (std::fwrite(text.data(), 1, text.size(), file) != text.size() || std::fflush(file) != 0) {
    throw InputError(fmt::format("{}: write failed ({})", path, std::strerror(errno)));
  }
}

}  // namespace

std::string results_text(const ResultsTable& table, ResultsFormat format) {
  std::vector<SweepRow> rows = table.rows;
  sort_rows(rows);
  std::string out;
  if (table.meta)
    out = fmt::format("{}{}\n", format == ResultsFormat::Csv ? kCsvMetaPrefix : "", meta_line(*table.meta));
  if (format == ResultsFormat::Csv) out += csv_header(table.knob_keys) + '\n';
  for (const SweepRow& row : rows) out += format_row(row, table.knob_keys, format);
  return out;
}

ResultsFormat results_format(const std::string& path) {
  if (ends_with(path, ".csv")) return ResultsFormat::Csv;
  if (ends_with(path, ".jsonl")) return ResultsFormat::Jsonl;
  throw InputError(fmt::format("{}: results files end in .csv or .jsonl", path));
}

ResultsTable read_results(const std::string& path, std::size_t* partial_tail) {
  const ResultsFormat format = results_format(path);
  ResultsTable table;
  if (partial_tail != nullptr) *partial_tail = 0;
  std::error_code ec;
  if (!fs::exists(path, ec)) return table;
  // Rows in memory take a few times their text (strings of trace, device, spec and knobs): the
  // text may use a fraction of the budget.
  const std::string text =
      read_input_file(path, "a sweep results file (.csv or .jsonl, as fraglab sweep -o writes)", memory_budget() / 8);
  const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (partial_tail != nullptr) *partial_tail = text.size() - complete;

  bool have_keys = false;  // CSV: header seen; JSONL: first row seen
  bool first = true;       // the first non-empty line, where the sweep metadata may be
  size_t pos = 0;
  for (size_t line_no = 1; pos < complete; ++line_no) {
    const size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const LineOrigin at = fmt::format("{}:{}", path, line_no);
    const bool at_start = std::exchange(first, false);
    const MetadataLine meta = at_start ? metadata_line(line, format) : MetadataLine{};
    if (meta.kind != MetadataKind::None) {
      table.kind = meta.kind;
      // A maxbatch run's metadata is not a sweep's: its rows read as rows of a file without sweep
      // metadata (callers refuse the file by table.kind); maxbatch --merge reads the line itself.
      if (meta.kind == MetadataKind::Sweep) table.meta = parse_meta_line(meta.json, at);
      first = format == ResultsFormat::Csv;  // the CSV header follows
      continue;
    }
    if (format == ResultsFormat::Csv) {
      if (!have_keys) {
        table.knob_keys = parse_csv_header(line, at);
        have_keys = true;
      } else {
        table.rows.push_back(parse_csv_row(line, table.knob_keys, at));
      }
    } else {
      table.rows.push_back(parse_jsonl_row(line, table.knob_keys, have_keys, at));
      have_keys = true;
    }
  }
  return table;
}

void replace_file_with(const std::string& path, const std::string& text) {
  // Same folder, so the rename cannot cross file systems.
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(fmt::format("{}: cannot open for writing", temp));
    out << text;
    out.flush();
    if (!out) throw InputError(fmt::format("{}: write failed", temp));
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) throw InputError(fmt::format("{}: cannot replace with {} ({})", path, temp, ec.message()));
}

void write_results(const std::string& path, const ResultsTable& table) {
  replace_file_with(path, results_text(table, results_format(path)));
}

ResultsStream::ResultsStream(std::string path, std::vector<std::string> knob_keys, bool resume,
                             std::optional<SweepMeta> meta)
    : path_(std::move(path)), knob_keys_(std::move(knob_keys)), meta_(std::move(meta)), format_(results_format(path_)) {
  bool fresh = true;
  if (resume) {
    size_t tail = 0;
    ResultsTable old = read_results(path_, &tail);
    if (old.kind == MetadataKind::Maxbatch)
      throw InputError(fmt::format(
          "{}: a maxbatch results file (fraglab maxbatch -o), not a sweep's: --resume a sweep from its own -o file",
          path_));
    std::error_code ec;
    const bool exists = fs::exists(path_, ec);
    if (exists && tail > 0) {
      // A line without its '\n' is what a killed writer left: cut it off and run it again.
      fs::resize_file(path_, fs::file_size(path_) - tail, ec);
      if (ec) throw InputError(fmt::format("{}: cannot cut off the unfinished last line ({})", path_, ec.message()));
    }
    const bool has_keys = !old.rows.empty() || (format_ == ResultsFormat::Csv && exists && fs::file_size(path_) > 0);
    if (has_keys && old.knob_keys != knob_keys_) {
      auto list = [](const std::vector<std::string>& keys) {
        std::string s;
        for (const std::string& k : keys) s += fmt::format("{}{}", s.empty() ? "" : ", ", k);
        return s.empty() ? std::string("none") : s;
      };
      throw InputError(
          fmt::format("{}: its swept options ({}) differ from this sweep's ({}); resume with the same "
                      "--grid keys in the same order, or write to a new file and merge",
                      path_, list(old.knob_keys), list(knob_keys_)));
    }
    // Rows are keyed by trace name: rows of a trace that has since changed under the same name
    // would be kept as if they were results of the new one. Another grid, shard or device is
    // fine (rows are keyed by spec and device; the file takes this sweep's metadata).
    if (has_keys && old.meta && meta_) {
      for (const TraceIdentity& was : old.meta->traces) {
        for (const TraceIdentity& now : meta_->traces) {
          if (was.name == now.name && !(was == now)) {
            throw InputError(
                fmt::format("{}: its rows are of another trace named {} ({}; this sweep's is {}); "
                            "write to a new file, or start this one again with --overwrite",
                            path_, was.name, describe(was), describe(now)));
          }
        }
      }
    }
    // device_time_s depends on the cost model: rows priced by other figures (or by figures the
    // file does not name) would be ranked against this sweep's as if they were comparable.
    if (has_keys && old.meta && meta_ && !meta_->cost_model_digest.empty())
      check_cost_model(path_, *old.meta, "this sweep", *meta_);
    existing_ = std::move(old.rows);
    fresh = !has_keys;
  }
  file_ = std::fopen(path_.c_str(), fresh ? "wb" : "ab");
  if (file_ == nullptr) throw InputError(fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
  if (fresh) {
    std::string head;
    if (meta_) head = fmt::format("{}{}\n", format_ == ResultsFormat::Csv ? kCsvMetaPrefix : "", meta_line(*meta_));
    if (format_ == ResultsFormat::Csv) head += csv_header(knob_keys_) + '\n';
    if (!head.empty()) write_or_fail(file_, head, path_);
  }
}

ResultsStream::~ResultsStream() {
  if (file_ != nullptr) std::fclose(file_);
}

void ResultsStream::append(const SweepRow& row) { write_or_fail(file_, format_row(row, knob_keys_, format_), path_); }

void ResultsStream::finish(std::vector<SweepRow> rows) {
  std::fclose(file_);
  file_ = nullptr;
  write_results(path_, ResultsTable{knob_keys_, std::move(rows), meta_});
}

}  // namespace fraglab
