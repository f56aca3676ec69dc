// Which device a command simulates, and where its capacity came from. Results depend on the
// capacity (OOMs, garbage_collection_threshold, per_process_memory_fraction, the size of
// expandable segments' address ranges), so every table and JSON names it and its source.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fraglab/cost_model.hpp"
#include "fraglab/device_spec.hpp"
#include "fraglab/report.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::cli {

inline constexpr const char* kSourceOption = "--device";
inline constexpr const char* kSourceRecordedOom = "recorded oom";
inline constexpr const char* kSourceDefault = "default";

struct DeviceChoice {
  DeviceSpec device;   // what every run builds: the --device text, "sim:<N>B", or "sim"
  std::string label;   // what the user sees as the device: the --device text, else "sim"
  std::string source;  // kSourceOption, kSourceRecordedOom or kSourceDefault
  const std::string& spec() const { return device.text; }
  Bytes capacity() const { return device.capacity(); }
  bool assumed() const { return source == kSourceDefault; }
};

// --cost-model FILE.json (README "Device time"): every device chosen from now on charges its calls
// by this file's figures (the defaults for the calls it does not name). Throws InputError naming
// the file and the key.
void use_cost_model_file(const std::string& path);
// The cost model devices charge: the --cost-model file's (named by the path given) or the
// defaults (named by their source). A sweep records it in its results file (SweepMeta).
struct CostModelChoice {
  std::string name;
  CostModel model;
};
CostModelChoice cost_model_choice();

// --device when given; otherwise, when the trace recorded an oom, the memory its allocator could
// obtain then (reserved + device_free, fraglab/recorded_memory.hpp; never below the recorded
// peak reserved); otherwise the default 80 GiB. Throws InputError on a bad --device.
DeviceChoice choose_device(const std::optional<std::string>& device_option, const Trace& trace);
// The same before a trace is read: --device or the default.
DeviceChoice choose_device(const std::optional<std::string>& device_option);

// "sim, capacity 80.00 GiB (default)", for headers.
std::string describe_choice(const DeviceChoice& choice);
// For the results JSON.
DeviceDescription device_description(const DeviceChoice& choice);

// A real GPU (--device cuda) replays only a trace whose peak requested bytes fit in its free
// memory: otherwise throws InputError "TRACE: the trace needs X at its peak, the device has Y free".
void check_fits(const DeviceChoice& choice, const std::string& trace_name, Bytes peak_requested);

// Options of `spec` that act on a share of the GPU's memory: per_process_memory_fraction, and
// garbage_collection_threshold when a fraction is set too (PyTorch collects only under one).
std::vector<std::string> capacity_options(const std::string& spec);
// Warnings on stderr (log.hpp), each once: garbage_collection_threshold without a memory fraction (it does
// nothing); and, when the capacity was assumed, each option of capacity_options() of any spec.
void warn_capacity_options(const DeviceChoice& choice, const std::vector<std::string>& specs);
// The same, one spec at a time (a sweep streams its settings): each warning once per object.
class CapacityWarnings {
 public:
  explicit CapacityWarnings(const DeviceChoice& choice) : choice_(choice) {}
  void check(const std::string& spec);

 private:
  const DeviceChoice& choice_;
  std::set<std::string> warned_;
};
// When the capacity was assumed and `any_oom`: one note on stderr (log.hpp) that the OOMs depend on it.
void note_assumed_capacity_ooms(const DeviceChoice& choice, bool any_oom);

}  // namespace fraglab::cli
