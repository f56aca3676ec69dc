// The sweep metadata a results file starts with (include/fraglab/sweep.hpp, SweepMeta): which
// shard of which grid, on which device, over which traces. Its line is written in one fixed
// key order so that a finished sweep and the merge of its shards stay byte-identical.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fraglab/sweep.hpp"
#include "results_lines.hpp"

namespace fraglab {

std::string shard_text(const Shard& shard) { return fmt::format("{}/{}", shard.index, shard.count); }

std::string grid_axis_text(const GridAxis& axis) {
  std::string out = axis.key + '=';
  for (size_t i = 0; i < axis.values.size(); ++i) {
    if (i > 0) out += ',';
    out += axis.values[i] ? *axis.values[i] : "none";
  }
  return out;
}

namespace {

// The knob keys of a grid's axis texts ("KEY=V1,V2"), in grid order: the columns of its rows.
std::vector<std::string> keys_of_axes(const std::vector<std::string>& axes) {
  std::vector<std::string> keys;
  keys.reserve(axes.size());
  for (const std::string& axis : axes) keys.push_back(axis.substr(0, axis.find('=')));
  return keys;
}
std::vector<std::string> knob_keys_of(const SweepMeta& meta) { return keys_of_axes(meta.grid); }
std::vector<std::string> knob_keys_of_grid(const nlohmann::json& j) {
  std::vector<std::string> axes;
  for (const auto& axis : j["grid"]) axes.push_back(axis.get<std::string>());
  return keys_of_axes(axes);
}

}  // namespace

SweepMeta sweep_meta(const SweepGrid& grid, const std::string& device, const std::vector<TraceIdentity>& traces,
                     const Shard& shard, const std::string& start_state,
                     std::map<std::string, SweepTraceContext> contexts) {
  SweepMeta meta;
  meta.start_state = start_state;
  meta.contexts = std::move(contexts);
  meta.shard = shard;
  meta.policy = grid.base_spec;
  for (const GridAxis& axis : grid.axes) meta.grid.push_back(grid_axis_text(axis));
  meta.device = device;
  meta.traces = traces;
  return meta;
}

SweepGrid meta_grid(const SweepMeta& meta) {
  SweepGrid grid;
  grid.base_spec = meta.policy;
  for (const std::string& axis : meta.grid) grid.axes.push_back(parse_grid_axis(axis));
  return grid;
}

std::string grid_command(const SweepMeta& meta) {
  std::string out = "-p " + meta.policy;
  for (const std::string& axis : meta.grid) out += " --grid " + axis;
  return out;
}

std::string meta_line(const SweepMeta& meta) {
  nlohmann::ordered_json j;
  j["fraglab_sweep"] = 1;
  j["shard"] = shard_text(meta.shard);
  j["policy"] = meta.policy;
  j["grid"] = meta.grid;
  j["device"] = meta.device;
  nlohmann::ordered_json traces = nlohmann::ordered_json::array();
  for (const TraceIdentity& t : meta.traces) {
    nlohmann::ordered_json tj;
    tj["name"] = t.name;
    tj["events"] = t.events;
    tj["request_hash"] = t.request_hash;
    traces.push_back(std::move(tj));
  }
  j["traces"] = std::move(traces);
  j["start_state"] = meta.start_state;
  if (!meta.cost_model_digest.empty())
    j["cost_model"] = nlohmann::ordered_json{{"source", meta.cost_model}, {"digest", meta.cost_model_digest}};
  // The recorded settings of recorded traces, and their run when not a grid point (as a row).
  nlohmann::ordered_json contexts = nlohmann::ordered_json::array();
  const std::vector<std::string> keys = knob_keys_of(meta);
  for (const auto& [name, c] : meta.contexts) {
    nlohmann::ordered_json cj;
    cj["trace"] = name;
    cj["start_state"] = c.start_state;
    cj["recorded_settings"] = c.recorded_spec;
    if (c.recorded_run) {
      std::string line = format_row(*c.recorded_run, keys, ResultsFormat::Jsonl);
      line.pop_back();  // its '\n'
      cj["recorded_run"] = nlohmann::ordered_json::parse(line);
    }
    contexts.push_back(std::move(cj));
  }
  if (!contexts.empty()) j["contexts"] = std::move(contexts);
  return j.dump();
}

SweepMeta parse_meta_line(std::string_view json_text, const LineOrigin& at) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  const auto bad = [&](std::string_view what) {
    return InputError(fmt::format("{}: sweep metadata: {} (expected {})", at, what,
                                  R"({"fraglab_sweep":1,"shard":"I/N","policy":S,"grid":[S...],"device":S,)"
                                  R"("traces":[{"name":S,"events":N,"request_hash":S}...]})"));
  };
  if (j.is_discarded() || !j.is_object()) throw bad("not a JSON object");
  if (!j.contains("fraglab_sweep") || j["fraglab_sweep"] != 1) throw bad("unknown version (this fraglab reads 1)");
  auto text = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) throw bad(fmt::format("'{}' must be a string", key));
    return j[key].get<std::string>();
  };
  SweepMeta meta;
  try {
    meta.shard = parse_shard(text("shard"));
  } catch (const InputError& e) {
    throw bad(e.what());
  }
  meta.policy = text("policy");
  meta.device = text("device");
  meta.start_state = j.contains("start_state") ? text("start_state") : "recorded";
  if (!j.contains("grid") || !j["grid"].is_array()) throw bad("'grid' must be a list of KEY=V1,V2 strings");
  for (const auto& axis : j["grid"]) {
    if (!axis.is_string()) throw bad("'grid' must be a list of KEY=V1,V2 strings");
    try {
      parse_grid_axis(axis.get<std::string>());
    } catch (const InputError& e) {
      throw bad(e.what());
    }
    meta.grid.push_back(axis.get<std::string>());
  }
  if (!j.contains("traces") || !j["traces"].is_array()) throw bad("'traces' must be a list");
  for (const auto& t : j["traces"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("events") ||
        !t["events"].is_number_unsigned() || !t.contains("request_hash") || !t["request_hash"].is_string()) {
      throw bad("each trace must be {\"name\":S,\"events\":N,\"request_hash\":S}");
    }
    meta.traces.push_back(
        {t["name"].get<std::string>(), t["events"].get<std::uint64_t>(), t["request_hash"].get<std::string>()});
  }
  if (j.contains("cost_model")) {
    const auto& c = j["cost_model"];
    if (!c.is_object() || !c.contains("source") || !c["source"].is_string() || !c.contains("digest") ||
        !c["digest"].is_string() || c["digest"].get<std::string>().empty()) {
      throw bad("'cost_model' must be {\"source\":S,\"digest\":S}");
    }
    meta.cost_model = c["source"].get<std::string>();
    meta.cost_model_digest = c["digest"].get<std::string>();
  }
  if (j.contains("contexts")) {
    if (!j["contexts"].is_array()) throw bad("'contexts' must be a list");
    std::vector<std::string> keys = knob_keys_of_grid(j);
    for (const auto& c : j["contexts"]) {
      if (!c.is_object() || !c.contains("trace") || !c["trace"].is_string() || !c.contains("start_state") ||
          !c["start_state"].is_string() || !c.contains("recorded_settings") || !c["recorded_settings"].is_string()) {
        throw bad(
            "each context must be {\"trace\":S,\"start_state\":S,\"recorded_settings\":S[,\"recorded_run\":ROW]}");
      }
      SweepTraceContext context;
      context.start_state = c["start_state"].get<std::string>();
      context.recorded_spec = c["recorded_settings"].get<std::string>();
      if (c.contains("recorded_run")) context.recorded_run = parse_jsonl_row(c["recorded_run"].dump(), keys, true, at);
      meta.contexts[c["trace"].get<std::string>()] = std::move(context);
    }
  }
  return meta;
}

void check_cost_model(const std::string& path, const SweepMeta& meta, const std::string& other_name,
                      const SweepMeta& other) {
  if (meta.cost_model_digest.empty()) {
    throw InputError(
        fmt::format("{}: written by an older fraglab that did not record the cost model of its device_time_s: "
                    "re-run the sweep into a new file (or with --overwrite)",
                    path));
  }
  if (meta.cost_model_digest != other.cost_model_digest) {
    throw InputError(fmt::format(
        "{}: its device_time_s was computed under another cost model ({}, {}) than {}'s ({}, {}): results of "
        "different cost models do not mix; use the same --cost-model, or write to a new file",
        path, meta.cost_model, meta.cost_model_digest, other_name, other.cost_model, other.cost_model_digest));
  }
}

}  // namespace fraglab
