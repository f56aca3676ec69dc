// fraglab inspect TRACE: what a trace asks of an allocator, independent of any policy. With
// --initial-state, the block sizes the snapshot does not record are shown as the pytorch policy
// reads them from the trace (policies/pytorch/start_evidence.hpp): an interval, or one size.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <iostream>
#include <map>
#include <set>

#include "cli/common.hpp"
#include "cli/device_choice.hpp"
#include "fraglab/frames.hpp"
#include "fraglab/peak_allocations.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/top_at_peak_report.hpp"

namespace fraglab::cli {
namespace {

// Unrecorded start-state block sizes as the pytorch policy, under the trace's own settings,
// reads them from the trace; empty when those settings are not the pytorch policy's to parse.
std::map<AllocId, StartBlock> start_blocks(const Trace& trace) {
  std::map<AllocId, StartBlock> out;
  SimDevice device;
  std::unique_ptr<Policy> policy;
  try {
    policy = create_policy("pytorch:" + trace.allocator_conf, device);
  } catch (const InputError&) {
    return out;
  }
  policy->prepare(trace);
  for (StartBlock& b : policy->start_blocks()) out.emplace(b.id, std::move(b));
  return out;
}

nlohmann::json inspect_json(const Trace& trace, const TraceSummary& s, const std::map<AllocId, StartBlock>& blocks) {
  std::map<std::string, std::uint64_t> ops;
  std::map<StreamId, std::uint64_t> streams;
  std::array<std::uint64_t, 64> histogram{};  // allocs by floor(log2(size))
  for (const Event& e : trace.events) {
    ++ops[std::string(op_name(e.op))];
    if (e.op == Op::Alloc) {
      ++streams[e.stream];
      ++histogram[std::bit_width(e.size) - 1];
    }
  }
  nlohmann::json j;
  j["name"] = trace.name;
  j["source"] = trace.source;
  j["events"] = s.events;
  if (trace.source_entries != 0) j["source_entries"] = trace.source_entries;
  j["allocs"] = s.allocs;
  j["frees"] = s.frees;
  j["observed_events"] = s.observed_events;
  j["ops"] = ops;
  nlohmann::json stream_list = nlohmann::json::array();
  for (const auto& [stream, count] : streams) stream_list.push_back({{"stream", stream}, {"allocs", count}});
  j["streams"] = stream_list;
  j["peak_requested_bytes"] = s.peak_requested;
  j["total_requested_bytes"] = s.total_requested;
  j["max_request_bytes"] = s.max_request;
  nlohmann::json hist = nlohmann::json::array();
  for (size_t b = 0; b < histogram.size(); ++b) {
    if (histogram[b] == 0) continue;
    hist.push_back({{"min_bytes", Bytes{1} << b}, {"max_bytes", (Bytes{1} << b) * 2 - 1}, {"allocs", histogram[b]}});
  }
  j["size_histogram"] = hist;
  if (trace.allocator_conf_known) j["allocator_conf"] = trace.allocator_conf;
  Bytes live_requested = 0;
  for (const InitialAllocation& a : trace.initial.allocations) live_requested += a.requested;
  nlohmann::json segments = nlohmann::json::array();
  for (const InitialSegment& seg : trace.initial.segments) {
    segments.push_back({{"addr", seg.addr},
                        {"size", seg.size},
                        {"stream", seg.stream},
                        {"pool", seg.small_pool ? "small" : "large"},
                        {"expandable", seg.expandable}});
  }
  nlohmann::json allocations = nlohmann::json::array();
  for (const InitialAllocation& a : trace.initial.allocations) {
    nlohmann::json entry = {{"id", a.id},          {"addr", a.addr},
                            {"size", a.requested}, {"block_size", a.block_size},
                            {"stream", a.stream},  {"free_requested", a.free_requested}};
    if (auto it = blocks.find(a.id); a.block_size == 0 && it != blocks.end()) {
      const StartBlock& b = it->second;
      entry["block_interval"] = {{"min_size", b.min_size},       {"max_size", b.max_size}, {"assumed", b.chosen},
                                 {"determined", b.determined()}, {"evidence", b.evidence}, {"error", b.error}};
    }
    allocations.push_back(std::move(entry));
  }
  j["initial_state"] = {{"segments", trace.initial.segments.size()},
                        {"reserved_bytes", trace.initial.reserved_bytes()},
                        {"live_allocations", trace.initial.allocations.size()},
                        {"live_requested_bytes", live_requested},
                        {"segment_list", segments},
                        {"allocation_list", allocations}};
  return j;
}

// --top-at-peak: the live allocations at the program's own peak of requested bytes, or with
// -p at the event after which that policy's reserved bytes peaked (README "Stack frames").
TopAtPeak top_at_peak(const Trace& trace, std::size_t count, const std::string& spec,
                      const std::optional<std::string>& device_option, const std::string& start_option) {
  TopAtPeak top;
  top.count = count;
  if (spec.empty()) {
    top.basis = "requested";
    top.live = live_after(trace, peak_requested_event(trace));
    return top;
  }
  const DeviceChoice device = choose_device(device_option, trace);
  warn_capacity_options(device, {spec});
  ReplayOptions replay;
  replay.start_state = choose_start_state(start_option, trace, {spec});
  replay.detailed_stats = false;  // only the peak is read
  const ReplayResult r = run_replay(trace, spec, device.device, replay);
  top.basis = "reserved";
  top.policy = spec;
  top.peak_reserved = r.metrics.peak_reserved;
  top.live = live_after(trace, r.metrics.peak_reserved_event);
  return top;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  po::options_description options("options");
  std::string trace_path, json_path;
  int device_index = -1;
  std::int64_t frames = 0, top_count = 0, frames_shown = 0;
  std::string spec, device_spec, start_option;
  options.add_options()("trace", po::value(&trace_path)->required(),
                        "trace file: fraglab JSONL (.gz ok) or a PyTorch snapshot pickle")(
      "device-index", po::value(&device_index), "snapshot device to read (multi-GPU snapshots)")(
      "json", po::value(&json_path), "write the description as JSON to FILE (- for stdout)")(
      "initial-state", "list every segment and live allocation of the initial state")(
      "top-at-peak", po::value(&top_count),
      "list the N largest allocations live at the peak of requested bytes (with -p: at the policy's peak "
      "reserved), with their stack frames")("policy,p", po::value(&spec),
                                            "with --top-at-peak: the policy whose peak reserved to use")(
      "device", po::value(&device_spec), "with -p: device: sim[:CAPACITY][,external:BYTES] (default 80GiB)")(
      "start-state", po::value(&start_option)->default_value("auto"), kStartStateHelp)(
      "frames", po::value(&frames), "stack frames to keep per allocation (default 64 with --top-at-peak, else 0)")(
      "show-frames", po::value(&frames_shown)->default_value(6),
      "with --top-at-peak: frames shown per allocation in the text (PyTorch's own frames skipped)");
  po::positional_options_description positional;
  positional.add("trace", 1);
  po::variables_map vm;
  if (!parse_command_line(argc, argv,
                          "usage: fraglab inspect TRACE [--json FILE|-] [--initial-state] [--top-at-peak N [-p SPEC]]",
                          options, positional, vm)) {
    return 0;
  }
  const bool top = vm.count("top-at-peak") > 0;
  if (top && top_count < 1)
    throw InputError(fmt::format("--top-at-peak {}: expected a number of allocations of at least 1", top_count));
  if (!top && (vm.count("policy") || vm.count("device")))
    throw InputError("-p and --device: expected --top-at-peak with them (inspect replays only for it)");
  if (frames_shown < 0) throw InputError(fmt::format("--show-frames {}: expected 0 or more", frames_shown));
  const std::optional<std::string> device_option = vm.count("device") ? std::optional(device_spec) : std::nullopt;
  if (!spec.empty()) check_policy_spec(spec, choose_device(device_option).device);  // before the read
  check_start_state_option(start_option);
  const TraceReadOptions read_options{.device_index = device_index,
                                      .frames = frames_option(vm, frames, top ? kDefaultFramesKept : 0)};
  const Trace trace = load_trace(trace_path, read_options);
  const TraceSummary s = summarize(trace);
  const std::map<AllocId, StartBlock> blocks =
      vm.count("initial-state") ? start_blocks(trace) : std::map<AllocId, StartBlock>{};
  nlohmann::json j = inspect_json(trace, s, blocks);
  const FrameFilter filter;
  std::optional<TopAtPeak> top_list;
  if (top) {
    top_list = top_at_peak(trace, static_cast<std::size_t>(top_count), spec, device_option, start_option);
    j["top_at_peak"] = top_at_peak_json(trace, *top_list, filter);
  }
  if (!json_path.empty()) write_output(json_path, j.dump(2) + "\n");
  if (json_path == "-") return 0;

  std::cout << fmt::format("trace        {} ({})\n", trace.name, trace.source);
  std::cout << fmt::format("events       {}", s.events);
  if (trace.source_entries != 0) std::cout << fmt::format(" (from {} recorded entries)", trace.source_entries);
  std::cout << fmt::format("\nallocs       {}\nfrees        {}\nobserved     {} (segment actions, ooms)\n", s.allocs,
                           s.frees, s.observed_events);
  std::cout << "ops         ";
  for (const auto& [op, count] : j["ops"].items()) std::cout << ' ' << op << '=' << count.get<std::uint64_t>();
  std::cout << fmt::format("\nstreams      {}\n", s.streams);
  for (const auto& st : j["streams"]) {
    std::cout << fmt::format("  stream {:<20} {} allocs\n", st["stream"].get<StreamId>(),
                             st["allocs"].get<std::uint64_t>());
  }
  std::cout << fmt::format("peak requested {} ({} bytes)\nlargest request {}\n", format_bytes(s.peak_requested),
                           s.peak_requested, format_bytes(s.max_request));
  if (trace.allocator_conf_known) {
    std::cout << fmt::format("recorded PYTORCH_CUDA_ALLOC_CONF: '{}'\n", trace.allocator_conf);
  }
  std::cout << "size histogram (allocs by size):\n";
  for (const auto& h : j["size_histogram"]) {
    std::cout << fmt::format("  {:>12} .. {:>12}  {}\n", format_bytes(h["min_bytes"].get<Bytes>()),
                             format_bytes(h["max_bytes"].get<Bytes>()), h["allocs"].get<std::uint64_t>());
  }
  const auto& init = j["initial_state"];
  std::cout << fmt::format("initial state: {} segments, {} reserved ({} bytes), {} live allocations ({} requested)\n",
                           init["segments"].get<std::uint64_t>(), format_bytes(init["reserved_bytes"].get<Bytes>()),
                           init["reserved_bytes"].get<Bytes>(), init["live_allocations"].get<std::uint64_t>(),
                           format_bytes(init["live_requested_bytes"].get<Bytes>()));
  if (vm.count("initial-state")) {
    for (const InitialSegment& seg : trace.initial.segments) {
      std::cout << fmt::format("  segment 0x{:x} {:>12} stream {} {}{}\n", seg.addr, seg.size, seg.stream,
                               seg.small_pool ? "small" : "large", seg.expandable ? " expandable" : "");
    }
    for (const InitialAllocation& a : trace.initial.allocations) {
      std::string block = fmt::format("{}", a.block_size);
      if (auto it = blocks.find(a.id); a.block_size == 0 && it != blocks.end()) {
        const StartBlock& b = it->second;
        block = b.determined()
                    ? fmt::format("{} (not recorded", b.chosen)
                    : fmt::format("{}..{} (not recorded, undetermined: {} assumed", b.min_size, b.max_size, b.chosen);
        if (!b.evidence.empty()) block += "; " + b.evidence;
        block += ")";
        if (!b.error.empty()) block += " error: " + b.error;
      }
      std::cout << fmt::format("  alloc id {} at 0x{:x} requested {} block {}{}\n", a.id, a.addr, a.requested, block,
                               a.free_requested ? " (free requested)" : "");
    }
  }
  if (top_list) std::cout << top_at_peak_text(trace, *top_list, filter, static_cast<std::size_t>(frames_shown));
  return 0;
}

}  // namespace fraglab::cli
