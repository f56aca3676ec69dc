// The HTML page of `fraglab report SWEEP_RESULTS`: per trace and device, every setting's peak
// reserved against its estimated device time (device_time_s, README "Device time"), the Pareto
// front of the two (pareto_front, src/sweep/ranking.cpp: the same front `sweep` prints), and the
// recommended PYTORCH_CUDA_ALLOC_CONF line (the best setting of sweep's own summary,
// src/report/sweep_report.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fraglab/html_report.hpp"
#include "fraglab/sweep_report.hpp"
#include "html_page.hpp"

namespace fraglab {
namespace {

using html::coord;
using html::escape;

constexpr double kWidth = 900, kHeight = 420, kLeft = 84, kRight = 20, kTop = 16, kBottom = 40;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

// Seconds as the sweep's own summary prints them (six decimals).
std::string seconds(double s) { return fmt::format("{:.6f}", s); }

std::string point_title(const SweepRow& r) {
  return fmt::format(
      "{}\npeak reserved {} ({} bytes)\ndevice time {} s, stall time {} s\ndevice calls {}\nretries {}, OOMs {}",
      r.spec, format_bytes(r.metrics.peak_reserved), r.metrics.peak_reserved, seconds(r.metrics.device_time_s),
      seconds(r.metrics.stall_time_s), r.device_calls(), r.metrics.num_alloc_retries, r.metrics.num_ooms);
}

// A round step of 1, 2 or 5 times a power of ten for about `ticks` gridlines up to `top` seconds.
double seconds_tick_step(double top, int ticks) {
  const double raw = top / ticks;
  const double unit = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (unit * m >= raw) return unit * m;
  }
  return unit * 10;
}

std::string scatter(const std::vector<SweepRow>& rows, const std::vector<SweepRow>& front) {
  Bytes top = 1;
  double time = 0;
  for (const SweepRow& r : rows) {
    top = std::max(top, r.metrics.peak_reserved);
    time = std::max(time, r.metrics.device_time_s);
  }
  top += top / 20;
  // A sweep whose runs took no estimated time (a cost model of zeros) still gets an axis.
  time = time > 0 ? time * 1.05 : 1e-6;
  auto x = [&](double t) { return kLeft + t / time * kPlotWidth; };
  auto y = [&](Bytes b) {
    return kTop + kPlotHeight - static_cast<double>(b) / static_cast<double>(top) * kPlotHeight;
  };
  std::string out = fmt::format(R"(<svg class="pareto" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth,
                                kHeight, kWidth, kHeight);
  out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#adb5bd"/>)", kLeft, kTop,
                     kPlotWidth, kPlotHeight);
  const std::uint64_t ystep = html::byte_tick_step(top, 4);
  const double xstep = seconds_tick_step(time, 6);
  for (Bytes v = 0; v <= top; v += ystep) {
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", kLeft - 6, coord(y(v) + 4),
                       escape(format_bytes(v)));
  }
  for (int i = 0; i * xstep <= time; ++i) {
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{:g}</text>)", coord(x(i * xstep)),
                       kHeight - kBottom + 16, i * xstep);
  }
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">device time (s, estimated)</text>)",
                     kLeft + kPlotWidth / 2, kHeight - 6);
  out += fmt::format(
      R"svg(<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">peak reserved</text>)svg",
      kTop + kPlotHeight / 2, kTop + kPlotHeight / 2);
  // The front as a staircase: less device time buys more memory. pareto_front orders it by peak
  // reserved, so by device time it runs the other way.
  std::vector<const SweepRow*> stairs;
  for (const SweepRow& r : front) stairs.push_back(&r);
  std::stable_sort(stairs.begin(), stairs.end(), [](const SweepRow* a, const SweepRow* b) {
    return a->metrics.device_time_s < b->metrics.device_time_s;
  });
  if (!stairs.empty()) {
    std::string points;
    for (std::size_t i = 0; i < stairs.size(); ++i) {
      if (i > 0)
        points += fmt::format("{},{} ", coord(x(stairs[i]->metrics.device_time_s)),
                              coord(y(stairs[i - 1]->metrics.peak_reserved)));
      points +=
          fmt::format("{},{} ", coord(x(stairs[i]->metrics.device_time_s)), coord(y(stairs[i]->metrics.peak_reserved)));
    }
    points.pop_back();
    out += fmt::format(R"(<polyline class="front-line" points="{}" fill="none" stroke="#1c7ed6" stroke-width="1.5"/>)",
                       points);
  }
  for (const SweepRow& r : rows) {
    const bool on_front =
        std::any_of(front.begin(), front.end(), [&](const SweepRow& f) { return row_key(f) == row_key(r); });
    const double cx = x(r.metrics.device_time_s), cy = y(r.metrics.peak_reserved);
    if (r.metrics.num_ooms > 0) {
      out += fmt::format(
          R"(<path class="oom" d="M{} {}l8 8m0 -8l-8 8" stroke="#e03131" stroke-width="2"><title>{}</title></path>)",
          coord(cx - 4), coord(cy - 4), escape(point_title(r)));
    } else {
      out +=
          fmt::format(R"(<circle class="{}" cx="{}" cy="{}" r="{}" fill="{}" stroke="{}"><title>{}</title></circle>)",
                      on_front ? "front" : "setting", coord(cx), coord(cy), on_front ? 5 : 4,
                      on_front ? "#1c7ed6" : "none", on_front ? "#1864ab" : "#868e96", escape(point_title(r)));
    }
  }
  return out + "</svg>\n";
}

std::string group_section(const std::vector<SweepRow>& rows) {
  const SweepRow& first = rows.front();
  std::string out = fmt::format("<section class=\"sweep-trace\" data-trace=\"{}\">\n<h2>{} on {}</h2>\n",
                                escape(first.trace), escape(first.trace), escape(describe_device_column(first.device)));
  const std::vector<SweepRow> front = pareto_front(rows);
  const std::vector<SweepRow> ranked = rank_rows(rows);
  out += fmt::format(
      "<p class=\"meta\">{} settings; {} on the Pareto front of peak reserved vs estimated device time (filled); "
      "runs with OOMs drawn as red crosses and left off the front.</p>\n",
      rows.size(), front.size());
  out += scatter(rows, front);
  if (ranked.front().metrics.num_ooms > 0) {
    out += "<p class=\"recommended na\">no recommendation: every setting ran out of memory on this device</p>\n";
  } else {
    const SweepRow& best = ranked.front();
    const auto line = alloc_conf_line(best.spec);
    out += fmt::format(
        "<p class=\"recommended\">best (lowest peak reserved, then fewest retries and device calls): "
        "<code>{}</code>, peak reserved {} ({} bytes), device time {} s, stall time {} s</p>\n",
        escape(best.spec), escape(format_bytes(best.metrics.peak_reserved)), best.metrics.peak_reserved,
        seconds(best.metrics.device_time_s), seconds(best.metrics.stall_time_s));
    if (line) {
      out += fmt::format("<p class=\"alloc-conf\">recommended: <code>{}</code>{}</p>\n", escape(*line),
                         line->back() == '=' ? " (PyTorch's defaults: leave it unset)" : "");
    }
  }
  out +=
      "<table class=\"front\"><tr><th class=\"num\">peak reserved</th><th class=\"num\">device time (s)</th><th "
      "class=\"num\">stall time (s)</th><th class=\"num\">device calls</th><th class=\"num\">retries</th>"
      "<th>setting</th><th>PYTORCH_CUDA_ALLOC_CONF</th></tr>\n";
  for (const SweepRow& r : front) {
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td></tr>\n",
        escape(format_bytes(r.metrics.peak_reserved)), seconds(r.metrics.device_time_s),
        seconds(r.metrics.stall_time_s), r.device_calls(), r.metrics.num_alloc_retries, escape(r.spec),
        alloc_conf_line(r.spec) ? "<code>" + escape(*alloc_conf_line(r.spec)) + "</code>" : "");
  }
  return out + "</table>\n</section>\n";
}

}  // namespace

std::string html_sweep_report(const ResultsTable& table, const std::string& source) {
  std::vector<SweepRow> rows = table.rows;
  std::sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) {
    if (int c = natural_compare(a.trace, b.trace)) return c < 0;
    if (int c = natural_compare(a.device, b.device)) return c < 0;
    return canonical_less(a, b);
  });
  std::string out = html::page_start("fraglab report: " + source);
  out += fmt::format("<h1>fraglab report: sweep {}</h1>\n<p class=\"meta\">{} runs", escape(source), rows.size());
  if (table.meta) out += fmt::format("; grid <code>{}</code>", escape(grid_command(*table.meta)));
  out += "</p>\n";
  if (rows.empty()) out += "<p class=\"na\">the results file holds no runs</p>\n";
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i;
    while (j < rows.size() && rows[j].trace == rows[i].trace && rows[j].device == rows[i].device) ++j;
    out +=
        group_section({rows.begin() + static_cast<std::ptrdiff_t>(i), rows.begin() + static_cast<std::ptrdiff_t>(j)});
    i = j;
  }
  return out + html::page_end();
}

}  // namespace fraglab
