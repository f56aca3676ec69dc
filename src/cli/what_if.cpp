// The what-if rule every command follows (README "What-if answers on a snapshot"): a snapshot records one
// run under one allocator setting, so its recorded start state is faithful only for that
// setting. Any other setting or policy starts cold, every row of one table starts the same way,
// and the recorded settings are a row of their own.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/validate.hpp"

namespace fraglab::cli {

std::optional<std::string> recorded_spec(const Trace& trace) {
  if (!trace.allocator_conf_known && trace.source != "pytorch-snapshot") return std::nullopt;
  // A snapshot without allocator_settings (older PyTorch) ran with the defaults as far as anyone
  // can tell; validate assumes the same.
  return trace.allocator_conf.empty() ? std::string("pytorch") : "pytorch:" + trace.allocator_conf;
}

void check_start_state_option(const std::string& option) {
  if (option != "recorded" && option != "cold" && option != "auto") {
    throw InputError(fmt::format("--start-state '{}': expected recorded, cold or auto", option));
  }
}

namespace {

StartState start_state_for(const std::string& option, const Trace& trace, const std::vector<std::string>& specs) {
  if (option == "recorded") return StartState::Recorded;
  if (option == "cold") return StartState::Cold;
  if (trace.initial.empty()) return StartState::Recorded;  // nothing before the trace: both are the same
  const std::optional<std::string> recorded = recorded_spec(trace);
  const bool all_recorded =
      recorded && !specs.empty() &&
      std::all_of(specs.begin(), specs.end(), [&](const std::string& s) { return same_policy(s, *recorded); });
  return all_recorded ? StartState::Recorded : StartState::Cold;
}

}  // namespace

StartState choose_start_state(const std::string& option, const Trace& trace, const std::vector<std::string>& specs) {
  check_start_state_option(option);
  const StartState state = start_state_for(option, trace, specs);
  log::info(fmt::format("{}: start state {} (--start-state {})", trace.name, start_state_name(state), option));
  return state;
}

std::string start_state_header(const Trace& trace, StartState state) {
  if (trace.initial.empty()) return "";  // the trace starts from nothing: no start state to choose
  return fmt::format("; start state {} ({} allocations, {} reserved before the trace began)", start_state_name(state),
                     trace.initial.allocations.size(), format_bytes(trace.initial.reserved_bytes()));
}

void mark_recorded_settings(const Trace& trace, std::vector<ReplayResult>& runs) {
  const std::optional<std::string> recorded = recorded_spec(trace);
  if (!recorded) return;
  for (ReplayResult& r : runs) r.recorded_settings = same_policy(r.policy, *recorded);
}

void warn_about_start(const Trace& trace, const std::vector<ReplayResult>& runs) {
  // Only a trace that begins mid-run has memory reserved before it (a static arena that a policy
  // such as offline reserves up front is the policy's own doing).
  if (trace.initial.empty()) return;
  for (const ReplayResult& r : runs) {
    const Metrics& m = r.metrics;
    if (r.start_state != StartState::Recorded || m.reserved_at_start == 0 || m.peak_reserved == 0) continue;
    // Start-state bytes still held at the peak: at least the lowest reserved on the way there.
    const Bytes held = std::min(m.reserved_at_start, m.lowest_reserved_before_peak);
    const bool peak_at_start = m.peak_reserved_event < 0;
    if (!peak_at_start && 2 * held <= m.peak_reserved) continue;
    log::warn(fmt::format(
        "warning: {}: {} of its peak reserved {} was reserved before the trace of '{}' began{}: the recorded start "
        "state sets this result (--start-state cold compares from an empty device)",
        r.policy, format_bytes(held), format_bytes(m.peak_reserved), trace.name,
        peak_at_start ? " (the peak is reached at the start)" : " and held until the peak"));
  }
}

namespace {

struct TracePathRecord {
  std::mutex mutex;
  std::string path;
};

TracePathRecord& trace_path_record() {
  static TracePathRecord record;
  return record;
}

}  // namespace

void remember_trace_path(std::string path) {
  TracePathRecord& record = trace_path_record();
  const std::lock_guard lock(record.mutex);
  record.path = std::move(path);
}

std::string last_trace_path() {
  TracePathRecord& record = trace_path_record();
  const std::lock_guard lock(record.mutex);
  return record.path;
}

Trace load_trace(const std::string& path, const TraceReadOptions& options) {
  const std::string origin = path == kStdinPath ? std::string(kStdinOrigin) : path;
  remember_trace_path(origin);
  const auto start = std::chrono::steady_clock::now();
  TraceReadOptions reading = options;
  const bool main_thread = std::this_thread::get_id() == main_thread_id();  // see below
  if (main_thread) reading.progress = progress_callback("reading " + origin, "bytes");
  Trace trace = read_trace(path, reading);
  // Inferring replays the trace once: as long as a replay, so it shows progress too (not when a
  // sweep reads its traces on several threads: their lines would overwrite each other).
  ValidateOptions inference;
  if (main_thread) inference.progress = terminal_progress(trace.name + " (inferring empty_cache calls)");
  infer_unrecorded_events(trace, inference);
  log::info(fmt::format("read {}: trace {}, {} events in {:.2f} s", origin, trace.name, trace.events.size(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  return trace;
}

}  // namespace fraglab::cli
