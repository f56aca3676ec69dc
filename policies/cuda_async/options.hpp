// Options of the cuda_async policy ("cuda_async:release_threshold:1GiB,opportunistic:False").
#pragma once

#include <limits>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab::cuda_async {

inline constexpr Bytes kNoTrim = std::numeric_limits<Bytes>::max();  // ReleaseThreshold UINT64_MAX

// Which `mark` events of the trace stand for a device synchronisation.
enum class SyncOnMark { Step, All, None };  // in the order parse_options names them

struct Options {
  // cudaMemPoolAttrReleaseThreshold: at a synchronisation point, free pages are released until
  // the pool holds at most this many bytes. PyTorch sets UINT64_MAX (never trim).
  Bytes release_threshold = kNoTrim;
  // cudaMemPoolReuseAllowOpportunistic: a completed deferred free is reusable by every stream at
  // once; off, only after the next synchronisation point.
  bool opportunistic = true;
  // cudaMemPoolReuseAllowInternalDependencies: when the pool cannot grow, a stream may reuse
  // bytes still pending on another stream (it waits on that stream) before giving up.
  bool internal_dependencies = true;
  SyncOnMark sync_on_mark = SyncOnMark::Step;
};

// Throws InputError naming the policy, the key and the accepted values. The defaults are the
// registered ones (cuda_async.cpp); the initialisers above say the same.
Options parse_options(std::string_view text);

}  // namespace fraglab::cuda_async
