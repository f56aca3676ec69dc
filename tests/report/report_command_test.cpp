// `fraglab report` end to end: bad input, the size bound on a 1M-event trace, a sweep results
// file, and the page loaded in a real browser (Debian's chromium, headless; skipped with a
// message where it is not installed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "browser.hpp"
#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

const std::string kSample = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/two-phase.jsonl";

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::size_t lines(const std::string& text) { return count(text, "\n"); }

// The text from the first `start` (included) up to the next character of `stop`; "" if absent.
std::string span_from(const std::string& text, const std::string& start, const std::string& stop) {
  const std::size_t at = text.find(start);
  if (at == std::string::npos) return "";
  const std::size_t end = text.find_first_of(stop, at + start.size());
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(ReportCommand, AMissingTraceIsOneLineNamingIt) {
  const fs::path dir = scratch_dir("report");
  const CommandResult r = run_fraglab("report " + (dir / "nope.jsonl").string() + " -o " + (dir / "x.html").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find((dir / "nope.jsonl").string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.html"));  // no page, no file
  // An earlier report is not clobbered by a run that fails.
  write_text(dir / "earlier.html", "earlier");
  EXPECT_EQ(run_fraglab("report " + (dir / "nope.csv").string() + " -o " + (dir / "earlier.html").string()).status, 2);
  EXPECT_EQ(read_text(dir / "earlier.html"), "earlier");
}

TEST(ReportCommand, AnUnwritableOutputIsOneLineNamingIt) {
  const CommandResult r = run_fraglab("report " + kSample + " -p pytorch -o /nonexistent-dir/report.html");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent-dir/report.html: cannot open for writing (-o)"), std::string::npos) << r.err;
}

TEST(ReportCommand, ABadPolicySpecIsOneLine) {
  const fs::path dir = scratch_dir("report");
  const CommandResult r = run_fraglab("report " + kSample + " -p nosuchpolicy -o " + (dir / "bad.html").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("nosuchpolicy"), std::string::npos) << r.err;
}

// 2,500 steps of 400 events: a step mark, a forward phase of 198 allocations (64 KiB .. 6.1 MiB),
// a backward phase freeing them in an interleaved order, an (empty) optimizer phase.
void write_million_event_trace(const fs::path& path) {
  std::string text = "{\"fraglab_trace\":1,\"name\":\"million\",\"source\":\"report_command_test\"}\n";
  std::uint64_t id = 0;
  for (int step = 0; step < 2500; ++step) {
    text += "{\"op\":\"mark\",\"label\":\"step\",\"value\":" + std::to_string(step) + "}\n";
    text += "{\"op\":\"mark\",\"label\":\"phase\",\"value\":\"forward\"}\n";
    const std::uint64_t first = id + 1;
    for (int i = 0; i < 198; ++i) {
      const std::uint64_t size = static_cast<std::uint64_t>((step * 31 + i * 17) % 97 + 1) * 65536;
      text += "{\"op\":\"alloc\",\"id\":" + std::to_string(++id) + ",\"size\":" + std::to_string(size) + "}\n";
    }
    text += "{\"op\":\"mark\",\"label\":\"phase\",\"value\":\"backward\"}\n";
    for (int i = 0; i < 198; ++i) {  // 37 and 198 are coprime: every allocation once
      const std::uint64_t victim = first + static_cast<std::uint64_t>(i * 37 % 198);
      text += "{\"op\":\"free\",\"id\":" + std::to_string(victim) + "}\n";
    }
    text += "{\"op\":\"mark\",\"label\":\"phase\",\"value\":\"optimizer\"}\n";
  }
  write_text(path, text);
}

TEST(ReportCommand, AMillionEventTraceGivesAFileUnderFiveMegabytes) {
  const fs::path dir = scratch_dir("report");
  write_million_event_trace(dir / "million.jsonl");
  const fs::path page = dir / "million.html";
  const CommandResult r = run_fraglab("report " + (dir / "million.jsonl").string() +
                                      " -p pytorch -p pytorch:expandable_segments:True -o " + page.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LT(fs::file_size(page), 5u * 1000 * 1000);
  const std::string html = read_text(page);
  EXPECT_EQ(count(html, "<g class=\"series\" data-policy="), 2u);
  EXPECT_NE(html.find("1000000 events"), std::string::npos);
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (tools/install-deps.sh installs it)";
  // Opens in under 2 s: a copy of the page with a script that writes, once the page has loaded,
  // when its load event began (ms since navigation started) into the DOM.
  std::string timed = html;
  timed.insert(timed.rfind("</body>"),
               "<script>window.addEventListener('load', () => { const p = document.createElement('p'); p.id = "
               "'load-ms'; p.textContent = performance.getEntriesByType('navigation')[0].loadEventStart.toFixed(0); "
               "document.body.appendChild(p); });</script>");
  write_text(dir / "million-timed.html", timed);
  const BrowserLoad load = load_in_chromium(dir / "million-timed.html", dir / "million-browser");
  EXPECT_EQ(load.status, 0);
  EXPECT_TRUE(load.console.empty()) << load.console.front();
  const std::string prefix = "<p id=\"load-ms\">";
  const std::string shown = span_from(load.dom, prefix, "<");
  ASSERT_GT(shown.size(), prefix.size()) << load.dom.size();
  const std::string ms = shown.substr(prefix.size());
  EXPECT_LT(std::stoi(ms), 2000);
  std::cout << "[ info ] " << fs::file_size(page) << " bytes, loaded in " << ms << " ms\n";
}

TEST(ReportCommand, ASweepResultsFileShowsTheFrontAndTheRecommendedLine) {
  const fs::path dir = scratch_dir("report");
  const fs::path results = dir / "sweep.csv";
  const CommandResult sweep = run_fraglab("sweep " + kSample +
                                          " -p pytorch --grid expandable_segments=False,True "
                                          "--grid max_split_size_mb=none,20 -o " +
                                          results.string() + " --overwrite");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  // sweep's own summary names the best setting's line.
  const std::string line = span_from(sweep.out, "PYTORCH_CUDA_ALLOC_CONF=", "\n ");
  ASSERT_FALSE(line.empty()) << sweep.out;
  const fs::path page = dir / "sweep.html";
  const CommandResult r = run_fraglab("report " + results.string() + " -o " + page.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_text(page);
  EXPECT_NE(html.find("recommended: <code>" + line + "</code>"), std::string::npos) << line;
  // Four settings, each drawn once: on the front (filled) or not.
  EXPECT_EQ(count(html, "<circle class=\"front\"") + count(html, "<circle class=\"setting\"") +
                count(html, "<path class=\"oom\""),
            4u);
  EXPECT_GE(count(html, "<circle class=\"front\""), 1u);
  // The same sweep written as JSONL is told from a JSONL trace by its first line.
  ASSERT_EQ(run_fraglab("sweep " + kSample +
                        " -p pytorch --grid expandable_segments=False,True --grid max_split_size_mb=none,20 -o " +
                        (dir / "sweep.jsonl").string() + " --overwrite")
                .status,
            0);
  ASSERT_EQ(
      run_fraglab("report " + (dir / "sweep.jsonl").string() + " -o " + (dir / "sweep-jsonl.html").string()).status, 0);
  EXPECT_NE(read_text(dir / "sweep-jsonl.html").find("recommended: <code>" + line + "</code>"), std::string::npos);
}

// A sweep file written here, its figures chosen by hand: the page's front is sweep's Pareto front
// of peak reserved against device_time_s (not device calls).
//   none: 300 MiB, 0.000100 s, 15 calls  on the front (least device time)
//   64:   260 MiB, 0.000400 s, 40 calls  on the front (lower peak, more device time)
//   128:  320 MiB, 0.000200 s,  2 calls  off: none beats it on both (fewest calls, but calls do not count)
//   256:  250 MiB, 0.000050 s,  3 calls  off: it ran out of memory (a red cross)
TEST(ReportCommand, ASweepFilesFrontIsPeakReservedAgainstDeviceTime) {
  const fs::path dir = scratch_dir("report");
  const fs::path results = dir / "hand.csv";
  write_text(results,
             "trace,device,spec,max_split_size_mb,peak_reserved_bytes,peak_allocated_bytes,peak_requested_bytes,"
             "fragmentation_at_peak,peak_utilization,num_alloc_retries,num_ooms,num_device_alloc,num_device_free,"
             "device_time_s,stall_time_s\n"
             "t,sim,pytorch,none,314572800,1,1,0.5,0.5,0,0,10,5,0.0001,0.00005\n"
             "t,sim,pytorch:max_split_size_mb:64,64,272629760,1,1,0.5,0.5,0,0,30,10,0.0004,0.00001\n"
             "t,sim,pytorch:max_split_size_mb:128,128,335544320,1,1,0.5,0.5,0,0,1,1,0.0002,0.0001\n"
             "t,sim,pytorch:max_split_size_mb:256,256,262144000,1,1,0.5,0.5,0,1,2,1,0.00005,0\n");
  const fs::path page = dir / "hand.html";
  const CommandResult r = run_fraglab("report " + results.string() + " -o " + page.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_text(page);
  EXPECT_EQ(count(html, "<circle class=\"front\""), 2u);
  EXPECT_EQ(count(html, "<circle class=\"setting\""), 1u);
  EXPECT_EQ(count(html, "<path class=\"oom\""), 1u);
  EXPECT_NE(html.find(">device time (s, estimated)</text>"), std::string::npos);
  EXPECT_EQ(html.find("device calls (allocs + frees)"), std::string::npos);
  // The front's table, by peak reserved: peak, device time, stall time, device calls, retries.
  const std::string row64 =
      "<tr><td class=\"num\">260.00 MiB</td><td class=\"num\">0.000400</td><td class=\"num\">0.000010</td>"
      "<td class=\"num\">40</td><td class=\"num\">0</td><td><code>pytorch:max_split_size_mb:64</code></td>"
      "<td><code>PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64</code></td></tr>";
  const std::string row_none =
      "<tr><td class=\"num\">300.00 MiB</td><td class=\"num\">0.000100</td><td class=\"num\">0.000050</td>"
      "<td class=\"num\">15</td><td class=\"num\">0</td><td><code>pytorch</code></td>"
      "<td><code>PYTORCH_CUDA_ALLOC_CONF=</code></td></tr>";
  const std::size_t at64 = html.find(row64), at_none = html.find(row_none);
  ASSERT_NE(at64, std::string::npos) << html;
  ASSERT_NE(at_none, std::string::npos) << html;
  EXPECT_LT(at64, at_none);
  EXPECT_EQ(html.find("<td><code>pytorch:max_split_size_mb:128</code>"), std::string::npos);
  EXPECT_EQ(html.find("<td><code>pytorch:max_split_size_mb:256</code>"), std::string::npos);
  EXPECT_NE(html.find("2 on the Pareto front of peak reserved vs estimated device time"), std::string::npos);
  // The best setting (lowest peak without an OOM) with both of its times.
  EXPECT_NE(html.find("<code>pytorch:max_split_size_mb:64</code>, peak reserved 260.00 MiB (272629760 bytes), "
                      "device time 0.000400 s, stall time 0.000010 s"),
            std::string::npos);
}

// The peak each run's --json reports, by policy spec.
std::map<std::string, std::uint64_t> json_peaks(const std::string& args) {
  const CommandResult r = run_fraglab("replay " + args + " --json -");
  EXPECT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::uint64_t> peaks;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  for (const auto& run : json.at("runs")) {
    peaks[run.at("policy").get<std::string>()] = run.at("peak_reserved_bytes").get<std::uint64_t>();
  }
  return peaks;
}

TEST(ReportCommand, ARealSnapshotShowsThePeaksOfReplayJson) {
  // A snapshot cut off mid-run: the report replays from the recorded start state as replay does.
  const std::string trace = std::string(FRAGLAB_REAL_TRACES) + "/gpt2medium-ctx128-train-cutoff.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(trace);
  const fs::path dir = scratch_dir("report");
  const std::string args = trace + " -p pytorch -p pytorch:expandable_segments:True";
  const CommandResult r = run_fraglab("report " + args + " -o " + (dir / "real.html").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_text(dir / "real.html");
  for (const auto& [spec, peak] : json_peaks(args)) {
    const std::size_t at = html.find("data-policy=\"" + spec + "\">\n<h2>");
    ASSERT_NE(at, std::string::npos) << spec;
    EXPECT_NE(html.substr(at, 2000).find("<span class=\"peak-value\">" + std::to_string(peak) + "</span>"),
              std::string::npos)
        << spec;
  }
  // pytorch reports its segments: each run has a segment map, its first rect at the top left.
  EXPECT_NE(html.find("<rect x=\"1.0\" y=\"1.0\""), std::string::npos);
  EXPECT_EQ(count(html, "<svg class=\"segment-map\""), 2u);
}

// HTML text as the page escapes it.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// The anatomy at the peak the page shows is replay --json's anatomy_at_peak (computed there by its
// own observer), and the largest live allocation at the peak shows the top frame that
// `inspect --top-at-peak` names for it (frames are kept by default in a report).
TEST(ReportCommand, ShowsTheAnatomyOfReplayJsonAndTheFramesOfInspect) {
  const std::string trace = std::string(FRAGLAB_REAL_TRACES) + "/tiny-segments.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(trace);
  const fs::path dir = scratch_dir("report");
  const CommandResult r = run_fraglab("report " + trace + " -p pytorch -o " + (dir / "frames.html").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_text(dir / "frames.html");

  const CommandResult replay = run_fraglab("replay " + trace + " -p pytorch --json -");
  ASSERT_EQ(replay.status, 0) << replay.err;
  const nlohmann::json anatomy = nlohmann::json::parse(replay.out).at("runs").at(0).at("anatomy_at_peak");
  for (const std::string part :
       {"rounding", "cached_free_usable", "stream_bound", "oversize_locked", "small_pool", "other"}) {
    const std::string row = "<tr><td>" + part + "</td><td class=\"num\">" +
                            std::to_string(anatomy.at(part + "_bytes").get<std::int64_t>()) + " (";
    EXPECT_NE(html.find(row), std::string::npos) << row;
  }

  const CommandResult inspect = run_fraglab("inspect " + trace + " --top-at-peak 1 -p pytorch --json -");
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  const nlohmann::json largest = nlohmann::json::parse(inspect.out).at("top_at_peak").at("allocations").at(0);
  ASSERT_TRUE(largest.at("top_frame").is_object()) << largest.dump();
  const nlohmann::json& frame = largest.at("top_frame");
  const std::string top_frame = frame.at("filename").get<std::string>() + ":" +
                                std::to_string(frame.at("line").get<std::int64_t>()) + ":" +
                                frame.at("name").get<std::string>();
  // Its row in the page's table of live allocations (alloc id first), and the frames shown in it.
  const std::size_t row =
      html.find("<tr><td class=\"num\">" + std::to_string(largest.at("id").get<std::uint64_t>()) + "</td>",
                html.find("<table class=\"allocations\">"));
  ASSERT_NE(row, std::string::npos) << largest.dump();
  const std::string row_text = html.substr(row, html.find("</tr>", row) - row);
  EXPECT_NE(row_text.find("<div class=\"frames\">" + escaped(top_frame) + "\n"), std::string::npos) << top_frame << "\n"
                                                                                                    << row_text;
}

TEST(ReportCommand, MarksEveryRetryAndOutOfMemoryThatReplayJsonCounts) {
  // On 260 MiB the sample (334 MiB at its peak under pytorch) needs cache flushes and still runs
  // out: each at its own event of the 86, so one marker each.
  const fs::path dir = scratch_dir("report");
  const std::string args = kSample + " -p pytorch --device sim:260MiB";
  const CommandResult r = run_fraglab("report " + args + " -o " + (dir / "tight.html").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read_text(dir / "tight.html");
  const CommandResult replay = run_fraglab("replay " + args + " --json -");
  ASSERT_EQ(replay.status, 0) << replay.err;
  const nlohmann::json run = nlohmann::json::parse(replay.out).at("runs").at(0);
  ASSERT_GT(run.at("num_alloc_retries").get<std::size_t>(), 0u);
  ASSERT_GT(run.at("num_ooms").get<std::size_t>(), 0u);
  EXPECT_EQ(count(html, "<path class=\"retry\""), run.at("num_alloc_retries").get<std::size_t>());
  EXPECT_EQ(count(html, "<path class=\"oom\""), run.at("num_ooms").get<std::size_t>());
}

TEST(ReportInBrowser, ChromiumLoadsTheReportWithoutConsoleErrors) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (tools/install-deps.sh installs it)";
  const fs::path dir = scratch_dir("report");
  // The detection itself: a page with a console.error and an uncaught exception is caught.
  write_text(dir / "broken.html",
             "<!DOCTYPE html><html><body><p>broken</p><script>console.error('deliberate');"
             "noSuchFunction();</script></body></html>");
  const BrowserLoad broken = load_in_chromium(dir / "broken.html", dir / "broken");
  ASSERT_EQ(broken.status, 0);
  ASSERT_EQ(broken.console.size(), 2u);
  EXPECT_NE(broken.console[0].find("deliberate"), std::string::npos);
  EXPECT_NE(broken.console[1].find("Uncaught ReferenceError"), std::string::npos);
  ASSERT_TRUE(fs::exists(broken.screenshot));

  const std::string args = kSample + " -p pytorch -p pytorch:expandable_segments:True -p bestfit";
  const fs::path page = dir / "report.html";
  const CommandResult r = run_fraglab("report " + args + " -o " + page.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const BrowserLoad load = load_in_chromium(page, dir / "report");
  ASSERT_EQ(load.status, 0);
  EXPECT_TRUE(load.console.empty()) << load.console.front();
  const std::map<std::string, std::uint64_t> peaks = json_peaks(args);
  ASSERT_EQ(peaks.size(), 3u);
  EXPECT_EQ(count(load.dom, "<g class=\"series\" data-policy="), 3u);
  for (const auto& [spec, peak] : peaks) {
    EXPECT_EQ(count(load.dom, "<g class=\"series\" data-policy=\"" + spec + "\">"), 1u) << spec;
    // The section of the policy, and the peak it shows.
    const std::size_t at = load.dom.find("data-policy=\"" + spec + "\">\n<h2>");
    ASSERT_NE(at, std::string::npos) << spec;

    const std::string rest = load.dom.substr(at, 2000);
    EXPECT_EQ(span_from(rest, "<span class=\"peak-value\">", "<"), "<span class=\"peak-value\">" + std::to_string(peak))
        << spec;
  }
  // Not blank: a page of charts compresses far worse than one line of text on white.
  ASSERT_TRUE(fs::exists(load.screenshot));
  EXPECT_GT(fs::file_size(load.screenshot), 4 * fs::file_size(broken.screenshot));
}

}  // namespace
}  // namespace fraglab::testing
