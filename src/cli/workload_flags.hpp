// The generator's flags (model, framework, training knobs, FSDP, DeepSpeed, GPU timing), shared
// by the commands that generate traces: `gen` writes one, `maxbatch` generates one per micro-batch.
#pragma once

#include <string>

#include "cli/common.hpp"
#include "fraglab/workload.hpp"

namespace fraglab::cli {

class WorkloadFlags {
 public:
  WorkloadFlags();
  WorkloadFlags(const WorkloadFlags&) = delete;  // the option groups point into this object
  WorkloadFlags& operator=(const WorkloadFlags&) = delete;
  // The option groups, in help order; the command adds its own (micro-batch, steps, output).
  void add_to(po::options_description& options) const;
  // After parsing: the flags into options(), every spelling checked by the parse_* functions,
  // which name the flag and the accepted values (InputError). Returns the note on a default
  // chosen for this model ("COMMAND: --attention not given: ..."), or "".
  std::string read(const po::variables_map& vm, const std::string& command);
  // The options read; the command sets micro_batch, steps and name.
  WorkloadOptions& options() { return o; }

 private:
  po::options_description model_opts{"model and run"};
  po::options_description train_opts{"training knobs (docs/workload-model.md §7)"};
  po::options_description growth_opts{"growth after the first steps (docs/workloads.md; all off by default)"};
  po::options_description fsdp_opts{"FSDP1"};
  po::options_description ds_opts{"DeepSpeed ZeRO"};
  po::options_description timing_opts{"GPU timing model (places deferred frees)"};
  std::string model, framework = "fsdp1", sharding = "full_shard", precision = "bf16", reduce_dtype,
                     recompute_impl = "non_reentrant", attention, gelu = "python", loss = "fp32_upcast", optimizer,
                     grad_flatten = "cat", padding = "max_length", limit_all_gathers = "true",
                     backward_prefetch = "backward_pre", overlap_comm, contiguous_gradients = "true";
  WorkloadOptions o;
  std::uint64_t reduce_bucket = 0, prefetch_bucket = 0, persistence = 0;
};

}  // namespace fraglab::cli
