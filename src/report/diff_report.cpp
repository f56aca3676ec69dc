// Rendering a TraceDiff: a text report for people and JSON for scripts. Spans are matched by
// their (step, phase) pair, tags by name; a side that lacks one shows "-".
#include <fmt/format.h>

#include <map>

#include "fraglab/diff.hpp"
#include "fraglab/diff_report.hpp"
#include "fraglab/report.hpp"

namespace fraglab {
namespace {

std::string delta_bytes(Bytes a, Bytes b) {
  if (a == b) return "=";
  return fmt::format("{}{}", b > a ? "+" : "-", format_bytes(b > a ? b - a : a - b));
}

std::string delta_count(std::uint64_t a, std::uint64_t b) {
  if (a == b) return "=";
  return b > a ? fmt::format("+{}", b - a) : fmt::format("-{}", a - b);
}

std::string delta_ratio(double a, double b) { return a == b ? "=" : fmt::format("{:+.4f}", b - a); }

// Keys in order of first appearance in A, then those only B has.
template <typename T, typename Key>
std::vector<std::pair<const T*, const T*>> align(const std::vector<T>& a, const std::vector<T>& b, Key key) {
  std::vector<std::pair<const T*, const T*>> out;
  std::map<std::string, size_t> where;
  for (const T& x : a) {
    where[key(x)] = out.size();
    out.push_back({&x, nullptr});
  }
  for (const T& y : b) {
    auto it = where.find(key(y));
    if (it != where.end())
      out[it->second].second = &y;
    else
      out.push_back({nullptr, &y});
  }
  return out;
}

std::string span_key(const SpanProfile& s) { return s.step + '\n' + s.phase; }
std::string tag_key(const TagProfile& t) { return t.tag; }

std::string bytes_or_dash(const void* p, Bytes v) { return p ? format_bytes(v) : "-"; }

}  // namespace

std::string diff_report(const Trace& a, const Trace& b, const TraceDiff& diff) {
  const Metrics& ma = diff.a.result.metrics;
  const Metrics& mb = diff.b.result.metrics;
  const std::string device = diff.device.empty() ? std::string() : fmt::format("; device {}", diff.device);
  std::string out = fmt::format("diff under {}{}\n  A = {} ({} events)\n  B = {} ({} events)\n\n", diff.policy, device,
                                diff.name_a, a.events.size(), diff.name_b, b.events.size());
  out += fmt::format("  {:<24} {:>14} {:>14} {:>14}\n", "", "A", "B", "B - A");
  auto bytes_row = [&](const char* name, Bytes x, Bytes y) {
    out += fmt::format("  {:<24} {:>14} {:>14} {:>14}\n", name, format_bytes(x), format_bytes(y), delta_bytes(x, y));
  };
  auto count_row = [&](const char* name, std::uint64_t x, std::uint64_t y) {
    out += fmt::format("  {:<24} {:>14} {:>14} {:>14}\n", name, x, y, delta_count(x, y));
  };
  auto ratio_row = [&](const char* name, double x, double y) {
    out += fmt::format("  {:<24} {:>14.4f} {:>14.4f} {:>14}\n", name, x, y, delta_ratio(x, y));
  };
  bytes_row("peak reserved", ma.peak_reserved, mb.peak_reserved);
  bytes_row("peak requested", ma.peak_requested, mb.peak_requested);
  bytes_row("peak allocated", ma.peak_allocated, mb.peak_allocated);
  ratio_row("fragmentation at peak", ma.fragmentation_at_peak, mb.fragmentation_at_peak);
  ratio_row("peak utilization", ma.peak_utilization, mb.peak_utilization);
  count_row("alloc retries", ma.num_alloc_retries, mb.num_alloc_retries);
  count_row("OOMs", ma.num_ooms, mb.num_ooms);
  count_row("device allocs", ma.num_device_alloc, mb.num_device_alloc);
  count_row("device frees", ma.num_device_free, mb.num_device_free);

  out += "\nper step / phase (peaks after the span's events):\n";
  out += fmt::format("  {:<6} {:<12} {:>12} {:>12} {:>12}   {:>12} {:>12} {:>12}   {:>7} {:>7}\n", "step", "phase",
                     "resv A", "resv B", "B - A", "req A", "req B", "B - A", "frag A", "frag B");
  for (const auto& [x, y] : align(diff.a.spans, diff.b.spans, span_key)) {
    const SpanProfile& s = x ? *x : *y;
    out += fmt::format("  {:<6} {:<12} {:>12} {:>12} {:>12}   {:>12} {:>12} {:>12}   {:>7} {:>7}\n",
                       s.step.empty() ? "-" : s.step, s.phase.empty() ? "-" : s.phase,
                       bytes_or_dash(x, x ? x->peak_reserved : 0), bytes_or_dash(y, y ? y->peak_reserved : 0),
                       x && y ? delta_bytes(x->peak_reserved, y->peak_reserved) : "-",
                       bytes_or_dash(x, x ? x->peak_requested : 0), bytes_or_dash(y, y ? y->peak_requested : 0),
                       x && y ? delta_bytes(x->peak_requested, y->peak_requested) : "-",
                       x ? fmt::format("{:.4f}", x->fragmentation_at_peak()) : "-",
                       y ? fmt::format("{:.4f}", y->fragmentation_at_peak()) : "-");
  }

  out += "\nper tag (requested bytes; 'at peak' = live when reserved peaked):\n";
  out += fmt::format("  {:<12} {:>12} {:>12} {:>12}   {:>12} {:>12} {:>12}\n", "tag", "peak A", "peak B", "B - A",
                     "at peak A", "at peak B", "B - A");
  for (const auto& [x, y] : align(diff.a.tags, diff.b.tags, tag_key)) {
    const TagProfile& t = x ? *x : *y;
    const Bytes pa = x ? x->peak_live : 0, pb = y ? y->peak_live : 0;
    const Bytes ka = x ? x->live_at_peak_reserved : 0, kb = y ? y->live_at_peak_reserved : 0;
    out += fmt::format("  {:<12} {:>12} {:>12} {:>12}   {:>12} {:>12} {:>12}\n", t.tag, format_bytes(pa),
                       format_bytes(pb), delta_bytes(pa, pb), format_bytes(ka), format_bytes(kb), delta_bytes(ka, kb));
  }

  out += "\nwhere the timelines part:\n";
  const TraceDivergence& d = diff.divergence;
  if (d.input_event) {
    out += fmt::format("  inputs part at event {}\n    A {}\n    B {}\n", *d.input_event,
                       describe_event(a, *d.input_event), describe_event(b, *d.input_event));
  } else {
    out += "  the inputs are the same event for event\n";
  }
  if (d.reserved_event) {
    const std::uint64_t i = *d.reserved_event;
    out += fmt::format("  reserved parts after event {}: A {}, B {}\n", i, format_bytes(diff.a.timeline[i].reserved),
                       format_bytes(diff.b.timeline[i].reserved));
    if (d.input_event != d.reserved_event) {
      out += fmt::format("    A {}\n    B {}\n", describe_event(a, i), describe_event(b, i));
    }
  } else {
    out += "  reserved bytes are the same after every event both traces have\n";
  }
  auto peak_line = [&](const char* side, const Trace& t, const ReplayProfile& p) {
    out += fmt::format("  {} reserved peaks {}\n", side,
                       p.peak_event < 0 ? std::string("at the start (the initial state)")
                                        : "after " + describe_event(t, static_cast<std::uint64_t>(p.peak_event)));
  };
  peak_line("A", a, diff.a);
  peak_line("B", b, diff.b);
  return out;
}

nlohmann::json diff_json(const Trace& a, const Trace& b, const TraceDiff& diff) {
  auto side = [](const Trace& t, const ReplayProfile& p) {
    nlohmann::json spans = nlohmann::json::array();
    for (const SpanProfile& s : p.spans) {
      spans.push_back({{"step", s.step},
                       {"phase", s.phase},
                       {"first_event", s.first_event},
                       {"events", s.events},
                       {"peak_reserved_bytes", s.peak_reserved},
                       {"peak_requested_bytes", s.peak_requested},
                       {"peak_allocated_bytes", s.peak_allocated},
                       {"fragmentation_at_peak", s.fragmentation_at_peak()}});
    }
    nlohmann::json tags = nlohmann::json::array();
    for (const TagProfile& tag : p.tags) {
      tags.push_back({{"tag", tag.tag},
                      {"allocs", tag.allocs},
                      {"peak_live_bytes", tag.peak_live},
                      {"live_at_peak_reserved_bytes", tag.live_at_peak_reserved}});
    }
    return nlohmann::json{
        {"trace", t.name}, {"events", t.events.size()}, {"run", run_json(p.result)}, {"spans", spans}, {"tags", tags}};
  };
  nlohmann::json j;
  j["policy"] = diff.policy;
  j["a"] = side(a, diff.a);
  j["b"] = side(b, diff.b);
  j["first_input_difference_event"] =
      diff.divergence.input_event ? nlohmann::json(*diff.divergence.input_event) : nlohmann::json(nullptr);
  j["first_reserved_difference_event"] =
      diff.divergence.reserved_event ? nlohmann::json(*diff.divergence.reserved_event) : nlohmann::json(nullptr);
  j["peak_reserved_delta_bytes"] = static_cast<std::int64_t>(diff.b.result.metrics.peak_reserved) -
                                   static_cast<std::int64_t>(diff.a.result.metrics.peak_reserved);
  return j;
}

}  // namespace fraglab
