// Rendering `fraglab maxbatch` (src/report/maxbatch_report.cpp): the table per spec and the
// results JSON. The search and its results are the sweep layer's (fraglab/maxbatch.hpp).
#pragma once

#include <string>

#include "fraglab/maxbatch.hpp"

namespace fraglab {

// What the run searched: shown in the header and recorded in the JSON.
struct MaxbatchContext {
  std::string workload;  // e.g. "gpt2-xl fsdp1, world size 2, 2 steps"
  std::string device;    // the device spec
  MaxbatchBounds bounds;
};

// Per spec: the largest micro-batch without OOM and without retries, peak reserved and retries
// at each, the batches tried; then the best spec with its PYTORCH_CUDA_ALLOC_CONF line.
std::string maxbatch_table(const MaxbatchResult& result, const MaxbatchContext& context);
// The same as one JSON object (keys sorted, so stable), '\n' at the end.
std::string maxbatch_json(const MaxbatchResult& result, const MaxbatchContext& context);

}  // namespace fraglab
