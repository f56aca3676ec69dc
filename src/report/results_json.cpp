// The results JSON (README "Metrics"). The keys listed there are stable: add keys, never rename them.
#include "fraglab/report.hpp"

#include "fraglab/trace_identity.hpp"

namespace fraglab {

nlohmann::json run_json(const ReplayResult& run, const ReportOptions& options) {
  const Metrics& m = run.metrics;
  nlohmann::json j = {
      {"policy", run.policy},
      {"peak_reserved_bytes", m.peak_reserved},
      {"peak_allocated_bytes", m.peak_allocated},
      {"peak_requested_bytes", m.peak_requested},
      {"fragmentation_at_peak", m.fragmentation_at_peak},
      {"peak_utilization", m.peak_utilization},
      {"num_alloc_retries", m.num_alloc_retries},
      {"num_ooms", m.num_ooms},
      {"num_device_alloc", m.num_device_alloc},
      {"num_device_free", m.num_device_free},
      {"device_time_s", m.device_time_s},
      {"stall_time_s", m.stall_time_s},
      {"host_bytes_moved", m.host_bytes_moved},
      {"reserved_at_start_bytes", m.reserved_at_start},
      {"reserved_at_end_bytes", m.reserved_at_end},
      {"allocated_at_peak_reserved_bytes", m.allocated_at_peak_reserved},
      {"peak_reserved_event", m.peak_reserved_event},
      {"events_replayed", run.events_replayed},
      {"stopped_on_oom", run.stopped_on_oom},
      {"start_state", start_state_name(run.start_state)},
  };
  // Measured on a real GPU only (--device cuda): wall time inside the driver's calls.
  if (m.measured_device_time_s) j["measured_device_time_s"] = *m.measured_device_time_s;
  if (run.recorded_settings) j["recorded_settings"] = true;
  nlohmann::json ooms = nlohmann::json::array();
  for (const OomRecord& oom : run.ooms) {
    ooms.push_back({{"event", oom.event_index}, {"size", oom.size}, {"stream", oom.stream}, {"message", oom.message}});
  }
  j["ooms"] = std::move(ooms);
  if (!run.notes.empty()) j["notes"] = run.notes;
  if (run.anatomy_at_peak) {
    const Anatomy& a = *run.anatomy_at_peak;
    // README "Fragmentation anatomy": the *_bytes parts add up to reserved_bytes − requested_bytes.
    j["anatomy_at_peak"] = {
        {"event", a.event},
        {"reserved_bytes", a.reserved},
        {"requested_bytes", a.requested},
        {"rounding_bytes", a.rounding},
        {"cached_free_usable_bytes", a.cached_free_usable},
        {"stream_bound_bytes", a.stream_bound},
        {"oversize_locked_bytes", a.oversize_locked},
        {"small_pool_bytes", a.small_pool},
        {"other_bytes", a.other},
        // Not a part: held bytes whose data is in host memory (gemini moving chunks; else 0).
        {"host_resident_bytes", a.host_resident},
    };
  }
  if (run.invariant_violations) {
    j["invariant_violations"] = *run.invariant_violations;
    if (!run.invariant_messages.empty()) j["invariant_messages"] = run.invariant_messages;
  }
  if (options.include_stats) {
    nlohmann::json stats = nlohmann::json::object();
    for (const auto& [key, value] : run.detailed_stats) stats[key] = value;
    j["stats"] = std::move(stats);
  }
  if (options.include_timing) {
    j["replay_seconds"] = run.seconds;
    j["events_per_second"] = run.seconds > 0 ? static_cast<double>(run.events_replayed) / run.seconds : 0.0;
  }
  return j;
}

nlohmann::json device_json(const DeviceDescription& device) {
  nlohmann::json j = {{"kind", device.kind}, {"capacity_bytes", device.capacity}, {"external_bytes", device.external}};
  if (!device.capacity_source.empty()) j["capacity_source"] = device.capacity_source;
  return j;
}

nlohmann::json results_json(const Trace& trace, const TraceSummary& summary, const DeviceDescription& device,
                            const std::vector<ReplayResult>& runs, const ReportOptions& options) {
  return results_json(trace, summary, request_hash(trace), device, runs, options);
}

nlohmann::json results_json(const Trace& trace, const TraceSummary& summary, std::string_view request_hash,
                            const DeviceDescription& device, const std::vector<ReplayResult>& runs,
                            const ReportOptions& options) {
  nlohmann::json j;
  j["trace"] = {{"name", trace.name},
                {"source", trace.source},
                {"events", summary.events},
                {"allocs", summary.allocs},
                {"peak_requested_bytes", summary.peak_requested},
                // The trace's identity (with name and events), which `check` compares.
                {"request_hash", std::string(request_hash)}};
  j["device"] = device_json(device);
  // Every run of one command starts the same way; the top level says how (README "What-if answers on a snapshot").
  if (!runs.empty()) j["start_state"] = start_state_name(runs.front().start_state);
  j["runs"] = nlohmann::json::array();
  for (const ReplayResult& run : runs) j["runs"].push_back(run_json(run, options));
  return j;
}

}  // namespace fraglab
