// OccupancyIndex: "which offset ranges are taken at some moment of this time interval?" for the
// greedy planner, without visiting every placed buffer that overlaps the interval.
//
// Time is a range of slots [0, slots). Two slot ranges [f, l) and [f', l') meet iff one holds
// the other's first slot: f' in [f, l) (when f <= f') or f in [f', l') (when f' < f). So the
// buffers live somewhere in a query range Q = [first, last) are those live at slot `first` (a
// stabbing query, one slot) and those whose range begins in (first, last) (a range query over
// one point per buffer); a buffer in both counts once, since the answer is a union.
//
// A perfect binary segment tree over the slots (heap numbering: root 1, children 2v and 2v + 1,
// slot s at leaf L + s, a node's height counted from the leaves) answers both; each node holds
// sets of occupied offset ranges, each sorted, disjoint and merged (touching or overlapping runs
// become one run, so a set is a union of buffers, usually of few runs):
//  - own: the buffers whose slot range covers the node's whole range and none of its ancestors'
//    (the node is one of the O(log n) canonical pieces of the buffer's range); the buffers live
//    at slot s are the own sets of leaf s and its ancestors. Nodes at height 1 keep none: a run
//    whose canonical piece is one goes to the sets of its two leaves instead (live at both, so a
//    leaf's set still only holds buffers live at it). A query then reads one set fewer per
//    placement for one more leaf insert now and then (on lm2.7b -1.6 % of the replay's
//    instructions; every other level without own sets, like a 4-ary tree: +6 %);
//  - begins: the buffers whose range begins in the node's range (a parent's holds its
//    children's). A leaf keeps one set for both: own and begins of leaf s are all live at s, so
//    either can stand for the other in a query whose range holds s;
//  - cover (upper levels only, a cache): the union of own over the node and its ancestors: every
//    buffer live during the node's whole range.
// A query's answer is the set of leaf `first`, the cover of its lowest cached ancestor (with the
// own sets of the uncached ancestors below it), and the begin sets of the canonical nodes of
// (first, last): a handful of merged sets instead of every buffer live in Q (on training traces
// ~1000 buffers in ~10-20 runs). An insert adds the run to the own sets of its range's canonical
// nodes and to the begin sets on the path from its first leaf up, bottom up, stopping at the first
// that held it.
//
// The cover cache is rebuilt lazily, top down along a query's path (from the highest node whose
// slots all lie below `slots`: those above it span past the last slot, so no range covers them
// and their sets stay empty; the root is one unless `slots` is a power of two; on lm2.7b the walk
// is ~1.4 nodes shorter, -0.7 % of the replay's instructions): a node's cover is stale when
// an own set on its path from the root changed after it was built (each cached node records the
// insert that last changed its own set; the walk carries the latest along the path). The walk
// begins at the highest node whose own set changed after the deepest cover on the path was built,
// found by comparing each node's change with that one number: when that cover was built, every
// cover above it was fresh, and nothing above that node changed since (on lm2.7b ~9 in 10 of the
// walk's nodes lie above the first stale one; -0.75 % of the replay's instructions). A cover that
// would be a copy of its parent's cover or of its own set (the other being empty) shares that
// block instead. Deep nodes change too often between visits for a cache to pay, so below
// `cached_depth` (13 by default) the own sets are read one by one instead, and height 1 keeps no
// cover: with covers down to height 1, the rebuilds after every change above cost more than they
// saved (measured: -1 % to -11 % of the plan's instructions on the real snapshots without them).
//
// Queries known in advance (the planner's case: one query per request, in placement order): a
// node's begin set is read only by the queries that have it as a canonical node (a leaf's set
// also by those that start there), its own set only by those whose first leaf lies under it
// (through a cover of it or of a node under it). The constructor notes, per node, the last query
// that reads each; an insert then skips the sets no query to come will read. A skipped set goes
// stale for good, which is safe because it is never read again; a set still read later has had
// every insert so far, which keeps the early stop of the begins walk sound. Without the list,
// every set is kept and any queries may come.
//
// Repeated queries (known in advance only): a query whose slot range is that of one of the
// kReuseWindow queries before it (the latest query that started at the same slot) is answered
// from that query's answer, kept for it, plus the runs inserted since whose slot ranges meet the
// range: the union of the same runs. On training traces these are the groups of same-size
// tensors allocated and freed together (~1/6 of the requests, a third of the long-lived ones,
// whose queries unite the most sets). The constructor finds them, and the sets only they would
// read are not noted as read: they are skipped by the inserts too.
//
// Cost: insert and query touch O(log n) nodes, found by index arithmetic; a set insert is a
// search (a scan in a small set) and a move of the tail of a small array (run_set_store.hpp); a
// query merges a few sorted sets, pairwise, in two buffers reused from query to query. On lm2.7b
// (2,843 slots, 7,095 requests) a query unites ~4.4 sets of ~24 runs in all, and an insert adds
// to ~5.4 sets; what time is left goes mostly to merging and searching these small sets.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fraglab/types.hpp"
#include "offline/default_init_allocator.hpp"
#include "offline/run_set_store.hpp"

namespace fraglab::offline {

// (No member initializers: a trivial type, so an array of them can be allocated without being
// written first.)
struct SlotRange {
  std::uint32_t first;
  std::uint32_t last;  // exclusive
};

class OccupancyIndex {
 public:
  static constexpr std::uint32_t kDefaultCachedDepth = 13;
  static constexpr std::uint32_t kLowestCachedHeight = 2;             // (see above)
  static constexpr std::uint32_t kMaxSlots = std::uint32_t{1} << 30;  // node ids stay 32-bit
  // Insert counts stay below the all-ones sentinel of the cover ages (see cover_ages_).
  static constexpr std::uint32_t kMaxInserts = std::numeric_limits<std::uint32_t>::max() - 1;
  // How many queries back a repeated query looks for the answer to extend (see above). Shorter
  // windows measured slightly fewer instructions on every trace tried (offline's, 8 / 16 / 32 /
  // 64: lm2.7b 14.448 / 14.451 / 14.457 / 14.479 M; 75-step GPT2-XL plan 1,806.5 / 1,806.7 /
  // 1,807.1 / 1,807.5 M; also gpt2medium, finetune, lm2.7b-ctx512).
  static constexpr std::uint32_t kReuseWindow = 8;

  // `queries`: the ranges of every occupied() call to come, in order, when known (then the calls
  // must follow it; fewer than 2^32; the index reads it as it goes: it must outlive the index);
  // empty: any queries. Nodes at depth <= cached_depth (root: 0) and height >= 2 keep a cover
  // set: at most 2^(cached_depth + 1) of them.
  explicit OccupancyIndex(std::uint32_t slots, std::span<const SlotRange> queries = {},
                          std::uint32_t cached_depth = kDefaultCachedDepth);

  // [taken.begin, taken.end) is occupied during slots [first, last) (first < last <= slots).
  // At most kMaxInserts inserts.
  void insert(std::uint32_t first, std::uint32_t last, OffsetRun taken);
  // The offsets occupied at some slot of [first, last), as sorted, disjoint, non-touching runs.
  // The span stays valid until the next call. (Not const: refreshes the cover cache.)
  std::span<const OffsetRun> occupied(std::uint32_t first, std::uint32_t last);
  // best_fit_in(occupied(first, last), size) (run_set_store.hpp), mostly without writing out the
  // union: the last merge only looks at the gaps. The same query as occupied() for the known ones.
  Bytes best_fit(std::uint32_t first, std::uint32_t last, Bytes size);
  // The planner's step: offset = best_fit(first, last, size), then insert(first, last,
  // {offset, offset + size}); returns the offset. One call, with best_fit's body inlined and one
  // check of the range (-1.1 % of the replay's instructions on lm2.7b).
  Bytes place(std::uint32_t first, std::uint32_t last, Bytes size);
  // place() of the next announced query (the index was given the queries): their ranges were
  // checked when announced, and the call cannot name another one, so neither is checked again
  // (~16 instructions per planned request).
  Bytes place_next(Bytes size);
  // place_next() of every announced query still to come, in order, the planner's loop in one
  // call (no call and saved registers per request): query n has size sizes[order[n]] and its
  // offset goes to offsets[order[n]]. Returns the highest end placed (0: none). More entries in
  // `order` than announced queries left: a logic_error before any is placed; more than the insert
  // count has room for (kMaxInserts, counting one insert per entry): a length_error, likewise.
  Bytes place_all(std::span<const std::uint32_t> order, const Bytes* sizes, Bytes* offsets);

 private:
  using NodeId = std::uint32_t;

  // Notes the nodes the known queries read (the constructor's pass over them; the nodes start
  // as read by none), and the queries that repeat a recent one (reuses_, keeps_).
  void note_reads(std::span<const SlotRange> queries);

  void add_part(const RunSet& set) {
    if (!set.empty()) parts_.push_back(set);
  }
  // Query parts: the own sets of leaf's uncached ancestors at heights [low, high).
  void add_uncached_own(NodeId leaf, std::uint32_t low, std::uint32_t high);
  // Refreshes the covers of leaf's cached ancestors below height `high`, top down (the ones
  // above are fresh and their own sets empty). Returns the deepest of them, 0 when there is none.
  [[gnu::always_inline]] inline NodeId refresh_covers(NodeId leaf, std::uint32_t high);
  void rebuild_cover(NodeId v);
  // Checks the query and counts it among the known ones; false when its answer extends a kept
  // one (extend_answer) instead of reading the sets. Inlined into its callers, as are the two
  // below: the calls' saved registers were ~10 instructions per query.
  // place_next()'s body after its check that a query is left, inlined into place_all() too
  // (which checks that once for all its queries).
  [[gnu::always_inline]] inline Bytes place_announced(Bytes size);
  // kChecked: the range is checked, and when queries were announced, that it is the next one;
  // kAnnounced: the range is the next announced query's (place_next).
  enum class QueryCheck { kChecked, kAnnounced };
  template <QueryCheck check>
  [[gnu::always_inline]] inline bool admit(std::uint32_t first, std::uint32_t last);
  // Collects the sets whose union is the answer in parts_.
  [[gnu::always_inline]] inline void collect_parts(std::uint32_t first, std::uint32_t last);
  // best_fit() of a query of one or two slots whose answer is not kept: its parts are the one or
  // two leaf sets, the uncached own sets on the path (none on trees of up to 2^15 slots) and the
  // deepest cover; with at most two besides the cover, they are united straight from the store,
  // without the parts list (half the planner's queries: -2.0 % of the replay's instructions on
  // lm2.7b, -0.3 % of the plan's on the 75-step GPT2-XL trace).
  [[gnu::always_inline]] inline Bytes short_best_fit(std::uint32_t first, std::uint32_t last, Bytes size);
  // The union of parts_, kept when a later query extends it.
  std::span<const OffsetRun> unite_and_keep();
  // The union of parts_ (in scratch_, or a set of the store when there is only one).
  std::span<const OffsetRun> unite_parts();
  // Swaps the largest of parts_ (at least one) with the last; returns it.
  RunSet largest_part_last();
  // The union of parts_ (at least one), in their order.
  std::span<const OffsetRun> merge_parts();
  // Query q's answer from that of query `from` (same range) and the inserts since.
  std::span<const OffsetRun> extend_answer(std::uint32_t q, std::uint32_t from);

  std::uint32_t slots_;
  std::uint32_t leaves_;                // bit_ceil(slots): slot s is leaf leaves_ + s
  std::uint32_t height_;                // the root's height: log2(leaves_)
  std::uint32_t lowest_cached_height_;  // nodes at this height and above keep a cover
  struct NodeSets {                     // a node's sets and when they are read last (32 bytes: half a cache line)
    RunSet own;
    RunSet begins;
    // 1 + the index of the last query that reads the set (0: none; all ones: any may).
    std::uint32_t own_read_until = ~std::uint32_t{0};
    std::uint32_t begins_read_until = ~std::uint32_t{0};
  };
  std::vector<NodeSets> nodes_;  // by node id
  RunSetStore sets_;
  struct CoverAge {                    // per cached node, what the freshness check reads (8 bytes: dense)
    std::uint32_t own_changed_at = 0;  // the insert that last changed the node's own set
    std::uint32_t built_at = 0;        // inserts done when its cover was built
  };
  // A cover that is its parent's cover or its own set shares that block: the block cannot change
  // without an own set on the node's path changing, which makes the cover stale first.
  // A cover that shares keeps its own block (if it had one) for when it needs one again: no
  // release and retake of a block each time a cover switches between the two.
  struct Cover {
    RunSet runs;
    RunSet block;  // its own block (capacity 0: none); `runs` is it when the cover does not share
  };
  // By node id, for the cached levels, then the level below them as sentinels: changed "at"
  // all ones, after any build (see refresh_covers).
  std::vector<CoverAge> cover_ages_;
  std::vector<Cover> covers_;     // the same
  std::size_t cached_nodes_ = 0;  // the cached nodes: ids below this (covers_.size())
  std::uint32_t inserts_ = 0;
  std::span<const SlotRange> queries_;  // the known queries (empty: any)
  std::uint32_t queries_done_ = 0;
  // Repeated queries (known queries only): per query, 1 + the earlier query whose answer it
  // extends (0: none; also after the last query, a sentinel) and whether a later one extends
  // its answer; the answers kept, by query index modulo kReuseWindow + 1 (a kept answer lives
  // until the window has passed it), with the number of inserts made when each was taken; and
  // every insert since the start.
  std::unique_ptr<std::uint32_t[]> reuses_;
  std::vector<std::uint8_t> keeps_;
  struct KeptAnswer {
    std::vector<OffsetRun> runs;
    std::uint32_t inserts = 0;
  };
  std::vector<KeptAnswer> kept_;
  static constexpr std::size_t kKeptAnswerRuns = 32;
  struct LoggedInsert {
    std::uint32_t first;
    std::uint32_t last;
    OffsetRun run;
  };
  // The inserts from number log_first_ on (entry i - log_first_ is insert i): those a kept answer
  // still to be extended has not seen (older ones are dropped when the log reaches compact_at_,
  // so it stays about the size of the window on the planner's one insert per query). The vector
  // holds compact_at_ entries (unwritten until used), so an insert writes its entry with no
  // capacity test.
  std::vector<LoggedInsert, DefaultInitAllocator<LoggedInsert>> insert_log_;
  std::uint32_t log_first_ = 0;
  std::size_t compact_at_ = kMinCompactAt;
  static constexpr std::size_t kMinCompactAt = 1024;
  void compact_log();
  // The insert not yet stored to the sets (known queries only): see insert().
  std::optional<LoggedInsert> pending_;
  void store_pending();
  // best_fit()'s body, inlined into place() too (its one call per planned request).
  template <QueryCheck check>
  [[gnu::always_inline]] inline Bytes find_best_fit(std::uint32_t first, std::uint32_t last, Bytes size);
  // insert() after the checks of its arguments (a checked range, a non-empty run): counts the
  // insert (at most kMaxInserts) and stores or defers it.
  // `announced`: queries were announced (the caller knows it: no test of queries_), and the
  // caller checked the insert count (check_insert_count) for this insert.
  template <bool announced = false>
  void record_insert(std::uint32_t first, std::uint32_t last, OffsetRun taken);
  // Throws length_error unless `more` inserts keep the count within kMaxInserts.
  void check_insert_count(std::size_t more) const;
  // Adds the run to the sets: the own sets of the canonical nodes and the begin sets on the path.
  void store(std::uint32_t first, std::uint32_t last, OffsetRun taken);
  // The query in progress: the sets whose union is the answer, and two buffers to merge in.
  // A fixed array, not a vector: a query has a bounded number of parts (the first leaf, two
  // canonical nodes per height, one cover, one own set per uncached height), and a push needs
  // no capacity check (-1 % of the plan's instructions on lm2.7b).
  class Parts {
   public:
    static constexpr std::size_t kCapacity = 3 * 30 + 2;  // height <= 30 (kMaxSlots = 2^30)
    // (The end and the largest are kept as pointers into the array, not counts: the Filler's
    // pointers are stored as they are, with no division by the size of a RunSet. So a Parts is
    // neither copied nor moved.)
    Parts() = default;
    Parts(const Parts&) = delete;
    Parts& operator=(const Parts&) = delete;
    std::size_t size() const { return static_cast<std::size_t>(end_ - parts_.data()); }
    bool empty() const { return end_ == parts_.data(); }
    bool at_most_one() const { return end_ <= parts_.data() + 1; }
    // The runs in all parts.
    std::size_t runs() const { return runs_; }
    void clear() {
      end_ = largest_ = parts_.data();
      runs_ = largest_runs_ = 0;
    }
    void push_back(const RunSet& set) {
      if (set.size >= largest_runs_) {
        largest_runs_ = set.size;
        largest_ = end_;
      }
      *end_++ = set;
      runs_ += set.size;
    }
    // The largest part (the last of equal ones), noted as they come: a pass over the parts to find
    // it cost more. (Not kept up by pop_back or by writes through [].)
    RunSet& largest() { return *largest_; }
    void pop_back() { runs_ -= (--end_)->size; }
    RunSet& operator[](std::size_t k) { return parts_[k]; }
    RunSet& back() { return end_[-1]; }
    const RunSet* begin() const { return parts_.data(); }
    const RunSet* end() const { return end_; }

    // Fills the parts anew (as clear() then push_back() of the non-empty sets), with the end, the
    // runs and the largest in locals: the members were stored to after every part (-0.4 % of the
    // replay's instructions on lm2.7b). finish() writes them back.
    class Filler {
     public:
      explicit Filler(Parts& parts) : parts_(parts), next_(parts.parts_.data()), largest_(next_) {}
      void add(const RunSet& set) {
        if (set.empty()) return;
        if (set.size >= largest_runs_) {
          largest_runs_ = set.size;
          largest_ = next_;
        }
        *next_++ = set;
        runs_ += set.size;
      }
      void finish() {
        parts_.end_ = next_;
        parts_.runs_ = runs_;
        parts_.largest_ = largest_;
        parts_.largest_runs_ = largest_runs_;
      }

     private:
      Parts& parts_;
      RunSet* next_;
      RunSet* largest_;
      std::size_t runs_ = 0;
      std::uint32_t largest_runs_ = 0;
    };

   private:
    std::array<RunSet, kCapacity> parts_;
    RunSet* end_ = parts_.data();
    RunSet* largest_ = parts_.data();
    std::size_t runs_ = 0;
    std::uint32_t largest_runs_ = 0;
  };
  static_assert(std::countr_zero(kMaxSlots) <= 30, "Parts::kCapacity assumes a tree of height <= 30");
  Parts parts_;
  // Two buffers of scratch_runs_ runs each, grown together: one test of their size per query.
  std::unique_ptr<OffsetRun[]> scratch_owned_[2];
  OffsetRun* scratch_[2] = {nullptr, nullptr};
  std::size_t scratch_runs_ = 0;
  [[gnu::noinline]] void grow_scratch(std::size_t runs);
  // The two buffers, with room for `runs` runs each.
  OffsetRun* const* scratch_for(std::size_t runs) {
    if (scratch_runs_ < runs) grow_scratch(runs);
    return scratch_;
  }
};

}  // namespace fraglab::offline
