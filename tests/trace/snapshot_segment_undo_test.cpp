// The snapshot reader undoes a trace's segment_alloc/segment_free events to find the segments at
// trace start (allocator-model §12.2). Histories of only those events take a path without a
// search tree (rebuild_whole_segments in snapshot_reader.cpp); these tests hold it to the rules
// of undoing them one at a time, modelled here with a std::map as the tree path does: random
// histories on a few addresses (so that segments come back where others were), consistent ones
// and broken ones, each read as a snapshot and compared with the model: the same segments at
// start, or an error naming the same entry and the same event.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"
#include "support/pickle_writer.hpp"

namespace fraglab {
namespace {

using testing::PickleWriter;
using testing::Py;
using testing::PyDict;
using testing::PyList;
using testing::PyTuple;

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kUnit = 2 * MiB;

struct Seg {
  std::uint64_t addr, size;
};
struct Event {
  bool alloc;  // segment_alloc, else segment_free
  std::uint64_t addr, size;
};

Py segment_dict(const Seg& s) {
  return PyDict{{"device", 0},
                {"address", s.addr},
                {"total_size", s.size},
                {"allocated_size", 0},
                {"active_size", 0},
                {"requested_size", 0},
                {"stream", 0},
                {"segment_type", s.size == kUnit ? "small" : "large"},
                {"segment_pool_id", PyTuple{{0, 0}}},
                {"is_expandable", false},
                {"frames", PyList{}},
                {"blocks", PyList{}}};
}

Py entry_dict(const Event& e) {
  return PyDict{{"action", e.alloc ? "segment_alloc" : "segment_free"},
                {"addr", e.addr},
                {"size", e.size},
                {"stream", 0},
                {"frames", PyList{}}};
}

// What undoing the events newest first gives: the segments at start, or the failing entry.
struct Outcome {
  std::vector<Seg> start;
  std::optional<std::size_t> failing_entry;
  bool failing_alloc = false;
};

Outcome undo_one_at_a_time(const std::vector<Seg>& end_state, const std::vector<Event>& events) {
  std::map<std::uint64_t, std::uint64_t> ranges;  // start -> size
  for (const Seg& s : end_state) ranges.emplace(s.addr, s.size);
  Outcome out;
  for (std::size_t i = events.size(); i-- > 0;) {
    const Event& e = events[i];
    if (e.alloc) {
      auto it = ranges.find(e.addr);
      if (it == ranges.end() || it->second != e.size) {
        out.failing_entry = i;
        out.failing_alloc = true;
        return out;
      }
      ranges.erase(it);
    } else {
      auto next = ranges.lower_bound(e.addr);
      bool overlaps = next != ranges.end() && next->first < e.addr + e.size;
      if (next != ranges.begin()) {
        auto prev = std::prev(next);
        overlaps = overlaps || prev->first + prev->second > e.addr;
      }
      if (overlaps) {
        out.failing_entry = i;
        return out;
      }
      ranges.emplace(e.addr, e.size);
    }
  }
  for (const auto& [addr, size] : ranges) out.start.push_back(Seg{addr, size});
  return out;
}

// A history on `slots` units of address space: a random start state, random allocs and frees
// forward from it (each valid), then maybe one event broken.
void random_history(std::mt19937_64& rng, std::vector<Seg>& end_state, std::vector<Event>& events) {
  const std::uint64_t slots = 4 + rng() % 12;
  std::map<std::uint64_t, std::uint64_t> live;  // start unit -> units
  auto fits = [&](std::uint64_t at, std::uint64_t units) {
    if (at + units > slots) return false;
    for (const auto& [a, n] : live)
      if (a < at + units && at < a + n) return false;
    return true;
  };
  auto random_fit = [&](std::uint64_t& at, std::uint64_t& units) {
    for (int tries = 0; tries < 8; ++tries) {
      at = rng() % slots;
      units = 1 + rng() % 3;
      if (fits(at, units)) return true;
    }
    return false;
  };
  for (std::uint64_t k = rng() % 4; k > 0; --k) {
    std::uint64_t at, units;
    if (random_fit(at, units)) live.emplace(at, units);
  }
  events.clear();
  for (std::uint64_t k = rng() % 24; k > 0; --k) {
    if (!live.empty() && rng() % 2) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      events.push_back(Event{false, kBase + it->first * kUnit, it->second * kUnit});
      live.erase(it);
    } else {
      std::uint64_t at, units;
      if (!random_fit(at, units)) continue;
      live.emplace(at, units);
      events.push_back(Event{true, kBase + at * kUnit, units * kUnit});
    }
  }
  end_state.clear();
  for (const auto& [a, n] : live) end_state.push_back(Seg{kBase + a * kUnit, n * kUnit});
  if (!events.empty() && rng() % 2) {
    Event& e = events[rng() % events.size()];
    switch (rng() % 3) {
      case 0:
        e.alloc = !e.alloc;
        break;
      case 1:
        e.addr = kBase + (rng() % slots) * kUnit;
        break;
      default:
        e.size = (1 + rng() % 3) * kUnit;
        break;
    }
  }
}

TEST(SnapshotSegmentUndo, RandomHistoriesUndoAsOneAtATime) {
  std::mt19937_64 rng(18);
  std::vector<Seg> end_state;
  std::vector<Event> events;
  int failures = 0;
  for (int round = 0; round < 3000; ++round) {
    random_history(rng, end_state, events);
    PyList segments, entries;
    for (const Seg& s : end_state) segments.push_back(segment_dict(s));
    for (const Event& e : events) entries.push_back(entry_dict(e));
    if (segments.empty() && entries.empty()) continue;  // no device has data: another error
    const std::string bytes = PickleWriter(4).encode(
        PyDict{{"segments", std::move(segments)}, {"device_traces", PyList{Py(std::move(entries))}}});
    const Outcome want = undo_one_at_a_time(end_state, events);
    try {
      const Trace trace = parse_snapshot(bytes, "history.pickle");
      ASSERT_FALSE(want.failing_entry) << "round " << round << ": read, but entry " << *want.failing_entry
                                       << " cannot be undone";
      ASSERT_EQ(trace.initial.segments.size(), want.start.size()) << "round " << round;
      for (std::size_t k = 0; k < want.start.size(); ++k) {
        EXPECT_EQ(trace.initial.segments[k].addr, want.start[k].addr) << "round " << round;
        EXPECT_EQ(trace.initial.segments[k].size, want.start[k].size) << "round " << round;
        EXPECT_EQ(trace.initial.segments[k].small_pool, want.start[k].size == kUnit) << "round " << round;
      }
    } catch (const InputError& e) {
      const std::string msg = e.what();
      ASSERT_TRUE(want.failing_entry) << "round " << round << ": " << msg;
      const std::string where = "entry " + std::to_string(*want.failing_entry) + ": ";
      const std::string what = want.failing_alloc ? "segment_alloc of" : "segment_free of";
      EXPECT_NE(msg.find(where + what), std::string::npos) << "round " << round << ": " << msg;
      EXPECT_NE(msg.find("cannot be undone"), std::string::npos) << "round " << round << ": " << msg;
      ++failures;
    }
  }
  // Both kinds of history were drawn often.
  EXPECT_GT(failures, 300);
  EXPECT_LT(failures, 2700);
}

}  // namespace
}  // namespace fraglab
