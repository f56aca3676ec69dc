// OccupancyIndex: see occupancy_index.hpp for the structure and why a query is correct.
#include "offline/occupancy_index.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <utility>

namespace fraglab::offline {

OccupancyIndex::OccupancyIndex(std::uint32_t slots, std::span<const SlotRange> queries, std::uint32_t cached_depth)
    : slots_(slots),
      leaves_(std::bit_ceil(std::max<std::uint32_t>(std::min(slots, kMaxSlots), 1))),
      height_(static_cast<std::uint32_t>(std::countr_zero(leaves_))),
      lowest_cached_height_(std::max(kLowestCachedHeight, height_ > cached_depth ? height_ - cached_depth : 0)),
      sets_(std::min(32 * std::size_t{leaves_}, std::size_t{1} << 23)) {  // (~what training traces use)
  if (slots > kMaxSlots) throw std::length_error("offline: more time slots than the occupancy index holds (2^30)");
  // With the queries known, a set counts as read by none until note_reads() finds its last reader
  // (note_reads() only raises it).
  NodeSets fresh{};
  if (!queries.empty()) fresh.own_read_until = fresh.begins_read_until = 0;
  nodes_.assign(2 * std::size_t{leaves_}, fresh);
  const std::size_t cached =  // the nodes at that height and above (none in a tree that low)
      lowest_cached_height_ <= height_ ? std::size_t{2} << (height_ - lowest_cached_height_) : 0;
  // The ages of the level below the cached ones are sentinels, changed at every moment: the
  // refresh's scan down a path stops there without a test of the height per step.
  cover_ages_.resize(2 * cached, CoverAge{.own_changed_at = ~std::uint32_t{0}});
  std::fill_n(cover_ages_.begin(), cached, CoverAge{});
  covers_.resize(cached);
  cached_nodes_ = cached;
  if (!queries.empty()) {
    queries_ = queries;
    note_reads(queries);
    insert_log_.resize(kMinCompactAt);
  }
}

void OccupancyIndex::note_reads(std::span<const SlotRange> queries) {
  if (queries.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("offline: more queries than the occupancy index counts (2^32)");
  }
  // (Written for every query below, so not zero-filled first: the fill cost one instruction per
  // byte, memset's string store as callgrind counts it.)
  // (One more, after the last query: a sentinel "no repeat", so that an insert after the last
  // query needs no test of the count before it looks at the next one.)
  reuses_ = std::make_unique_for_overwrite<std::uint32_t[]>(queries.size() + 1);
  reuses_[queries.size()] = 0;
  keeps_.assign(queries.size(), 0);
  kept_.resize(kReuseWindow + 1);
  // Room up front for what a kept answer usually holds: grown as it was filled, the answers took
  // a few hundred allocations (and as many frees) on a training trace.
  for (KeptAnswer& answer : kept_) answer.runs.reserve(kKeptAnswerRuns);
  // The members the loop reads, in locals: its stores to the nodes would make the compiler reload
  // them after each.
  NodeSets* const nodes = nodes_.data();
  std::uint32_t* const reuses = reuses_.get();
  std::uint8_t* const keeps = keeps_.data();
  const NodeId leaves = leaves_;
  const std::uint32_t slots = slots_;
  const bool own_sets = height_ >= 2;
  // Per first slot: 1 + the latest query starting there (0: none yet).
  std::vector<std::uint32_t> latest_by_first(slots, 0);
  std::uint32_t* const latest_at = latest_by_first.data();
  for (std::uint32_t q = 0; q < queries.size(); ++q) {
    const auto [first, last] = queries[q];
    if (first >= last || last > slots) throw std::logic_error("OccupancyIndex: bad slot range");
    // A repeat of one of the kReuseWindow queries before it (the latest one that started at the
    // same slot) reads no set: it extends that one's answer, kept for it.
    const std::uint32_t latest = std::exchange(latest_at[first], q + 1);
    if (latest != 0 && q - (latest - 1) <= kReuseWindow && queries[latest - 1].last == last) {
      reuses[q] = latest;
      keeps[latest - 1] = 1;
      continue;
    }
    reuses[q] = 0;
    const NodeId first_leaf = leaves + first;
    nodes[first_leaf].begins_read_until = q + 1;
    for (NodeId lo = first_leaf + 1, hi = leaves + last; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) nodes[lo++].begins_read_until = q + 1;
      if (hi & 1) nodes[--hi].begins_read_until = q + 1;
    }
    // The lowest own set on its path (heights 0 and 1 keep none); its ancestors' too: below.
    if (own_sets) nodes[first_leaf >> 2].own_read_until = q + 1;
  }
  // The own sets on a first leaf's path are read through the covers, so a node's own set is read
  // as late as its children's are (from height 3 up: the nodes below height 2 keep no own set).
  for (NodeId v = leaves / 4; v-- > 1;) {
    nodes[v].own_read_until =
        std::max({nodes[v].own_read_until, nodes[2 * v].own_read_until, nodes[2 * v + 1].own_read_until});
  }
}

std::span<const OffsetRun> OccupancyIndex::extend_answer(std::uint32_t q, std::uint32_t from) {
  const KeptAnswer& earlier = kept_[from % kept_.size()];
  KeptAnswer& answer = kept_[q % kept_.size()];  // (not earlier's: q - from <= kReuseWindow)
  answer.runs = earlier.runs;
  const auto [first, last] = queries_[q];
  for (std::uint32_t i = earlier.inserts; i < inserts_; ++i) {
    const LoggedInsert& logged = insert_log_[i - log_first_];
    if (logged.first < last && first < logged.last) add_run(answer.runs, logged.run);
  }
  answer.inserts = inserts_;
  return answer.runs;
}

void OccupancyIndex::compact_log() {
  // A query still to come extends the kept answer of one of the kReuseWindow queries before it
  // at most; such an answer has seen the inserts before its own count.
  std::uint32_t oldest_needed = inserts_;
  const std::uint32_t from = queries_done_ > kReuseWindow ? queries_done_ - kReuseWindow : 0;
  for (std::uint32_t n = from; n < queries_done_; ++n) {
    if (keeps_[n]) oldest_needed = std::min(oldest_needed, kept_[n % kept_.size()].inserts);
  }
  const std::size_t left = inserts_ - oldest_needed;
  std::copy_n(insert_log_.begin() + (oldest_needed - log_first_), left, insert_log_.begin());
  log_first_ = oldest_needed;
  compact_at_ = std::max(kMinCompactAt, 2 * left);  // (amortized: what is left doubles first)
  if (insert_log_.size() < compact_at_) insert_log_.resize(compact_at_);
}

// ---- insert -----------------------------------------------------------------------------------

void OccupancyIndex::insert(std::uint32_t first, std::uint32_t last, OffsetRun taken) {
  if (first >= last || last > slots_) throw std::logic_error("OccupancyIndex: bad slot range");
  if (taken.begin >= taken.end) return;
  record_insert(first, last, taken);
}

Bytes OccupancyIndex::place(std::uint32_t first, std::uint32_t last, Bytes size) {
  const Bytes offset = find_best_fit<QueryCheck::kChecked>(first, last, size);
  if (size != 0) record_insert(first, last, OffsetRun{offset, offset + size});
  return offset;
}

void OccupancyIndex::check_insert_count(std::size_t more) const {
  if (more > kMaxInserts - inserts_) {
    throw std::length_error("offline: more inserts than the occupancy index counts (2^32 - 2)");
  }
}

Bytes OccupancyIndex::place_next(Bytes size) {
  if (queries_done_ >= queries_.size()) throw std::logic_error("OccupancyIndex: no announced query left");
  check_insert_count(1);
  return place_announced(size);
}

Bytes OccupancyIndex::place_all(std::span<const std::uint32_t> order, const Bytes* sizes, Bytes* offsets) {
  // (Checked once for the whole loop, not per query: the queries left, and room in the insert
  // count for one insert per query, as if none were of size 0.)
  if (order.size() > queries_.size() - queries_done_) {
    throw std::logic_error("OccupancyIndex: fewer announced queries left than place_all was given");
  }
  check_insert_count(order.size());
  Bytes top = 0;
  for (const std::uint32_t k : order) {
    const Bytes size = sizes[k];  // (read once: the placement's stores could be to it, for all the compiler knows)
    const Bytes offset = place_announced(size);
    offsets[k] = offset;
    top = std::max(top, offset + size);
  }
  return top;
}

inline Bytes OccupancyIndex::place_announced(Bytes size) {
  const auto [first, last] = queries_[queries_done_];
  const Bytes offset = find_best_fit<QueryCheck::kAnnounced>(first, last, size);
  if (size != 0) record_insert<true>(first, last, OffsetRun{offset, offset + size});
  return offset;
}

template <bool announced>
inline void OccupancyIndex::record_insert(std::uint32_t first, std::uint32_t last, OffsetRun taken) {
  if (!announced) check_insert_count(1);  // (the announced ones' callers check it: see there)
  ++inserts_;
  if (announced || !queries_.empty()) {
    insert_log_[inserts_ - 1 - log_first_] = LoggedInsert{first, last, taken};  // (room: see insert_log_)
    if (inserts_ - log_first_ >= compact_at_) compact_log();  // (the log's size, from the counts at hand)
    // Deferred while the next queries read no set (they repeat one before: extend_answer reads
    // the log): a run that touches the deferred one over the same slots joins it, since a set
    // that holds both holds their union and nothing else differs. The sets are stored to when the
    // next query that reads them comes (a set whose last reader came in between has none: those
    // queries read no set), so they see the same runs.
    const bool next_repeats = reuses_[queries_done_] != 0;  // (the sentinel after the last query: none)
    if (!pending_ && !next_repeats) {                       // (the usual case: nothing deferred, nothing to defer)
      store(first, last, taken);
      return;
    }
    if (pending_ && pending_->first == first && pending_->last == last && taken.begin <= pending_->run.end &&
        pending_->run.begin <= taken.end) {
      pending_->run = OffsetRun{std::min(pending_->run.begin, taken.begin), std::max(pending_->run.end, taken.end)};
    } else {
      store_pending();
      pending_ = LoggedInsert{first, last, taken};
    }
    if (!next_repeats) store_pending();
    return;
  }
  store(first, last, taken);
}

void OccupancyIndex::store_pending() {
  if (!pending_) return;
  const LoggedInsert deferred = *pending_;
  pending_.reset();
  store(deferred.first, deferred.last, deferred.run);
}

void OccupancyIndex::store(std::uint32_t first, std::uint32_t last, OffsetRun taken) {
  // What the walks read of the members, in locals: a member is reloaded after every set insert
  // (which writes memory). The node arrays never change size after the constructor.
  NodeSets* const nodes = nodes_.data();
  CoverAge* const ages = cover_ages_.data();
  const std::size_t cached = cached_nodes_;  // (covers_.size() is a division by a Cover's 24 bytes)
  const std::uint32_t done = queries_done_;
  const std::uint32_t inserts = inserts_;
  // Whether a query to come reads a set that the queries before `read_until` read last.
  const auto later = [done](std::uint32_t read_until) { return read_until > done; };
  // Own: the canonical nodes, the bottom-up decomposition of [first, last). Only its first step
  // can meet leaves (a leaf's set is its own and begin set in one), so it is taken apart.
  const auto store_leaf = [&](NodeId v) {
    if (later(nodes[v].begins_read_until)) sets_.add_run(nodes[v].own, taken);
  };
  const auto store_own = [&](NodeId v) {
    NodeSets& node = nodes[v];
    if (later(node.own_read_until) && sets_.add_run(node.own, taken) && v < cached) {
      ages[v].own_changed_at = inserts;
    }
  };
  const NodeId first_leaf = leaves_ + first;
  NodeId lo = first_leaf;
  NodeId hi = leaves_ + last;
  // Whether the first leaf's set has the run from this walk already (the begins walk below skips it).
  bool first_leaf_stored = (first & 1) != 0 || last == first + 1;
  if (lo & 1) store_leaf(lo++);
  if (hi & 1) store_leaf(--hi);
  lo >>= 1;
  hi >>= 1;
  if (lo < hi) {  // (height 1: no own sets, the run goes to both leaves of a canonical node there)
    if (lo & 1) {
      store_leaf(2 * lo);
      store_leaf(2 * lo + 1);
      first_leaf_stored |= 2 * lo == first_leaf;
      ++lo;
    }
    if (hi & 1) {
      --hi;
      store_leaf(2 * hi);
      store_leaf(2 * hi + 1);
      first_leaf_stored |= 2 * hi == first_leaf;
    }
    for (lo >>= 1, hi >>= 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) store_own(lo++);
      if (hi & 1) store_own(--hi);
    }
  }
  // Begin: the first leaf (unless the walk above stored to it) and the begin sets of its
  // ancestors, bottom up, up to the first that held the run: a set read later has had every
  // insert so far, so when it holds the run already, so do those above it (a parent's begin set
  // holds its children's) that are read later.
  if (!first_leaf_stored && later(nodes[first_leaf].begins_read_until)) {
    sets_.add_run(nodes[first_leaf].own, taken);
  }
  for (NodeId v = first_leaf >> 1; v != 0; v >>= 1) {  // (the ancestors, up to the root)
    if (later(nodes[v].begins_read_until) && !sets_.add_run(nodes[v].begins, taken)) return;
  }
}

// ---- query ------------------------------------------------------------------------------------

std::span<const OffsetRun> OccupancyIndex::occupied(std::uint32_t first, std::uint32_t last) {
  if (!admit<QueryCheck::kChecked>(first, last))
    return extend_answer(queries_done_ - 1, reuses_[queries_done_ - 1] - 1);
  collect_parts(first, last);
  return unite_and_keep();
}

Bytes OccupancyIndex::best_fit(std::uint32_t first, std::uint32_t last, Bytes size) {
  return find_best_fit<QueryCheck::kChecked>(first, last, size);
}

template <OccupancyIndex::QueryCheck check>
inline Bytes OccupancyIndex::find_best_fit(std::uint32_t first, std::uint32_t last, Bytes size) {
  if (!admit<check>(first, last))
    return best_fit_in(extend_answer(queries_done_ - 1, reuses_[queries_done_ - 1] - 1), size);
  // A kept answer is written out for the queries that extend it; otherwise the last merge only
  // looks for the gaps (best_fit_in_union).
  const auto kept = [&] { return (check == QueryCheck::kAnnounced || !queries_.empty()) && keeps_[queries_done_ - 1]; };
  if (last - first <= 2 && !kept()) {
    return short_best_fit(first, last, size);
  }
  collect_parts(first, last);
  if (kept()) return best_fit_in(unite_and_keep(), size);
  if (parts_.at_most_one())
    return best_fit_in(parts_.empty() ? std::span<const OffsetRun>{} : sets_.runs(parts_[0]), size);
  const RunSet largest = largest_part_last();
  parts_.pop_back();
  return best_fit_in_union</*kNonEmpty=*/true>(merge_parts(), sets_.runs(largest), size);  // (non-empty parts)
}

inline Bytes OccupancyIndex::short_best_fit(std::uint32_t first, std::uint32_t last, Bytes size) {
  // The parts collect_parts would gather: the first leaf's set, the second leaf's (a begin set of
  // the range), the uncached own sets on the path, and the deepest cover, which is kept apart.
  const NodeId first_leaf = leaves_ + first;
  const auto top = static_cast<std::uint32_t>(std::bit_width(first ^ slots_)) - 1;
  const NodeId deepest = refresh_covers(first_leaf, top + 1);
  const RunSet cover = deepest != 0 ? covers_[deepest].runs : RunSet{};
  if (lowest_cached_height_ <= kLowestCachedHeight) {  // no uncached own sets: at most two leaf sets
    RunSet a = nodes_[first_leaf].own;
    RunSet b = last - first == 2 ? nodes_[first_leaf + 1].own : RunSet{};
    if (a.empty()) std::swap(a, b);
    if (a.empty()) return best_fit_in(sets_.runs(cover), size);
    if (b.empty()) return best_fit_in_union(sets_.runs(a), sets_.runs(cover), size);
    OffsetRun* const merged = scratch_for(std::size_t{a.size} + b.size)[0];
    const std::size_t runs = merge_union</*kNonEmpty=*/true>(sets_.runs(a), sets_.runs(b), merged);
    return best_fit_in_union({merged, runs}, sets_.runs(cover), size);
  }
  parts_.clear();
  add_part(nodes_[first_leaf].own);
  if (last - first == 2) add_part(nodes_[first_leaf + 1].own);
  add_uncached_own(first_leaf, 2, height_ + 1);
  switch (parts_.size()) {
    case 0:
      return best_fit_in(sets_.runs(cover), size);
    case 1:
      return best_fit_in_union(sets_.runs(parts_[0]), sets_.runs(cover), size);
    case 2: {  // (the two written out, a few runs, then scanned with the cover)
      OffsetRun* const merged = scratch_for(parts_.runs())[0];
      const std::size_t runs = merge_union</*kNonEmpty=*/true>(sets_.runs(parts_[0]), sets_.runs(parts_[1]), merged);
      return best_fit_in_union({merged, runs}, sets_.runs(cover), size);
    }
    default: {
      add_part(cover);
      const RunSet largest = largest_part_last();
      parts_.pop_back();
      return best_fit_in_union</*kNonEmpty=*/true>(merge_parts(), sets_.runs(largest), size);  // (non-empty parts)
    }
  }
}

template <OccupancyIndex::QueryCheck check>
inline bool OccupancyIndex::admit(std::uint32_t first, std::uint32_t last) {
  if constexpr (check == QueryCheck::kChecked) {
    if (first >= last || last > slots_) throw std::logic_error("OccupancyIndex: bad slot range");
  }
  if (check == QueryCheck::kAnnounced || !queries_.empty()) {
    if (check == QueryCheck::kChecked && (queries_done_ >= queries_.size() || queries_[queries_done_].first != first ||
                                          queries_[queries_done_].last != last)) {
      throw std::logic_error("OccupancyIndex: a query other than the next one it was told of");
    }
    if (reuses_[queries_done_] != 0) {
      ++queries_done_;
      return false;
    }
    store_pending();  // (before the count: the sets this query reads are read later until then)
    ++queries_done_;
  }
  return true;
}

inline void OccupancyIndex::collect_parts(std::uint32_t first, std::uint32_t last) {
  const NodeId first_leaf = leaves_ + first;
  // The covers are refreshed first, so that the parts are then gathered with no call between
  // them. The own sets of the first leaf's ancestors come through the deepest cover. (The walk
  // starts at the highest ancestor whose slots all lie below slots_: the bits above the highest
  // where `first` and slots_ differ are shared, and there slots_ has a 1 and `first` a 0. A node
  // above spans slots past the last, so no range covers it: its own set and cover stay empty, and
  // so do its ancestors'.)
  const auto top = static_cast<std::uint32_t>(std::bit_width(first ^ slots_)) - 1;
  const NodeId deepest = refresh_covers(first_leaf, top + 1);
  const NodeSets* const nodes = nodes_.data();
  Parts::Filler parts(parts_);
  // Begin: the first leaf's set, then the canonical nodes of (first, last).
  parts.add(nodes[first_leaf].own);
  NodeId lo = first_leaf + 1;
  NodeId hi = leaves_ + last;
  if (lo < hi) {  // (the first step, at the leaves: a leaf's begin set is its own set)
    if (lo & 1) parts.add(nodes[lo++].own);
    if (hi & 1) parts.add(nodes[--hi].own);
    for (lo >>= 1, hi >>= 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) parts.add(nodes[lo++].begins);
      if (hi & 1) parts.add(nodes[--hi].begins);
    }
  }
  // Own: the deepest cover, then the own sets of the uncached ancestors below it (height 1
  // keeps none).
  if (deepest != 0) parts.add(covers_[deepest].runs);
  const std::uint32_t uncached_below = std::min(height_ + 1, lowest_cached_height_);
  for (std::uint32_t height = 2; height < uncached_below; ++height) parts.add(nodes[first_leaf >> height].own);
  parts.finish();
}

std::span<const OffsetRun> OccupancyIndex::unite_and_keep() {
  const std::span<const OffsetRun> answer = unite_parts();
  if (queries_.empty() || !keeps_[queries_done_ - 1]) return answer;
  KeptAnswer& kept = kept_[(queries_done_ - 1) % kept_.size()];
  kept.runs.assign(answer.begin(), answer.end());
  kept.inserts = inserts_;
  return kept.runs;
}

void OccupancyIndex::add_uncached_own(NodeId leaf, std::uint32_t low, std::uint32_t high) {
  const std::uint32_t below = std::min(high, lowest_cached_height_);
  for (std::uint32_t height = low; height < below; ++height) {
    add_part(nodes_[leaf >> height].own);
  }
}

inline OccupancyIndex::NodeId OccupancyIndex::refresh_covers(NodeId leaf, std::uint32_t high) {
  // (The bound in a local: a member is reloaded after every call to rebuild_cover.)
  const std::uint32_t lowest = lowest_cached_height_;
  if (high <= lowest) return 0;
  // The path is walked from the highest node whose own set changed after the deepest cover was
  // built: at that build every cover on the path was made fresh, and nothing above has changed
  // since, so the covers there are still fresh and none below is stale because of them. Finding
  // it compares each node with one number; the walk below keeps the latest change and checks each
  // node's cover against it. (The scan needs no bound: the level below `lowest` holds sentinels
  // that changed after every build.)
  const std::uint32_t deepest_built = cover_ages_[leaf >> lowest].built_at;
  std::uint32_t height = high;
  while (cover_ages_[leaf >> (height - 1)].own_changed_at <= deepest_built) --height;
  std::uint32_t latest = 0;  // the latest own-set change on the path from `height` down
  for (; height > lowest;) {
    const NodeId v = leaf >> --height;
    const CoverAge age = cover_ages_[v];
    latest = std::max(latest, age.own_changed_at);
    if (age.built_at < latest) rebuild_cover(v);  // (before any insert: empty, as built)
  }
  return leaf >> lowest;
}

void OccupancyIndex::rebuild_cover(NodeId v) {
  Cover& cover = covers_[v];
  const RunSet& own = nodes_[v].own;
  const RunSet parent = covers_[v / 2].runs;  // (the root's "parent", node 0, keeps an empty cover)
  if (own.empty() || parent.empty()) {        // the cover is the other one: share its block
    cover.runs = own.empty() ? parent : own;
  } else {
    sets_.assign_union(cover.block, parent, own);
    cover.runs = cover.block;
  }
  cover_ages_[v].built_at = inserts_;
}

std::span<const OffsetRun> OccupancyIndex::unite_parts() {
  if (parts_.empty()) return {};
  if (parts_.at_most_one()) return sets_.runs(parts_[0]);  // (at least one)
  largest_part_last();
  return merge_parts();
}

RunSet OccupancyIndex::largest_part_last() {
  // The largest last, so that a large set (a cover of long-lived buffers) is merged once, at the
  // end, and not once per smaller set after it; the union is the same in any order (a sorted set
  // of disjoint, non-touching runs is unique). Only the largest is moved: a full sort of the
  // parts by size cost more than it saved in the merges (on lm2.7b -1.4 % of the plan's
  // instructions without it; the 75-step GPT2-XL trace -2.6 %).
  std::swap(parts_.largest(), parts_.back());
  return parts_.back();
}

void OccupancyIndex::grow_scratch(std::size_t runs) {
  scratch_runs_ = 2 * runs;  // (only ever grows: no new buffers per query)
  for (std::unique_ptr<OffsetRun[]>& buffer : scratch_owned_) {
    buffer = std::make_unique_for_overwrite<OffsetRun[]>(scratch_runs_);  // (never read before written)
  }
  scratch_[0] = scratch_owned_[0].get();
  scratch_[1] = scratch_owned_[1].get();
}

std::span<const OffsetRun> OccupancyIndex::merge_parts() {
  if (parts_.at_most_one()) return sets_.runs(parts_[0]);  // (at least one)
  OffsetRun* const* const buffers = scratch_for(parts_.runs());
  // Pairwise, into the two buffers in turn: the sets overlap heavily, so the union so far stays
  // about the size of the answer (a k-way heap merge costs more on a handful of sets).
  // (The buffers and the parts in locals: members are reloaded after every merge, which writes
  // memory.)
  OffsetRun* out = buffers[1];
  OffsetRun* other = buffers[0];
  const RunSet* part = parts_.begin();
  const RunSet* const parts_end = parts_.end();
  std::span<const OffsetRun> united = sets_.runs(*part);
  for (++part; part != parts_end; ++part) {
    united = {out, merge_union</*kNonEmpty=*/true>(united, sets_.runs(*part), out)};  // (parts are non-empty)
    std::swap(out, other);
  }
  return united;
}

}  // namespace fraglab::offline
