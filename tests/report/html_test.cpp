// The HTML renderers on report data made by hand: what each section shows, the placeholders for
// the anatomy and the frames, and the front of peak reserved vs device time.
#include <gtest/gtest.h>

#include "fraglab/html_report.hpp"

namespace fraglab {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// A 4-event run: step 0 with a forward phase (events 0-1) and a backward phase (2-3), a retry
// at event 1, an OOM at event 2, reserved peaking at 1000 bytes after event 1. At the peak one
// segment of 1000 bytes at 0x1000 holds alloc 7 (600 bytes, asked 500, stream 3, tag act) and a
// free block of 400 bytes.
TraceReport hand_made_report() {
  PolicyReport p;
  p.result.policy = "pytorch:garbage_collection_threshold:0.5";
  p.result.metrics.peak_reserved = 1000;
  p.result.metrics.peak_reserved_event = 1;
  p.result.metrics.peak_allocated = 600;
  p.result.metrics.peak_requested = 500;
  p.result.ooms.push_back({2, 4096, 0, "CUDA out of memory <test>"});
  p.series = EnvelopeSeries(4, 1000);
  p.series.add(0, 500, 600, 1000);
  p.series.add(1, 500, 600, 1000);
  p.series.add(2, 0, 0, 1000);
  p.series.add(3, 0, 0, 0);
  p.marks = {{0, "step", "0"}, {0, "phase", "forward"}, {2, "phase", "backward"}};
  p.retries = {1};
  SegmentView segment;
  segment.addr = 0x1000;
  segment.size = 1000;
  segment.stream = 3;
  segment.pool = "large";
  segment.blocks = {{0x1000, 600, true}, {0x1000 + 600, 400, false}};
  p.peak_segments = {segment};
  PeakAllocation a;
  a.id = 7;
  a.addr = 0x1000;
  a.size = 600;
  a.requested = 500;
  a.stream = 3;
  a.tag = "act";
  p.peak_allocations = {a};
  TraceReport t;
  t.trace_name = "hand<made>";
  t.summary.events = 4;
  t.device = "sim:80GiB";
  t.start_state = "recorded";
  t.policies = {p};
  return t;
}

TEST(HtmlReport, ShowsEachSectionOfAPolicy) {
  const std::string html = html_report(hand_made_report());
  EXPECT_EQ(count(html, "<g class=\"series\" data-policy=\"pytorch:garbage_collection_threshold:0.5\">"), 1u);
  EXPECT_EQ(count(html, "data-peak-bytes=\"1000\""), 1u);
  EXPECT_NE(html.find("after event 1"), std::string::npos);
  EXPECT_EQ(count(html, "class=\"retry\""), 1u);
  EXPECT_EQ(count(html, "class=\"oom\""), 1u);
  EXPECT_NE(html.find("CUDA out of memory &lt;test&gt;"), std::string::npos);  // escaped
  EXPECT_NE(html.find("<title>fraglab report: hand&lt;made&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>phase forward: events 0-1</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>phase backward: events 2-3</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>step 0 at event 0</title>"), std::string::npos);
  // The segment map's hover texts.
  EXPECT_NE(
      html.find("<title>allocated alloc 7 at 0x1000: 600 B (600 bytes), requested 500 B, stream 3, tag act</title>"),
      std::string::npos);
  EXPECT_NE(html.find("hover for sizes, streams and frames <span class=\"na\">(frames: not kept by this trace)</span>"),
            std::string::npos);
  EXPECT_NE(html.find("free (cached) block at 0x1258: 400 B (400 bytes), stream 3"), std::string::npos);
  // The placeholders of the parts built elsewhere.
  EXPECT_NE(html.find("class=\"anatomy na\">not available"), std::string::npos);
  // Self-contained: nothing fetched, no script.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html, html_report(hand_made_report()));
}

TEST(HtmlReport, RendersTheAnatomyAndFramesWhenTheyArePresent) {
  TraceReport t = hand_made_report();
  PolicyReport& p = t.policies[0];
  p.peak_allocations[0].frames = std::vector<std::string>{"train.py:10 step", "model.py:42 forward"};
  p.anatomy = AnatomyView{{{0, {{"rounding", 100}, {"other", 0}}}, {3, {{"rounding", 300}, {"other", 100}}}},
                          {{"rounding", 300}, {"other", 100}}};
  const std::string html = html_report(t);
  EXPECT_EQ(html.find("class=\"anatomy na\""), std::string::npos);
  // 300 of 400 bytes is 75.0 %.
  EXPECT_NE(html.find("<tr><td>rounding</td><td class=\"num\">300 (300 B)</td><td class=\"num\">75.0%</td></tr>"),
            std::string::npos);
  EXPECT_NE(html.find("class=\"anatomy-chart\""), std::string::npos);
  EXPECT_NE(html.find("frames:\n  train.py:10 step\n  model.py:42 forward"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"frames\">train.py:10 step\nmodel.py:42 forward\n</div>"), std::string::npos);
}

// gemini's host-resident bytes are named under the table, not as a part; only when there are any.
TEST(HtmlReport, NamesHostResidentBytesUnderTheAnatomyWhenThereAreAny) {
  TraceReport t = hand_made_report();
  PolicyReport& p = t.policies[0];
  p.anatomy = AnatomyView{{}, {{"rounding", 300}, {"other", 0}}};
  Anatomy at_peak;
  p.result.anatomy_at_peak = at_peak;
  EXPECT_EQ(html_report(t).find("class=\"anatomy host\""), std::string::npos);
  p.result.anatomy_at_peak->host_resident = 4 * MiB;
  const std::string html = html_report(t);
  EXPECT_NE(html.find("<p class=\"anatomy host\">host-resident (held blocks whose data is in host memory, not a "
                      "part): 4194304 (4.00 MiB); the parts add up to reserved + host-resident &minus; requested</p>"),
            std::string::npos);
  EXPECT_EQ(html.find("<tr><td>host"), std::string::npos) << "not a row of the parts' table";
}

SweepRow row(const std::string& spec, Bytes peak, double device_s, std::uint64_t ooms = 0) {
  SweepRow r;
  r.trace = "t";
  r.device = "sim";
  r.spec = spec;
  r.metrics.peak_reserved = peak;
  r.metrics.device_time_s = device_s;
  r.metrics.num_ooms = ooms;
  return r;
}

TEST(HtmlSweepReport, DrawsTheFrontOfPeakReservedAgainstDeviceTime) {
  // b (80, 0.002) and a / e (100, 0.001, a tie) are on the front; c (90, 0.003) is beaten by b on
  // both; d has the lowest peak but ran out of memory.
  ResultsTable table;
  table.rows = {row("pytorch:a:1", 100, 0.001), row("pytorch:b:1", 80, 0.002), row("pytorch:c:1", 90, 0.003),
                row("pytorch:d:1", 70, 0.0005, 1), row("pytorch:e:1", 100, 0.001)};
  for (SweepRow& r : table.rows) r.knobs = {};
  const std::string html = html_sweep_report(table, "hand");
  EXPECT_EQ(count(html, "<circle class=\"front\""), 3u);
  EXPECT_EQ(count(html, "<circle class=\"setting\""), 1u);
  EXPECT_EQ(count(html, "<path class=\"oom\""), 1u);
  const std::size_t b = html.find("<code>pytorch:b:1</code></td>"), a = html.find("<code>pytorch:a:1</code></td>"),
                    e = html.find("<code>pytorch:e:1</code></td>");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_LT(b, a);
  EXPECT_LT(a, e);
  EXPECT_EQ(html.find("<code>pytorch:c:1</code></td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">0.002000</td>"), std::string::npos);
}

}  // namespace
}  // namespace fraglab
