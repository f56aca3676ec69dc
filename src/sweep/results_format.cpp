// One sweep row as a line of CSV or JSONL, and back.
//
// Columns (CSV header, JSONL keys): trace, device, spec, one column per swept option (its value,
// or "none" when the option was left out; in JSONL an object "knobs" with null for none), then
// the results-JSON metrics under their stable names (README "Metrics", src/report/results_json.cpp).
// Numbers are written so that reading them back gives the same value bit for bit (shortest
// round-trip form), which keeps resume and merge exact.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fraglab/check.hpp"
#include "fraglab/input_file.hpp"
#include "results_lines.hpp"

namespace fraglab {
namespace {

struct MetricColumn {
  const char* name;
  bool is_double;
  std::uint64_t Metrics::*count;
  double Metrics::*ratio;
  bool seconds = false;  // a double that is a time (>= 0), not a fraction
};

// Order of the metric columns in every results file.
const MetricColumn kMetricColumns[] = {
    {"peak_reserved_bytes", false, &Metrics::peak_reserved, nullptr},
    {"peak_allocated_bytes", false, &Metrics::peak_allocated, nullptr},
    {"peak_requested_bytes", false, &Metrics::peak_requested, nullptr},
    {"fragmentation_at_peak", true, nullptr, &Metrics::fragmentation_at_peak},
    {"peak_utilization", true, nullptr, &Metrics::peak_utilization},
    {"num_alloc_retries", false, &Metrics::num_alloc_retries, nullptr},
    {"num_ooms", false, &Metrics::num_ooms, nullptr},
    {"num_device_alloc", false, &Metrics::num_device_alloc, nullptr},
    {"num_device_free", false, &Metrics::num_device_free, nullptr},
    {"device_time_s", true, nullptr, &Metrics::device_time_s, true},
    {"stall_time_s", true, nullptr, &Metrics::stall_time_s, true},
};
constexpr size_t kFixedColumns = 3;  // trace, device, spec
// Files written before device_time_s existed end their columns with num_device_free.
constexpr size_t kOlderFormatMetrics = 9;

// One line for a file of that older format, wherever it is read (sweep --resume, merge, report):
// its rows have no device time and cannot be ranked with today's, only made again.
InputError older_format(const LineOrigin& at) {
  return InputError(
      fmt::format("{}: a results file of an older fraglab format (no device_time_s and stall_time_s): re-run "
                  "the sweep into a new file (or with --overwrite)",
                  at));
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

// Splits one CSV line (no '\n') into fields; "" inside quotes is a quote.
std::vector<std::string> split_csv(std::string_view line, const LineOrigin& at) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        fields.back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        fields.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) throw InputError(fmt::format("{}: unterminated quoted field", at));
  return fields;
}

// What a count column accepts (the bound of check.hpp, shared with baselines).
std::string expected_count(const char* column) {
  return fmt::format("expected {} (an integer 0..2^63-1)",
                     std::string_view(column).ends_with("_bytes") ? "a byte count" : "a count");
}

std::uint64_t parse_count(std::string_view text, const char* column, const LineOrigin& at) {
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() || value > kMaxResultCount) {
    throw InputError(fmt::format("{}: {} = '{}': {}", at, column, text, expected_count(column)));
  }
  return value;
}

// Fractions (fragmentation_at_peak, peak_utilization) are 0..1; nan, inf and the rest are corrupt.
bool is_fraction(double value) { return std::isfinite(value) && value >= 0 && value <= 1; }

// Times (device_time_s, stall_time_s) are finite seconds >= 0.
bool is_seconds(double value) { return std::isfinite(value) && value >= 0; }

bool valid_double(const MetricColumn& c, double value) { return c.seconds ? is_seconds(value) : is_fraction(value); }
const char* expected_double(const MetricColumn& c) {
  return c.seconds ? "expected seconds (a finite number >= 0)" : "expected a fraction (a number 0..1)";
}

double parse_ratio(std::string_view text, const MetricColumn& c, const LineOrigin& at) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !valid_double(c, value)) {
    throw InputError(fmt::format("{}: {} = '{}': {}", at, c.name, text, expected_double(c)));
  }
  return value;
}

// A short, one-line view of a JSON value or text for messages.
std::string shown(std::string_view text) {
  std::string out(text.substr(0, 60));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return text.size() > 60 ? out + "..." : out;
}

}  // namespace

std::string csv_header(const std::vector<std::string>& knob_keys) {
  std::string out = "trace,device,spec";
  for (const std::string& key : knob_keys) {
    out += ',';
    out += csv_field(key);
  }
  for (const MetricColumn& c : kMetricColumns) out += fmt::format(",{}", c.name);
  return out;
}

std::string format_row(const SweepRow& row, const std::vector<std::string>& knob_keys, ResultsFormat format) {
  if (format == ResultsFormat::Csv) {
    std::string out = fmt::format("{},{},{}", csv_field(row.trace), csv_field(row.device), csv_field(row.spec));
    for (const auto& knob : row.knobs) {
      out += ',';
      out += csv_field(knob ? *knob : "none");
    }
    for (const MetricColumn& c : kMetricColumns) {
      if (c.is_double)
        out += fmt::format(",{}", row.metrics.*c.ratio);
      else
        out += fmt::format(",{}", row.metrics.*c.count);
    }
    return out + '\n';
  }
  nlohmann::ordered_json j;
  j["trace"] = row.trace;
  j["device"] = row.device;
  j["spec"] = row.spec;
  nlohmann::ordered_json knobs = nlohmann::ordered_json::object();
  for (size_t k = 0; k < knob_keys.size(); ++k) {
    const auto& knob = row.knobs.at(k);
    knobs[knob_keys[k]] = knob ? nlohmann::ordered_json(*knob) : nlohmann::ordered_json(nullptr);
  }
  j["knobs"] = std::move(knobs);
  for (const MetricColumn& c : kMetricColumns) {
    if (c.is_double)
      j[c.name] = row.metrics.*c.ratio;
    else
      j[c.name] = row.metrics.*c.count;
  }
  return j.dump() + '\n';
}

std::vector<std::string> parse_csv_header(std::string_view line, const LineOrigin& at) {
  const std::vector<std::string> fields = split_csv(line, at);
  const size_t metrics = std::size(kMetricColumns);
  const auto expected = [&] {
    return InputError(
        fmt::format("{}: expected the header '{}' (trace,device,spec, the swept options, then the "
                    "metrics)",
                    at, csv_header({"KNOB..."})));
  };
  if (fields.size() < kFixedColumns + kOlderFormatMetrics) throw expected();
  if (fields[0] != "trace" || fields[1] != "device" || fields[2] != "spec") throw expected();
  bool older = true;
  for (size_t m = 0; m < kOlderFormatMetrics && older; ++m)
    older = fields[fields.size() - kOlderFormatMetrics + m] == kMetricColumns[m].name;
  if (older) throw older_format(at);
  if (fields.size() < kFixedColumns + metrics) throw expected();
  for (size_t m = 0; m < metrics; ++m) {
    if (fields[fields.size() - metrics + m] != kMetricColumns[m].name) throw expected();
  }
  return {fields.begin() + kFixedColumns, fields.end() - static_cast<std::ptrdiff_t>(metrics)};
}

SweepRow parse_csv_row(std::string_view line, const std::vector<std::string>& knob_keys, const LineOrigin& at) {
  const std::vector<std::string> fields = split_csv(line, at);
  const size_t expected = kFixedColumns + knob_keys.size() + std::size(kMetricColumns);
  if (fields.size() != expected) {
    throw InputError(fmt::format("{}: expected {} fields as in the header, got {}", at, expected, fields.size()));
  }
  SweepRow row;
  row.trace = fields[0];
  row.device = fields[1];
  row.spec = fields[2];
  for (size_t k = 0; k < knob_keys.size(); ++k) {
    const std::string& v = fields[kFixedColumns + k];
    row.knobs.push_back(v == "none" ? std::nullopt : std::optional<std::string>(v));
  }
  size_t f = kFixedColumns + knob_keys.size();
  for (const MetricColumn& c : kMetricColumns) {
    if (c.is_double)
      row.metrics.*c.ratio = parse_ratio(fields[f++], c, at);
    else
      row.metrics.*c.count = parse_count(fields[f++], c.name, at);
  }
  return row;
}

SweepRow parse_jsonl_row(std::string_view line, std::vector<std::string>& knob_keys, bool keys_known,
                         const LineOrigin& at) {
  // Checked field by field (no library exception text): each message names the file, the line
  // and the field, and says what was expected.
  constexpr std::string_view kExpected =
      "expected a results row (a JSON object with trace, device, spec, knobs and the metrics)";
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    const JsonErrorAt error = locate_json_error(line, e.byte, e.what());
    throw InputError(fmt::format("{}: {}; got '{}' (not valid JSON at column {}: {})", at, kExpected, shown(line),
                                 error.column, error.what));
  } catch (const nlohmann::json::exception&) {
    throw InputError(fmt::format("{}: {}; got '{}' (not valid JSON)", at, kExpected, shown(line)));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: {}; got {} '{}'", at, kExpected, j.type_name(), shown(line)));
  auto text = [&](const char* key) {
    if (!j.contains(key)) throw InputError(fmt::format("{}: the row has no '{}'", at, key));
    if (!j[key].is_string()) throw InputError(fmt::format("{}: '{}' = {}: expected a string", at, key, j[key].dump()));
    return j[key].get<std::string>();
  };
  SweepRow row;
  row.trace = text("trace");
  row.device = text("device");
  row.spec = text("spec");
  if (!j.contains("knobs") || !j["knobs"].is_object()) {
    throw InputError(fmt::format("{}: 'knobs' must be an object (swept option -> value or null)", at));
  }
  const auto& knobs = j["knobs"];
  if (!keys_known) {
    knob_keys.clear();
    for (const auto& [key, value] : knobs.items()) knob_keys.push_back(key);
  }
  if (knobs.size() != knob_keys.size()) {
    throw InputError(
        fmt::format("{}: knobs differ from the file's first row (expected {} options)", at, knob_keys.size()));
  }
  for (const std::string& key : knob_keys) {
    if (!knobs.contains(key)) throw InputError(fmt::format("{}: knobs lack '{}' (the first row has it)", at, key));
    const auto& v = knobs[key];
    if (!v.is_null() && !v.is_string()) {
      throw InputError(fmt::format("{}: knobs.{} = {}: expected a string or null", at, key, v.dump()));
    }
    row.knobs.push_back(v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>()));
  }
  if (!j.contains("device_time_s") && !j.contains("stall_time_s") && j.contains("num_device_free"))
    throw older_format(at);
  for (const MetricColumn& c : kMetricColumns) {
    if (!j.contains(c.name)) throw InputError(fmt::format("{}: the row has no '{}'", at, c.name));
    const auto& v = j[c.name];
    if (c.is_double) {
      if (!v.is_number() || !valid_double(c, v.get<double>()))
        throw InputError(fmt::format("{}: {} = {}: {}", at, c.name, v.dump(), expected_double(c)));
      row.metrics.*c.ratio = v.get<double>();
    } else {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > kMaxResultCount) {
        throw InputError(fmt::format("{}: {} = {}: {}", at, c.name, v.dump(), expected_count(c.name)));
      }
      row.metrics.*c.count = v.get<std::uint64_t>();
    }
  }
  return row;
}

}  // namespace fraglab
