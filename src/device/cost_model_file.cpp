// read_cost_model: the `--cost-model FILE.json` format (README "Device time"), checked strictly:
// `fraglab calibrate` writes these files and a typo in a hand-written one must not pass silently.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fraglab/cost_model.hpp"

namespace fraglab {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, std::string_view key, std::string_view expected) {
  throw InputError(fmt::format("{}: key '{}': expected {}", path, key, expected));
}

std::string read_string(const json& value, const std::string& path, const std::string& key) {
  if (!value.is_string()) fail(path, key, "a string");
  return value.get<std::string>();
}

double read_microseconds(const json& value, const std::string& path, const std::string& key) {
  if (!value.is_number()) fail(path, key, "a non-negative finite number of microseconds");
  const double us = value.get<double>();
  if (!std::isfinite(us) || us < 0) fail(path, key, "a non-negative finite number of microseconds");
  return us;
}

CallCost read_call(const json& entry, const std::string& path, const std::string& key) {
  if (!entry.is_object()) fail(path, key, "an object with fixed_us and per_gib_us");
  CallCost cost;  // an omitted figure is 0
  for (const auto& [name, value] : entry.items()) {
    const std::string field = key + "." + name;
    if (name == "fixed_us") {
      cost.fixed_us = read_microseconds(value, path, field);
    } else if (name == "per_gib_us") {
      cost.per_gib_us = read_microseconds(value, path, field);
    } else if (name == "source") {
      read_string(value, path, field);
    } else if (name == "samples") {
      if (!value.is_number_integer()) fail(path, field, "an integer");
    } else {
      fail(path, field, "one of fixed_us, per_gib_us, source, samples");
    }
  }
  return cost;
}

}  // namespace

CostModel parse_cost_model(std::string_view text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers beyond a double
    throw InputError(fmt::format("{}: not a cost-model JSON file ({})", path, e.what()));
  }
  if (!doc.is_object()) fail(path, "fraglab_cost_model", "a JSON object with the key fraglab_cost_model");
  const auto version = doc.find("fraglab_cost_model");
  if (version == doc.end()) fail(path, "fraglab_cost_model", "the key (the format version, 1)");
  if (!version->is_number_integer() || version->get<std::int64_t>() != 1) fail(path, "fraglab_cost_model", "1");
  const auto calls = doc.find("calls");
  if (calls == doc.end()) fail(path, "calls", "an object of call costs");
  if (!calls->is_object()) fail(path, "calls", "an object of call costs");

  CostModel model = CostModel::defaults();
  for (const auto& [name, value] : doc.items()) {
    if (name == "gpu") {
      model.gpu = read_string(value, path, name);
    } else if (name == "driver") {
      model.driver = read_string(value, path, name);
    } else if (name == "source") {
      model.source = read_string(value, path, name);
    } else if (name != "fraglab_cost_model" && name != "calls") {
      fail(path, name, "one of fraglab_cost_model, gpu, driver, source, calls");
    }
  }
  for (const auto& [name, value] : calls->items()) {
    const std::optional<ApiCall> call = api_call_named(name);
    if (!call) {
      std::string names;
      for (std::size_t i = 0; i < kApiCallCount; ++i)
        names += (i == 0 ? "" : ", ") + std::string(api_call_name(static_cast<ApiCall>(i)));
      fail(path, "calls." + name, "a call name: " + names);
    }
    model[*call] = read_call(value, path, "calls." + name);
  }
  return model;
}

CostModel read_cost_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the cost-model file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cost_model(text.str(), path);
}

}  // namespace fraglab
