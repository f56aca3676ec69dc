// The HTML page of `fraglab report TRACE`: per policy the memory chart (requested / allocated /
// reserved envelopes, step and phase bands, retries, OOMs, the peak), the fragmentation anatomy,
// the segment map and the largest live allocations at the peak, and the run's settings. Charts
// are inline SVG drawn here; their size is bounded by pixels, not by the trace's length.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "fraglab/html_report.hpp"
#include "fraglab/policy.hpp"
#include "html_page.hpp"

namespace fraglab {
namespace {

using html::coord;
using html::escape;

// The memory chart's frame (pixels).
constexpr double kWidth = 1100, kHeight = 300, kLeft = 74, kRight = 12, kTop = 22, kBottom = 28;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;
constexpr std::size_t kTopAllocations = 20;

const char* const kPhaseColours[] = {"#fff3bf", "#d3f9d8", "#e7f5ff", "#f3d9fa", "#ffe8cc", "#e6fcf5", "#f8f9fa"};

struct Scale {
  std::uint64_t events = 1;
  Bytes top = 1;
  double x(double event) const { return kLeft + event / static_cast<double>(events) * kPlotWidth; }
  double y(Bytes bytes) const {
    return kTop + kPlotHeight - static_cast<double>(bytes) / static_cast<double>(top) * kPlotHeight;
  }
};

std::string axes(const Scale& s) {
  std::string out = "<g class=\"axes\">";
  const Bytes step = html::byte_tick_step(s.top, 5);
  for (Bytes v = 0; v <= s.top; v += step) {
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#e9ecef"/>)", kLeft, kWidth - kRight,
                       coord(s.y(v)), coord(s.y(v)));
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", kLeft - 6, coord(s.y(v) + 4),
                       escape(format_bytes(v)));
  }
  const std::uint64_t xstep = html::count_tick_step(s.events, 8);
  for (std::uint64_t e = 0; e <= s.events; e += xstep) {
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", coord(s.x(static_cast<double>(e))),
                       kHeight - 8, e);
  }
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">event</text>)", kWidth - kRight, kHeight - 8);
  out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#adb5bd"/>)", kLeft, kTop,
                     kPlotWidth, kPlotHeight);
  return out + "</g>\n";
}

// Phase bands (a phase lasts until the next phase mark) and step lines, thinned to what the
// pixels can show, with the legend of the phases.
struct MarkLayers {
  std::string svg;
  std::string legend;
};
MarkLayers mark_layers(const PolicyReport& p, const Scale& s) {
  std::map<std::string, std::size_t> colour_of;  // phase name -> colour, in order of appearance
  std::vector<std::string> names;
  std::string bands = "<g class=\"bands\">";
  std::string steps = "<g class=\"steps\">";
  const ReportMark* phase = nullptr;
  auto close_phase = [&](std::uint64_t end) {
    if (phase == nullptr) return;
    const double x0 = s.x(static_cast<double>(phase->event)), x1 = s.x(static_cast<double>(end));
    if (x1 - x0 < 0.5) return;
    auto [it, added] = colour_of.emplace(phase->value, colour_of.size());
    if (added) names.push_back(phase->value);
    bands += fmt::format(
        R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>phase {}: events {}-{}</title></rect>)",
        coord(x0), kTop, coord(x1 - x0), kPlotHeight,
        kPhaseColours[std::min<std::size_t>(it->second, std::size(kPhaseColours) - 1)], escape(phase->value),
        phase->event, end - 1);
  };
  double last_step_x = -1e9, last_label_x = -1e9;
  for (const ReportMark& m : p.marks) {
    if (m.label == "phase") {
      close_phase(m.event);
      phase = &m;
      continue;
    }
    const double x = s.x(static_cast<double>(m.event));
    if (x - last_step_x < 8) continue;
    last_step_x = x;
    steps += fmt::format(
        R"(<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#868e96" stroke-dasharray="2,2"><title>step {3} at event {4}</title></line>)",
        coord(x), kTop, kTop + kPlotHeight, escape(m.value), m.event);
    if (x - last_label_x >= 60) {
      last_label_x = x;
      steps += fmt::format(R"(<text x="{}" y="{}">step {}</text>)", coord(x + 2), kTop - 6, escape(m.value));
    }
  }
  close_phase(s.events);
  std::string legend;
  for (const std::string& name : names) {
    legend +=
        fmt::format(R"(<span><i style="background:{}"></i>phase {}</span>)",
                    kPhaseColours[std::min<std::size_t>(colour_of[name], std::size(kPhaseColours) - 1)], escape(name));
  }
  return {bands + "</g>\n" + steps + "</g>\n", legend};
}

// One metric's envelope: a band from each bucket's min to its max, and a line along the max.
// Buckets of one event are drawn as steps (the value holds until the next event); wider ones as
// one point at their middle, which halves the page of a long trace.
std::string envelope(const EnvelopeSeries& series, const Scale& s, int k) {
  const auto& buckets = series.buckets();
  const bool steps = series.bucket_events() == 1;
  auto points = [&](const EnvelopeBucket& b, Bytes value, bool reverse) {
    const double x0 = s.x(static_cast<double>(b.first_event));
    const double x1 = s.x(static_cast<double>(b.first_event + series.bucket_events()));
    const std::string y = coord(s.y(value));
    if (!steps) return fmt::format("{},{} ", coord((x0 + x1) / 2), y);
    return reverse ? fmt::format("{},{} {},{} ", coord(x1), y, coord(x0), y)
                   : fmt::format("{},{} {},{} ", coord(x0), y, coord(x1), y);
  };
  std::string upper, lower;
  for (const EnvelopeBucket& b : buckets) upper += points(b, b.max[k], false);
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) lower += points(*it, it->min[k], true);
  if (!upper.empty()) upper.pop_back();
  if (!lower.empty()) lower.pop_back();
  return fmt::format(R"(<polygon class="band-{0}" points="{1} {2}" fill="{3}" fill-opacity="0.25"/>)"
                     R"(<polyline class="line-{0}" points="{1}" fill="none" stroke="{3}" stroke-width="1.5"/>)",
                     html::kSeriesName[k], upper, lower, html::kSeriesColour[k]);
}

// Retries (purple triangles) and OOMs (red crosses) along the top, one per pixel column.
std::string event_markers(const PolicyReport& p, const Scale& s) {
  std::string out = "<g class=\"markers\">";
  double last = -1e9;
  for (std::size_t i = 0; i < p.retries.size(); ++i) {
    const double x = s.x(static_cast<double>(p.retries[i]) + 0.5);
    if (x - last < 1) continue;
    last = x;
    out += fmt::format(
        R"(<path class="retry" d="M{} {}l4 -7h-8z" fill="#7048e8"><title>cache flushed and retried at event {}</title></path>)",
        coord(x), kTop + 9, p.retries[i]);
  }
  last = -1e9;
  for (const OomRecord& oom : p.result.ooms) {
    const double x = s.x(static_cast<double>(oom.event_index) + 0.5);
    if (x - last < 1) continue;
    last = x;
    out += fmt::format(
        R"(<path class="oom" d="M{0} {1}l8 8m0 -8l-8 8" stroke="#e03131" stroke-width="2"><title>out of memory at event {2}: {3} on stream {4}: {5}</title></path>)",
        coord(x - 4), kTop + 12, oom.event_index, escape(format_bytes(oom.size)), oom.stream, escape(oom.message));
  }
  return out + "</g>\n";
}

std::string memory_chart(const PolicyReport& p, std::uint64_t events) {
  const Metrics& m = p.result.metrics;
  Scale s;
  s.events = std::max<std::uint64_t>(events, 1);
  Bytes top = std::max({m.peak_reserved, m.peak_allocated, m.peak_requested, Bytes{1}});
  s.top = top + top / 20;
  const MarkLayers layers = mark_layers(p, s);

  std::string out = fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth,
                                kHeight, kWidth, kHeight);
  out += axes(s) + layers.svg;
  out += fmt::format("<g class=\"series\" data-policy=\"{}\">", escape(p.result.policy));
  for (int k = 2; k >= 0; --k) out += envelope(p.series, s, k);  // requested (the least) on top
  out += "</g>\n" + event_markers(p, s);
  // The peak: the device's own (it may be reached inside an event), at the first event after
  // which reserved stood at its highest.
  const double px = m.peak_reserved_event < 0 ? kLeft : s.x(static_cast<double>(m.peak_reserved_event) + 0.5);
  const double py = s.y(m.peak_reserved);
  out += fmt::format(
      R"(<g class="peak-marker"><circle cx="{}" cy="{}" r="5" fill="none" stroke="#c92a2a" stroke-width="2"/>)"
      R"(<text x="{}" y="{}" text-anchor="{}" fill="#c92a2a">peak {}</text></g>)",
      coord(px), coord(py), coord(px + (px > kWidth / 2 ? -8 : 8)), coord(py - 6), px > kWidth / 2 ? "end" : "start",
      escape(format_bytes(m.peak_reserved)));
  out += "</svg>\n<p class=\"legend\">";
  for (int k = 0; k < 3; ++k) {
    out += fmt::format(R"(<span><i style="background:{}"></i>{}</span>)", html::kSeriesColour[k], html::kSeriesName[k]);
  }
  out += R"(<span><i style="background:#7048e8"></i>retry</span><span><i style="background:#e03131"></i>OOM</span>)";
  out += layers.legend;
  if (p.marks.empty()) out += R"(<span class="na">no step or phase marks in this trace</span>)";
  out += "</p>\n";
  if (p.series.bucket_events() > 1) {
    out += fmt::format(
        "<p class=\"meta\">Each point spans {} events: the band runs from their least to their most, the line along "
        "the most, so every peak is drawn exactly.</p>\n",
        p.series.bucket_events());
  }
  return out;
}

// ---- the anatomy (issue 17 §1) ----------------------------------------------------------------

// A part as text: negative only for `other` after a cache flush (fraglab/anatomy.hpp).
std::string signed_bytes_text(std::int64_t bytes) {
  return bytes < 0 ? "-" + format_bytes(static_cast<Bytes>(-bytes)) : format_bytes(static_cast<Bytes>(bytes));
}
// What a part adds to the stacked chart: a negative `other` draws nothing there (the table shows it).
Bytes stacked_bytes(const AnatomyPart& part) { return part.bytes > 0 ? static_cast<Bytes>(part.bytes) : 0; }

std::string anatomy_section(const PolicyReport& p) {
  std::string out = "<h3>Fragmentation anatomy</h3>\n";
  if (!p.anatomy) {
    return out + "<p class=\"anatomy na\">not available for this run</p>\n";
  }
  const AnatomyView& a = *p.anatomy;
  std::int64_t total = 0;
  for (const AnatomyPart& part : a.at_peak) total += part.bytes;
  out +=
      "<table class=\"anatomy\"><tr><th>part (at the peak)</th><th class=\"num\">bytes</th><th class=\"num\">"
      "share</th></tr>\n";
  for (const AnatomyPart& part : a.at_peak) {
    out += fmt::format("<tr><td>{}</td><td class=\"num\">{} ({})</td><td class=\"num\">{:.1f}%</td></tr>\n",
                       escape(part.name), part.bytes, escape(signed_bytes_text(part.bytes)),
                       total == 0 ? 0.0 : 100.0 * static_cast<double>(part.bytes) / static_cast<double>(total));
  }
  out += "</table>\n";
  // Held blocks whose data the policy keeps on the host (gemini) are not a part of reserved: the
  // parts add up to reserved + host-resident - requested (fraglab/anatomy.hpp).
  if (p.result.anatomy_at_peak && p.result.anatomy_at_peak->host_resident > 0) {
    const Bytes host = p.result.anatomy_at_peak->host_resident;
    out += fmt::format(
        "<p class=\"anatomy host\">host-resident (held blocks whose data is in host memory, not a part): {} ({}); "
        "the parts add up to reserved + host-resident &minus; requested</p>\n",
        host, escape(format_bytes(host)));
  }
  if (a.over_time.empty()) return out;
  // Over time: the parts stacked, in the order of the first point.
  Scale s;
  s.events = std::max<std::uint64_t>(a.over_time.back().event + 1, 1);
  Bytes top = 1;
  for (const AnatomyPoint& point : a.over_time) {
    Bytes sum = 0;
    for (const AnatomyPart& part : point.parts) sum += stacked_bytes(part);
    top = std::max(top, sum);
  }
  s.top = top + top / 20;
  const char* const colours[] = {"#ffa94d", "#74c0fc", "#b197fc", "#ff8787", "#63e6be", "#ced4da"};
  out += fmt::format(R"(<svg class="anatomy-chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth,
                     kHeight, kWidth, kHeight);
  out += axes(s);
  const std::size_t parts = a.over_time.front().parts.size();
  std::vector<Bytes> below(a.over_time.size(), 0);
  std::string legend;
  for (std::size_t k = 0; k < parts; ++k) {
    std::string upper, lower;
    for (std::size_t i = 0; i < a.over_time.size(); ++i) {
      const AnatomyPoint& point = a.over_time[i];
      const Bytes bytes = k < point.parts.size() ? stacked_bytes(point.parts[k]) : 0;
      lower = fmt::format("{},{} ", coord(s.x(static_cast<double>(point.event))), coord(s.y(below[i]))) + lower;
      below[i] += bytes;
      upper += fmt::format("{},{} ", coord(s.x(static_cast<double>(point.event))), coord(s.y(below[i])));
    }
    const char* colour = colours[std::min<std::size_t>(k, std::size(colours) - 1)];
    out += fmt::format(R"(<polygon points="{}{}" fill="{}"><title>{}</title></polygon>)", upper, lower, colour,
                       escape(a.over_time.front().parts[k].name));
    legend += fmt::format(R"(<span><i style="background:{}"></i>{}</span>)", colour,
                          escape(a.over_time.front().parts[k].name));
  }
  return out + "</svg>\n<p class=\"legend\">" + legend + "</p>\n";
}

// ---- the segment map at the peak --------------------------------------------------------------

constexpr double kMapWidth = kWidth - 2, kMapRowHeight = 20, kMapRowGap = 6;
constexpr int kMapRows = 8;
// Blocks narrower than this are drawn together (one rect, the state holding most of their bytes).
constexpr double kMinBlockPixels = 4;

const PeakAllocation* live_at(const std::vector<PeakAllocation>& live, Addr addr) {
  auto it =
      std::lower_bound(live.begin(), live.end(), addr, [](const PeakAllocation& a, Addr x) { return a.addr < x; });
  return it != live.end() && it->addr == addr ? &*it : nullptr;
}

// The frames line of a block's hover text; none when the build keeps no frames (the legend says so).
std::string frames_text(const PeakAllocation& a) {
  if (!a.frames) return "";
  if (a.frames->empty()) return "\nframes: none recorded";
  std::string out = "\nframes:";
  for (const std::string& f : *a.frames) out += "\n  " + f;
  return out;
}

// Lays spans of a wrapped strip (rows of kMapWidth pixels) out as rects.
class Strip {
 public:
  std::string rects(double from, double to, const std::string& attributes, const std::string& title) const {
    std::string out;
    while (to - from > 1e-9) {
      const int row = static_cast<int>(from / kMapWidth);
      const double row_end = (row + 1) * kMapWidth;
      const double end = std::min(to, row_end);
      out +=
          fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" {}>{}</rect>)", coord(1 + from - row * kMapWidth),
                      coord(1 + row * (kMapRowHeight + kMapRowGap)), coord(std::max(end - from, 0.1)), kMapRowHeight,
                      attributes, title.empty() ? "" : "<title>" + escape(title) + "</title>");
      if (end >= row_end - 1e-9 && to > row_end) {
        from = row_end;
      } else {
        break;
      }
    }
    return out;
  }
};

std::string segment_map(const PolicyReport& p) {
  std::string out = "<h3>Segment map at the peak</h3>\n";
  const auto& segments = p.peak_segments;
  if (segments.empty()) {
    return out + "<p class=\"na\">not available: this policy does not report its segments</p>\n";
  }
  Bytes total = 0, free_bytes = 0;
  for (const SegmentView& seg : segments) total += seg.size;
  const double capacity = kMapWidth * kMapRows;
  const double gap = static_cast<double>(segments.size()) * 2 < capacity / 4 ? 2 : 0;
  const double px_per_byte = (capacity - gap * static_cast<double>(segments.size())) / static_cast<double>(total);
  const int rows_used = kMapRows;
  out += fmt::format(R"(<svg class="segment-map" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth,
                     rows_used * (kMapRowHeight + kMapRowGap), kWidth, rows_used * (kMapRowHeight + kMapRowGap));
  Strip strip;
  double x = 0;
  for (const SegmentView& seg : segments) {
    const double seg_start = x;
    const std::string seg_title =
        fmt::format("segment at 0x{:x}: {} ({} bytes), stream {}, {} pool{}", seg.addr, format_bytes(seg.size),
                    seg.size, seg.stream, seg.pool, seg.expandable ? ", expandable" : "");
    // The segment itself: free space shows through where no block covers it.
    out += strip.rects(seg_start, seg_start + static_cast<double>(seg.size) * px_per_byte,
                       R"(class="segment" fill="#e9ecef" stroke="#868e96" stroke-width="0.5")", seg_title);
    // Blocks, narrow neighbours drawn as one.
    Bytes run_bytes[3] = {0, 0, 0};  // allocated, pending free, free
    std::size_t run_blocks = 0;
    double run_start = 0;
    auto flush = [&](double end) {
      if (run_blocks == 0) return;
      const int state = static_cast<int>(std::max_element(run_bytes, run_bytes + 3) - run_bytes);
      const char* colours[3] = {"#1c7ed6", "#ae3ec9", "#dee2e6"};
      out +=
          strip.rects(run_start, end, fmt::format(R"(class="blocks" fill="{}")", colours[state]),
                      fmt::format("{} small blocks: {} allocated, {} pending free, {} free", run_blocks,
                                  format_bytes(run_bytes[0]), format_bytes(run_bytes[1]), format_bytes(run_bytes[2])));
      run_blocks = 0;
      run_bytes[0] = run_bytes[1] = run_bytes[2] = 0;
    };
    for (const SegmentView::Piece& piece : seg.blocks) {
      const double b0 = seg_start + static_cast<double>(piece.addr - seg.addr) * px_per_byte;
      const double b1 = b0 + static_cast<double>(piece.size) * px_per_byte;
      const PeakAllocation* a = piece.allocated ? live_at(p.peak_allocations, piece.addr) : nullptr;
      const int state = !piece.allocated ? 2 : (a != nullptr && a->free_requested ? 1 : 0);
      if (state == 2) free_bytes += piece.size;
      if (b1 - b0 < kMinBlockPixels) {
        if (run_blocks == 0) run_start = b0;
        run_bytes[state] += piece.size;
        ++run_blocks;
        if (b1 - run_start >= kMinBlockPixels) flush(b1);
        continue;
      }
      flush(b0);
      std::string title;
      if (state == 2) {
        title = fmt::format("free (cached) block at 0x{:x}: {} ({} bytes), stream {}", piece.addr,
                            format_bytes(piece.size), piece.size, seg.stream);
      } else if (a != nullptr) {
        title = fmt::format("{} alloc {} at 0x{:x}: {} ({} bytes), requested {}, stream {}{}{}",
                            state == 1 ? "pending-free" : "allocated", a->id, piece.addr, format_bytes(piece.size),
                            piece.size, format_bytes(a->requested), a->stream, a->tag.empty() ? "" : ", tag " + a->tag,
                            frames_text(*a));
      } else {
        title = fmt::format("allocated block at 0x{:x}: {} ({} bytes), stream {}", piece.addr, format_bytes(piece.size),
                            piece.size, seg.stream);
      }
      const char* fill = state == 0 ? "#1c7ed6" : state == 1 ? "#ae3ec9" : "#dee2e6";
      out +=
          strip.rects(b0, b1, fmt::format(R"(class="block" fill="{}" stroke="#fff" stroke-width="0.5")", fill), title);
    }
    if (run_blocks > 0) flush(seg_start + static_cast<double>(seg.size) * px_per_byte);
    x = seg_start + static_cast<double>(seg.size) * px_per_byte + gap;
  }
  out += "</svg>\n";
  out += fmt::format(
      "<p class=\"legend\"><span><i style=\"background:#1c7ed6\"></i>allocated</span><span><i "
      "style=\"background:#ae3ec9\"></i>freed, awaiting other streams</span><span><i "
      "style=\"background:#dee2e6\"></i>free (cached)</span>{} segments, {} reserved, {} free in blocks, by address; "
      "hover for sizes, streams and frames{}</p>\n",
      segments.size(), escape(format_bytes(total)), escape(format_bytes(free_bytes)),
      std::any_of(p.peak_allocations.begin(), p.peak_allocations.end(),
                  [](const PeakAllocation& a) { return a.frames.has_value(); })
          ? ""
          : " <span class=\"na\">(frames: not kept by this trace)</span>");
  return out;
}

// ---- the largest live allocations at the peak -------------------------------------------------

std::string top_allocations(const PolicyReport& p) {
  std::string out = "<h3>Largest live allocations at the peak</h3>\n";
  if (p.peak_allocations.empty()) return out + "<p class=\"na\">none live at the peak</p>\n";
  std::vector<const PeakAllocation*> order;
  for (const PeakAllocation& a : p.peak_allocations) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const PeakAllocation* a, const PeakAllocation* b) {
    return a->size != b->size ? a->size > b->size : a->addr < b->addr;
  });
  if (order.size() > kTopAllocations) order.resize(kTopAllocations);
  out += fmt::format(
      "<table class=\"allocations\"><tr><th class=\"num\">alloc id</th><th class=\"num\">block</th><th "
      "class=\"num\">requested</th><th class=\"num\">stream</th><th>tag</th><th>address</th><th>state</th>"
      "<th>frames</th></tr>\n");
  for (const PeakAllocation* a : order) {
    std::string frames = "<span class=\"na\">not available</span>";
    if (a->frames) {
      frames = "<div class=\"frames\">";
      for (const std::string& f : *a->frames) frames += escape(f) + "\n";
      frames += "</div>";
    }
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td>{}</td><td><code>0x{:x}</code></td><td>{}</td><td>{}</td></tr>\n",
        a->id, escape(format_bytes(a->size)), escape(format_bytes(a->requested)), a->stream, escape(a->tag), a->addr,
        a->free_requested ? "freed, awaiting other streams" : "allocated", frames);
  }
  out += fmt::format("</table>\n<p class=\"meta\">{} allocations live at the peak; the {} largest shown.</p>\n",
                     p.peak_allocations.size(), order.size());
  return out;
}

// ---- settings ---------------------------------------------------------------------------------

std::string settings(const PolicyReport& p, const TraceReport& t) {
  const ReplayResult& r = p.result;
  const Metrics& m = r.metrics;
  std::string out = "<h3>Settings and device</h3>\n<table class=\"settings\">\n";
  auto row = [&](std::string_view key, const std::string& value) {
    out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", key, value);
  };
  row("policy spec", "<code>" + escape(r.policy) + "</code>");
  if (!p.alloc_conf.empty()) {
    row("as PyTorch's setting", "<code>" + escape(p.alloc_conf) + "</code>" +
                                    (p.alloc_conf.back() == '=' ? " (PyTorch's defaults: leave it unset)" : ""));
  }
  row("device", escape(t.device));
  row("start state", escape(std::string(start_state_name(r.start_state))));
  row("events replayed", fmt::format("{}{}", r.events_replayed, r.stopped_on_oom ? " (stopped at the first OOM)" : ""));
  row("peak reserved", fmt::format("{} ({} bytes)", escape(format_bytes(m.peak_reserved)), m.peak_reserved));
  row("peak allocated", fmt::format("{} ({} bytes)", escape(format_bytes(m.peak_allocated)), m.peak_allocated));
  row("peak requested", fmt::format("{} ({} bytes)", escape(format_bytes(m.peak_requested)), m.peak_requested));
  row("fragmentation at peak", fmt::format("{:.4f}", m.fragmentation_at_peak));
  row("peak utilization", fmt::format("{:.4f}", m.peak_utilization));
  row("retries / OOMs", fmt::format("{} / {}", m.num_alloc_retries, m.num_ooms));
  row("device calls", fmt::format("{} allocs + {} frees", m.num_device_alloc, m.num_device_free));
  for (const std::string& note : r.notes) row("note", escape(note));
  return out + "</table>\n";
}

std::string policy_section(const PolicyReport& p, const TraceReport& t, std::size_t index) {
  const Metrics& m = p.result.metrics;
  std::string out = fmt::format("<section class=\"policy\" id=\"policy-{}\" data-policy=\"{}\">\n<h2>{}</h2>\n", index,
                                escape(p.result.policy), escape(p.result.policy));
  out += fmt::format(
      "<p class=\"peak\" data-peak-bytes=\"{}\">peak reserved: <span class=\"peak-value\">{}</span> bytes ({}) "
      "{}</p>\n",
      m.peak_reserved, m.peak_reserved, escape(format_bytes(m.peak_reserved)),
      m.peak_reserved_event < 0 ? std::string("before the first event")
                                : fmt::format("after event {}", m.peak_reserved_event));
  out += "<h3>Memory over the events</h3>\n" + memory_chart(p, t.summary.events);
  out += anatomy_section(p) + segment_map(p) + top_allocations(p) + settings(p, t);
  return out + "</section>\n";
}

}  // namespace

std::string html_report(const TraceReport& t) {
  std::string out = html::page_start("fraglab report: " + t.trace_name);
  out += fmt::format("<h1>fraglab report: {}</h1>\n", escape(t.trace_name));
  out += fmt::format(
      "<p class=\"meta\">trace <b>{}</b> ({}): {} events, {} allocations, {} streams, peak requested {}; device {}; "
      "start state {}</p>\n",
      escape(t.trace_name), escape(t.trace_source), t.summary.events, t.summary.allocs, t.summary.streams,
      escape(format_bytes(t.summary.peak_requested)), escape(t.device), escape(t.start_state));
  out +=
      "<table class=\"summary\"><tr><th>policy</th><th class=\"num\">peak reserved</th><th class=\"num\">peak "
      "allocated</th><th class=\"num\">fragmentation at peak</th><th class=\"num\">retries</th><th "
      "class=\"num\">OOMs</th><th class=\"num\">device calls</th></tr>\n";
  for (std::size_t i = 0; i < t.policies.size(); ++i) {
    const Metrics& m = t.policies[i].result.metrics;
    out += fmt::format(
        "<tr><td><a href=\"#policy-{}\">{}</a></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
        "class=\"num\">{:.4f}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
        i, escape(t.policies[i].result.policy), escape(format_bytes(m.peak_reserved)),
        escape(format_bytes(m.peak_allocated)), m.fragmentation_at_peak, m.num_alloc_retries, m.num_ooms,
        m.num_device_alloc + m.num_device_free);
  }
  out += "</table>\n";
  for (std::size_t i = 0; i < t.policies.size(); ++i) out += policy_section(t.policies[i], t, i);
  return out + html::page_end();
}

}  // namespace fraglab
