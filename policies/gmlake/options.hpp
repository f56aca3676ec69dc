// The gmlake policy's options: GMLake's environment variables under snake_case names, with the
// defaults the code uses (GMLake/src/CUDACachingAllocator.cpp, GMLake/docs/GMLake-tutorial.md).
//
//   option          GMLake variable   default  meaning
//   vmm_defragment  vmmDefragment     true     false: no VMM, no stitching: PyTorch's caching
//                                              allocator on cudaMalloc with GMLake's 2 MiB rounding
//   frag_limit      fragLimit         512      only stitch requests of at least this many MiB
//                                              (GMLake reads bytes; we take MiB)
//   reuse_limit     reuseLimit        10       a cached sBlock serves a request only if its size
//                                              <= request * reuse_limit
//   defrag_level    defragLevel       0        0: stitch before allocating new memory; 1: only
//                                              once a new allocation failed; 2: only after the
//                                              cache flush and its retry failed
//   auto_gc         autoGC            1000     GiB of sBlocks created (and not yet collected)
//                                              above which every cached sBlock is torn down
//   re_alloc        reAlloc           false    when the free pBlocks fall short, allocate only the
//                                              shortfall and stitch it in (the paper's remainder
//                                              case; off in the code by default)
//   self_check      (ours)            false    audit the policy's invariants after every call
//                                              (slow; for tests)
#pragma once

#include <cstdint>

#include "fraglab/types.hpp"

namespace fraglab::gmlake {

struct Options {
  bool vmm_defragment = true;
  Bytes frag_limit = 512 * MiB;
  double reuse_limit = 10.0;
  int defrag_level = 0;
  std::uint64_t auto_gc_gib = 1000;
  bool re_alloc = false;
  bool self_check = false;
};

}  // namespace fraglab::gmlake
