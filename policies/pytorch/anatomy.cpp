// The free cached bytes of the pytorch policy, split for the fragmentation anatomy
// (fraglab/anatomy.hpp, README "Fragmentation anatomy"). Each free block (not handed out, no free
// pending: PyTorch's "inactive" blocks) goes to the first part that applies:
//  1. stream_bound: it belongs to another stream than the latest request's — streams never share
//     free blocks (allocator-model §2), so only a request of its own stream can use it;
//  2. small_pool: it is in the small pool (≤ 1 MiB requests only, §2), which large requests cannot use;
//  3. oversize_locked: a large-pool block of at least max_split_size bytes, which no request below
//     max_split_size may take (§3.2 rule 4) and which no request splits (§4.1);
//  4. usable: anything else — a large-pool block of the request's stream that a request fitting
//     it can take (and split).
// Only mapped blocks exist for the device: the unmapped part of an expandable range reserves
// nothing (§7.1), so mapped-but-free pages count here and unmapped ones nowhere.
#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

FreeAnatomy CachingAllocator::free_anatomy(std::optional<StreamId> stream) const {
  FreeAnatomy out;
  for (NodeId id = 0; id < nodes_.slots(); ++id) {
    const Node& n = nodes_[id];
    ++out.pieces;
    if (!n.live || !n.mapped || !n.reusable()) continue;
    if (stream && n.stream != *stream)
      out.stream_bound += n.size;
    else if (n.pool == PoolKind::Small)
      out.small_pool += n.size;
    else if (config_.max_split_size != kUnlimited && n.size >= config_.max_split_size)
      out.oversize_locked += n.size;
    else
      out.usable += n.size;
  }
  return out;
}

}  // namespace fraglab::cca
