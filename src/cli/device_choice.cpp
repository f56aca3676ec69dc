// choose_device and the capacity warnings: see device_choice.hpp.
#include "cli/device_choice.hpp"
#include "cli/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fraglab/policy.hpp"
#include "fraglab/recorded_memory.hpp"
#include "fraglab/sim_device.hpp"
#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"

namespace fraglab::cli {
namespace {

std::shared_ptr<const CostModel>& cost_model_option() {
  static std::shared_ptr<const CostModel> model;  // null: the defaults
  return model;
}
std::string& cost_model_path() {
  static std::string path;  // empty: the defaults
  return path;
}

DeviceChoice from_spec(const std::string& spec, const std::string& label, const std::string& source) {
  DeviceChoice choice{parse_device_spec(spec), label, source};  // its one-line error on a bad spec
  choice.device.costs = cost_model_option();
  return choice;
}

}  // namespace

void use_cost_model_file(const std::string& path) {
  cost_model_option() = std::make_shared<const CostModel>(read_cost_model(path));
  cost_model_path() = path;
  log::info(fmt::format("cost model: {}", path));
}

CostModelChoice cost_model_choice() {
  if (cost_model_option()) return {cost_model_path(), *cost_model_option()};
  CostModel defaults = CostModel::defaults();
  return {defaults.source, defaults};
}

DeviceChoice choose_device(const std::optional<std::string>& device_option) {
  if (device_option) {
    // "--device sim" (or sim:external:...) chooses the device but not its capacity; a CUDA
    // device's capacity is its memory.
    const bool sets_capacity = device_option->rfind("cuda", 0) == 0 || names_capacity(*device_option);
    return from_spec(*device_option, *device_option, sets_capacity ? kSourceOption : kSourceDefault);
  }
  return from_spec("sim", "sim", kSourceDefault);
}

namespace {

DeviceChoice device_for(const std::optional<std::string>& device_option, const Trace& trace) {
  if (device_option) return choose_device(device_option);  // even without a capacity: the user chose it
  const RecordedMemory recorded = recorded_memory(trace);
  if (recorded.available_at_oom) {
    // Below the recorded peak, memory outside the allocator changed during the run: the peak was
    // obtainable, so the capacity is at least that (validate.cpp decides the same).
    const Bytes capacity = std::max(*recorded.available_at_oom, recorded.peak_reserved);
    if (capacity > 0) return from_spec(fmt::format("sim:{}B", capacity), "sim", kSourceRecordedOom);
  }
  return choose_device(std::nullopt);
}

}  // namespace

DeviceChoice choose_device(const std::optional<std::string>& device_option, const Trace& trace) {
  DeviceChoice choice = device_for(device_option, trace);
  log::info(fmt::format("{}: device {}", trace.name, describe_choice(choice)));
  return choice;
}

std::string describe_choice(const DeviceChoice& choice) {
  return fmt::format("{}, capacity {} ({})", choice.label, format_bytes(choice.capacity()), choice.source);
}

DeviceDescription device_description(const DeviceChoice& choice) {
  return DeviceDescription{choice.device.is_cuda() ? choice.device.kind() : "sim", choice.capacity(),
                           choice.device.external(), choice.source};
}

void check_fits(const DeviceChoice& choice, const std::string& trace_name, Bytes peak_requested) {
  if (!choice.device.is_cuda()) return;  // a simulated device reports OOMs instead
  const Bytes free = choice.capacity() - choice.device.external();
  if (peak_requested <= free) return;
  throw InputError(fmt::format("{}: the trace needs {} ({} B) at its peak, the device {} has {} ({} B) free",
                               trace_name, format_bytes(peak_requested), peak_requested, choice.device.text,
                               format_bytes(free), free));
}

std::vector<std::string> capacity_options(const std::string& spec) {
  std::vector<std::string> keys;
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    for (const OptionItem& item : split_options(std::string_view(spec).substr(colon + 1), policy_name(spec))) {
      if (needs_capacity(item.key) && std::find(keys.begin(), keys.end(), item.key) == keys.end()) {
        keys.push_back(item.key);
      }
    }
  }
  // PyTorch collects garbage only under a memory fraction (allocator-model §3.3): without one the
  // threshold acts on nothing, whatever the capacity.
  const bool fraction = std::find(keys.begin(), keys.end(), "per_process_memory_fraction") != keys.end();
  if (!fraction) std::erase(keys, "garbage_collection_threshold");
  return keys;
}

void warn_capacity_options(const DeviceChoice& choice, const std::vector<std::string>& specs) {
  CapacityWarnings warnings(choice);
  for (const std::string& spec : specs) warnings.check(spec);
}

void CapacityWarnings::check(const std::string& spec) {
  const std::vector<std::string> acting = capacity_options(spec);
  if (spec.find("garbage_collection_threshold") != std::string::npos &&
      std::find(acting.begin(), acting.end(), "garbage_collection_threshold") == acting.end() &&
      warned_.insert("inert gc").second) {
    log::warn(
        "warning: garbage_collection_threshold does nothing without per_process_memory_fraction: PyTorch "
        "collects cached blocks only under a memory fraction");
  }
  if (!choice_.assumed()) return;
  for (const std::string& option : acting) {
    if (!warned_.insert(option).second) continue;
    log::warn(
        fmt::format("warning: {} acts on a share of the GPU's memory, and no capacity was given: pass --device "
                    "sim:<your GPU's memory> (assumed {})",
                    option, format_bytes(choice_.capacity())));
  }
}

void note_assumed_capacity_ooms(const DeviceChoice& choice, bool any_oom) {
  if (!choice.assumed() || !any_oom) return;
  log::note(
      fmt::format("note: the out-of-memory errors depend on the device's capacity, and none was given (assumed "
                  "{}): pass --device sim:<your GPU's memory>",
                  format_bytes(choice.capacity())));
}

}  // namespace fraglab::cli
