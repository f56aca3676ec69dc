// fraglab validate SNAPSHOT [--device-index N] [--json FILE|-]: replay a recorded run under its own
// allocator settings and compare with the record. Exit 0 exact, 1 divergent, 2 bad input.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <limits>

#include "cli/common.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/validate.hpp"
#include "fraglab/validate_report.hpp"

namespace fraglab::cli {

int cmd_validate(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, json_path, capacity, available, version;
  int device_index = -1;
  ValidateOptions vo;
  options.add_options()("trace", po::value(&trace_path)->required(),
                        "a PyTorch snapshot pickle (or a JSONL trace with observed events)")(
      "device-index", po::value(&device_index), "snapshot device to validate (multi-GPU snapshots)")(
      "json", po::value(&json_path), "write the report as JSON to FILE (- for stdout)")(
      "policy,p", po::value(&vo.policy_spec), "policy spec (default: pytorch with the snapshot's allocator settings)")(
      "pytorch-version", po::value(&version), "PyTorch release whose behaviour to emulate, e.g. 2.1 (default newest)")(
      "capacity", po::value(&capacity), "the GPU's total memory, e.g. 80GiB (memory fraction, GC limit)")(
      "available", po::value(&available),
      "memory the allocator could obtain (default: the recorded peak reserved, or reserved + device_free at an oom)")(
      "context", po::value(&vo.context_events)->default_value(4), "events shown around the first divergence");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: fraglab validate SNAPSHOT.pickle [--device-index N] [--json FILE|-]\n"
      "Replays the snapshot's requests through the pytorch policy under the snapshot's own allocator\n"
      "settings, from the rebuilt start state, and compares every segment action, alloc address and\n"
      "reserved byte count with the record. Exit 0 when exact, 1 when not, 2 on bad input.";
  if (!parse_command_line(argc, argv, usage, options, positional, vm)) return 0;
  if (!capacity.empty()) vo.capacity = parse_byte_size(capacity, "--capacity");
  if (!available.empty()) vo.available = parse_byte_size(available, "--available");
  if (!version.empty()) vo.extra_options = "version:" + version;
  // -1 (the default) means every device; any other negative index names none.
  if (vm.count("device-index") != 0 && device_index < 0)
    throw InputError(fmt::format("--device-index {}: expected a CUDA device index from 0 to {}", device_index,
                                 std::numeric_limits<int>::max()));

  // Without --device-index every GPU of a multi-GPU snapshot is validated, each on its own.
  std::vector<std::pair<int, Trace>> traces;
  if (device_index >= 0) {
    const TraceReadOptions read_options{.device_index = device_index};
    traces.emplace_back(device_index, read_trace(trace_path, read_options));
  } else {
    traces = read_trace_devices(trace_path);
  }
  std::vector<ValidationReport> reports;
  for (auto& [device, trace] : traces) {
    vo.progress = terminal_progress(trace.name + " (inferring empty_cache calls)");
    infer_unrecorded_events(trace, vo);  // as every command does, under this command's assumptions
    vo.progress = terminal_progress(trace.name);
    reports.push_back(validate_replay(trace, vo));
  }

  nlohmann::json j;
  if (reports.size() == 1) {
    j = validation_json(reports.front());
  } else {
    // The stable keys hold the totals (peaks: the largest device's), with one report per device.
    std::vector<nlohmann::json> per_device;
    per_device.reserve(reports.size());
    for (const ValidationReport& r : reports) per_device.push_back(validation_json(r));
    j = per_device.front();
    for (const char* key : {"segment_events_recorded", "segment_events_simulated", "segment_events_matched",
                            "allocs_recorded", "alloc_addresses_matched", "reserved_checks", "reserved_matched",
                            "ooms_recorded", "ooms_simulated", "retries_simulated", "empty_cache_inferred"}) {
      std::uint64_t total = 0;
      for (const nlohmann::json& d : per_device) total += d[key].get<std::uint64_t>();
      j[key] = total;
    }
    Bytes peak_recorded = 0, peak_simulated = 0;
    bool exact = true;
    j["first_divergence"] = nullptr;
    j["devices"] = nlohmann::json::array();
    for (size_t i = 0; i < reports.size(); ++i) {
      peak_recorded = std::max(peak_recorded, reports[i].peak_reserved_recorded);
      peak_simulated = std::max(peak_simulated, reports[i].peak_reserved_simulated);
      nlohmann::json device = std::move(per_device[i]);
      device["device"] = traces[i].first;
      if (!reports[i].exact && exact) {
        j["first_divergence"] = device["first_divergence"];
        j["first_divergence"]["device"] = traces[i].first;
      }
      exact = exact && reports[i].exact;
      j["devices"].push_back(std::move(device));
    }
    j["exact"] = exact;
    j["peak_reserved_recorded"] = peak_recorded;
    j["peak_reserved_simulated"] = peak_simulated;
  }
  if (!json_path.empty()) write_output(json_path, j.dump(2) + "\n");
  if (json_path != "-") {
    for (size_t i = 0; i < reports.size(); ++i) {
      std::cout << traces[i].second.name;
      if (traces.size() > 1) std::cout << " (device " << traces[i].first << ")";
      std::cout << ": " << validation_text(reports[i]);
    }
  }
  return j["exact"].get<bool>() ? 0 : 1;
}

}  // namespace fraglab::cli
