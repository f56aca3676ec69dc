// `fraglab report`: the data a self-contained HTML report shows (gathered from replays by
// src/report/report_data.cpp) and the renderers that turn it into one HTML file
// (src/report/html_report.cpp, html_sweep.cpp). The page is inline SVG and CSS with no script and
// nothing fetched, so it reads offline; hover text is SVG <title>. Same input, same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fraglab/device_spec.hpp"
#include "fraglab/replay.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/trace.hpp"

namespace fraglab {

// ---- the downsampled series -------------------------------------------------------------------

// Requested / allocated / reserved after each event, kept as a min/max envelope per bucket of
// consecutive events, so a 1M-event run draws a few thousand points and every peak (a bucket's
// max) is exact.
struct EnvelopeBucket {
  std::uint64_t first_event = 0;  // events first_event .. first_event + bucket_events - 1
  Bytes min[3] = {0, 0, 0};       // requested, allocated, reserved
  Bytes max[3] = {0, 0, 0};
};

class EnvelopeSeries {
 public:
  // `events`: how many events will be added; at most `max_buckets` buckets are made.
  EnvelopeSeries(std::uint64_t events, std::size_t max_buckets);
  // Events must come in order 0, 1, 2, ...
  void add(std::uint64_t event, Bytes requested, Bytes allocated, Bytes reserved);
  std::uint64_t bucket_events() const { return bucket_events_; }
  const std::vector<EnvelopeBucket>& buckets() const { return buckets_; }

 private:
  std::uint64_t bucket_events_ = 1;
  std::vector<EnvelopeBucket> buckets_;
};

// ---- one policy's run -------------------------------------------------------------------------

struct ReportMark {
  std::uint64_t event = 0;
  std::string label;  // "step", "phase"
  std::string value;  // unquoted
};

// A live allocation at the peak.
struct PeakAllocation {
  AllocId id = 0;
  Addr addr = 0;
  Bytes size = 0;       // block size (allocated bytes)
  Bytes requested = 0;  // what the program asked for
  StreamId stream = 0;
  std::string tag;
  bool free_requested = false;  // freed by the program, awaiting its other streams
  // The program's stack frames, innermost first, when the trace keeps them (--frames); nullopt:
  // the trace or this build has none, and the page says "not available".
  std::optional<std::vector<std::string>> frames;
};

// The fragmentation anatomy (README "Fragmentation anatomy"): parts that sum to reserved -
// requested, at the peak and at sampled events; nullopt renders as "not available".
struct AnatomyPart {
  std::string name;        // rounding, cached_free_usable, stream_bound, oversize_locked, small_pool, other
  std::int64_t bytes = 0;  // signed: `other` can be negative (fraglab/anatomy.hpp)
};
struct AnatomyPoint {
  std::uint64_t event = 0;
  std::vector<AnatomyPart> parts;
};
struct AnatomyView {
  std::vector<AnatomyPoint> over_time;  // sampled at evenly spaced events, in event order
  std::vector<AnatomyPart> at_peak;
};

struct PolicyReport {
  ReplayResult result;     // the metrics; result.policy is the spec
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF line for a pytorch spec, else empty
  EnvelopeSeries series{0, 1};
  std::vector<ReportMark> marks;                 // step and phase marks, in event order
  std::vector<std::uint64_t> retries;            // events during which num_alloc_retries grew
  std::vector<SegmentView> peak_segments;        // the policy's segments after the peak event
  std::vector<PeakAllocation> peak_allocations;  // live after the peak event, by address
  std::optional<AnatomyView> anatomy;
};

struct TraceReport {
  std::string trace_name;
  std::string trace_source;
  TraceSummary summary;
  std::string device;       // as the user sees it: "sim:80GiB", "sim (80.00 GiB, assumed)"
  std::string start_state;  // "recorded" / "cold"
  std::vector<PolicyReport> policies;
};

// Replays `trace` under `spec` twice (the replay is deterministic): once for the metrics, series,
// marks, retries and the anatomy (sampled over time, and at the peak), once to capture the
// segments and live allocations after the peak event (with their frames when the trace kept
// them: Trace::has_frames).
// Throws InputError on a bad spec.
PolicyReport gather_policy_report(const Trace& trace, const std::string& spec, const DeviceSpec& device,
                                  const ReplayOptions& options, std::size_t max_buckets = 1000);

// ---- rendering --------------------------------------------------------------------------------

std::string html_report(const TraceReport& report);
// A sweep results file: per trace, peak reserved vs estimated device time (device_time_s) for every
// setting, the Pareto front of the two (pareto_front, fraglab/sweep.hpp: the front `sweep` prints)
// with device and stall time, and the recommended PYTORCH_CUDA_ALLOC_CONF line. `source` names the file.
std::string html_sweep_report(const ResultsTable& table, const std::string& source);

}  // namespace fraglab
