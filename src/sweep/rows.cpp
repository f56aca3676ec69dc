// Sweep rows: building one from a replay, the key runs are matched on, and the canonical order
// that makes results files independent of thread count, shard split and completion order.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fraglab/sweep.hpp"

namespace fraglab {
namespace {

// The whole text is a decimal number ("64", "0.75", "-1", "1e3").
std::optional<double> as_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  // Clinger's fast path for the usual knob values ("64", "0.55"): up to 15 digits with an optional
  // point are an integer below 2^53 over a power of ten up to 1e15, both exact doubles, and the
  // division is correctly rounded, as strtod is: the same double, without strtod's cost.
  static constexpr double kPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  std::uint64_t mantissa = 0;
  int digits = 0;
  int decimals = -1;  // -1: no point yet
  bool plain = true;
  for (const char c : s) {
    if (c >= '0' && c <= '9' && digits < 15) {
      mantissa = mantissa * 10 + static_cast<std::uint64_t>(c - '0');
      ++digits;
      if (decimals >= 0) ++decimals;
    } else if (c == '.' && decimals < 0) {
      decimals = 0;
    } else {
      plain = false;
      break;
    }
  }
  if (plain && digits > 0) return static_cast<double>(mantissa) / kPow10[decimals > 0 ? decimals : 0];
  // strtod wants a terminated string: short ones (every knob value in practice) are copied to the
  // stack, since sorting a large sweep's rows calls this millions of times.
  char small[64];
  std::string large;
  const char* text = small;
  if (s.size() < sizeof small) {
    std::memcpy(small, s.data(), s.size());
    small[s.size()] = '\0';
  } else {
    large.assign(s);
    text = large.c_str();
  }
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end != text + s.size() || std::isspace(static_cast<unsigned char>(s.front()))) return std::nullopt;
  if (std::isnan(value)) return std::nullopt;  // NaN compares with nothing: no total order
  return value;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int compare_knob(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a || !b) return a ? 1 : (b ? -1 : 0);  // "none" (the default) first
  return natural_compare(*a, *b);
}

}  // namespace

SweepRow make_row(const std::string& trace, const std::string& device, const Setting& setting,
                  const ReplayResult& result) {
  SweepRow row;
  row.trace = trace;
  row.device = device;
  row.spec = setting.spec;
  row.knobs = setting.values;
  const Metrics& m = result.metrics;
  // Only the results-JSON metrics travel in a row; the rest would not survive a file round trip.
  row.metrics.peak_reserved = m.peak_reserved;
  row.metrics.peak_allocated = m.peak_allocated;
  row.metrics.peak_requested = m.peak_requested;
  row.metrics.fragmentation_at_peak = m.fragmentation_at_peak;
  row.metrics.peak_utilization = m.peak_utilization;
  row.metrics.num_alloc_retries = m.num_alloc_retries;
  row.metrics.num_ooms = m.num_ooms;
  row.metrics.num_device_alloc = m.num_device_alloc;
  row.metrics.num_device_free = m.num_device_free;
  row.metrics.device_time_s = m.device_time_s;
  row.metrics.stall_time_s = m.stall_time_s;
  return row;
}

bool SweepRow::operator==(const SweepRow& o) const {
  const Metrics& a = metrics;
  const Metrics& b = o.metrics;
  return trace == o.trace && device == o.device && spec == o.spec && knobs == o.knobs &&
         a.peak_reserved == b.peak_reserved && a.peak_allocated == b.peak_allocated &&
         a.peak_requested == b.peak_requested && a.fragmentation_at_peak == b.fragmentation_at_peak &&
         a.peak_utilization == b.peak_utilization && a.num_alloc_retries == b.num_alloc_retries &&
         a.num_ooms == b.num_ooms && a.num_device_alloc == b.num_device_alloc &&
         a.num_device_free == b.num_device_free && a.device_time_s == b.device_time_s &&
         a.stall_time_s == b.stall_time_s;
}

std::string row_key(std::string_view trace, std::string_view device, std::string_view spec) {
  // '\n' cannot occur in any of the three (results files are line-based).
  std::string key(trace);
  key += '\n';
  key += device;
  key += '\n';
  key += spec;
  return key;
}

std::string row_key(const SweepRow& row) { return row_key(row.trace, row.device, row.spec); }

int natural_compare(std::string_view a, std::string_view b) {
  if (a == b) return 0;  // what the comparison below ends with for equal text, at a sort's cost
  const auto na = as_number(a), nb = as_number(b);
  if (na && nb && *na != *nb) return *na < *nb ? -1 : 1;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      // Compare digit runs by value: skip leading zeros, then the longer run is larger.
      size_t ei = i, ej = j;
      while (ei < a.size() && is_digit(a[ei])) ++ei;
      while (ej < b.size() && is_digit(b[ej])) ++ej;
      size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj ? -1 : 1;
      const int c = a.substr(si, ei - si).compare(b.substr(sj, ej - sj));
      if (c != 0) return c < 0 ? -1 : 1;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]) ? -1 : 1;
    ++i;
    ++j;
  }
  if (i < a.size() || j < b.size()) return i < a.size() ? 1 : -1;
  // Equal up to leading zeros ("064" vs "64"): fall back to plain text so the order is total.
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

bool canonical_less(const SweepRow& a, const SweepRow& b) {
  if (int c = natural_compare(a.trace, b.trace)) return c < 0;
  const size_t n = std::min(a.knobs.size(), b.knobs.size());
  for (size_t k = 0; k < n; ++k) {
    if (int c = compare_knob(a.knobs[k], b.knobs[k])) return c < 0;
  }
  if (a.knobs.size() != b.knobs.size()) return a.knobs.size() < b.knobs.size();
  if (int c = natural_compare(a.device, b.device)) return c < 0;
  return a.spec < b.spec;
}

void sort_rows(std::vector<SweepRow>& rows) { std::sort(rows.begin(), rows.end(), canonical_less); }

}  // namespace fraglab
