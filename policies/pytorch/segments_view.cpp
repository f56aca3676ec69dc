// The segment/block listing for reports and snapshot export (allocator-model §11.3, §7.6): one entry
// per cudaMalloc'd segment, and one per maximal run of mapped blocks of an expandable range.
// Pending-free blocks count as occupied (PyTorch's "active_pending_free").
#include <algorithm>

#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

std::vector<SegmentView> CachingAllocator::segments() const {
  std::vector<SegmentView> out;
  for (NodeId id = 0; id < nodes_.slots(); ++id) {
    const Node& head = nodes_[id];
    if (!head.live || head.prev != kNil) continue;
    SegmentView* view = nullptr;
    for (NodeId b = id; b != kNil; b = nodes_[b].next) {
      const Node& n = nodes_[b];
      if (!n.mapped) {
        view = nullptr;  // an unmapped gap ends a run
        continue;
      }
      if (view == nullptr) {
        out.push_back(SegmentView{n.addr, 0, n.stream, pool_name(n.pool), n.expandable(), {}});
        view = &out.back();
      }
      view->size += n.size;
      view->blocks.push_back(SegmentView::Piece{n.addr, n.size, n.allocated || n.pending});
    }
  }
  std::sort(out.begin(), out.end(), [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
  return out;
}

}  // namespace fraglab::cca
