// The HTML page of `fraglab report SWEEP_RESULTS`: per trace and device, every setting's peak
// reserved against its device calls, the front of the two, and the recommended
// PYTORCH_CUDA_ALLOC_CONF line (the best setting of sweep's own summary, src/report/sweep_report.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "fraglab/html_report.hpp"
#include "fraglab/sweep_report.hpp"
#include "html_page.hpp"

namespace fraglab {
namespace {

using html::coord;
using html::escape;

constexpr double kWidth = 900, kHeight = 420, kLeft = 84, kRight = 20, kTop = 16, kBottom = 40;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

std::string point_title(const SweepRow& r) {
  return fmt::format("{}\npeak reserved {} ({} bytes)\ndevice calls {}\nretries {}, OOMs {}", r.spec,
                     format_bytes(r.metrics.peak_reserved), r.metrics.peak_reserved, r.device_calls(),
                     r.metrics.num_alloc_retries, r.metrics.num_ooms);
}

std::string scatter(const std::vector<SweepRow>& rows, const std::vector<SweepRow>& front) {
  Bytes top = 1;
  std::uint64_t calls = 1;
  for (const SweepRow& r : rows) {
    top = std::max(top, r.metrics.peak_reserved);
    calls = std::max(calls, r.device_calls());
  }
  top += top / 20;
  calls += calls / 20 + 1;
  auto x = [&](std::uint64_t c) { return kLeft + static_cast<double>(c) / static_cast<double>(calls) * kPlotWidth; };
  auto y = [&](Bytes b) {
    return kTop + kPlotHeight - static_cast<double>(b) / static_cast<double>(top) * kPlotHeight;
  };
  std::string out = fmt::format(R"(<svg class="pareto" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth,
                                kHeight, kWidth, kHeight);
  out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#adb5bd"/>)", kLeft, kTop,
                     kPlotWidth, kPlotHeight);
  const std::uint64_t ystep = html::byte_tick_step(top, 4), xstep = html::count_tick_step(calls, 6);
  for (Bytes v = 0; v <= top; v += ystep) {
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", kLeft - 6, coord(y(v) + 4),
                       escape(format_bytes(v)));
  }
  for (std::uint64_t c = 0; c <= calls; c += xstep) {
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", coord(x(c)), kHeight - kBottom + 16, c);
  }
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">device calls (allocs + frees)</text>)",
                     kLeft + kPlotWidth / 2, kHeight - 6);
  out += fmt::format(
      R"svg(<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">peak reserved</text>)svg",
      kTop + kPlotHeight / 2, kTop + kPlotHeight / 2);
  // The front as a staircase: fewer calls buy more memory.
  std::vector<const SweepRow*> stairs;
  for (const SweepRow& r : front) stairs.push_back(&r);
  std::sort(stairs.begin(), stairs.end(),
            [](const SweepRow* a, const SweepRow* b) { return a->device_calls() < b->device_calls(); });
  if (!stairs.empty()) {
    std::string points;
    for (std::size_t i = 0; i < stairs.size(); ++i) {
      if (i > 0)
        points +=
            fmt::format("{},{} ", coord(x(stairs[i]->device_calls())), coord(y(stairs[i - 1]->metrics.peak_reserved)));
      points += fmt::format("{},{} ", coord(x(stairs[i]->device_calls())), coord(y(stairs[i]->metrics.peak_reserved)));
    }
    points.pop_back();
    out += fmt::format(R"(<polyline class="front-line" points="{}" fill="none" stroke="#1c7ed6" stroke-width="1.5"/>)",
                       points);
  }
  for (const SweepRow& r : rows) {
    const bool on_front =
        std::any_of(front.begin(), front.end(), [&](const SweepRow& f) { return row_key(f) == row_key(r); });
    const double cx = x(r.device_calls()), cy = y(r.metrics.peak_reserved);
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
  const std::vector<SweepRow> front = reserved_calls_front(rows);
  const std::vector<SweepRow> ranked = rank_rows(rows);
  out += fmt::format(
      "<p class=\"meta\">{} settings; {} on the front of peak reserved vs device calls (filled); "
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
        "<code>{}</code>, peak reserved {} ({} bytes)</p>\n",
        escape(best.spec), escape(format_bytes(best.metrics.peak_reserved)), best.metrics.peak_reserved);
    if (line) {
      out += fmt::format("<p class=\"alloc-conf\">recommended: <code>{}</code>{}</p>\n", escape(*line),
                         line->back() == '=' ? " (PyTorch's defaults: leave it unset)" : "");
    }
  }
  out +=
      "<table class=\"front\"><tr><th class=\"num\">peak reserved</th><th class=\"num\">device calls</th><th "
      "class=\"num\">retries</th><th>setting</th><th>PYTORCH_CUDA_ALLOC_CONF</th></tr>\n";
  for (const SweepRow& r : front) {
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td>{}"
        "</td></tr>\n",
        escape(format_bytes(r.metrics.peak_reserved)), r.device_calls(), r.metrics.num_alloc_retries, escape(r.spec),
        alloc_conf_line(r.spec) ? "<code>" + escape(*alloc_conf_line(r.spec)) + "</code>" : "");
  }
  return out + "</table>\n</section>\n";
}

}  // namespace

std::vector<SweepRow> reserved_calls_front(const std::vector<SweepRow>& rows) {
  std::vector<SweepRow> front;
  for (const SweepRow& r : rows) {
    if (r.metrics.num_ooms > 0) continue;
    const bool beaten = std::any_of(rows.begin(), rows.end(), [&](const SweepRow& o) {
      return o.metrics.num_ooms == 0 && o.metrics.peak_reserved <= r.metrics.peak_reserved &&
             o.device_calls() <= r.device_calls() &&
             (o.metrics.peak_reserved < r.metrics.peak_reserved || o.device_calls() < r.device_calls());
    });
    if (!beaten) front.push_back(r);
  }
  std::sort(front.begin(), front.end(), [](const SweepRow& a, const SweepRow& b) {
    if (a.metrics.peak_reserved != b.metrics.peak_reserved) return a.metrics.peak_reserved < b.metrics.peak_reserved;
    if (a.device_calls() != b.device_calls()) return a.device_calls() < b.device_calls();
    return canonical_less(a, b);
  });
  return front;
}

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
