// parse_snapshot() on every snapshot layout PyTorch has written since 1.13 (allocator-model §11.2-§11.5):
// each test builds one layout by hand from its documented fields, describing the same allocator
// state, and checks the start state and events worked out by hand below. Plus the shipped 2.0-era
// dump whose blocks carry no 'address', against figures read from the file with Python.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"
#include "support/pickle_writer.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

using testing::PickleWriter;
using testing::Py;
using testing::PyDict;
using testing::PyList;
using testing::PyTuple;

// The state every layout below describes: one 20 MiB large-pool segment on device 0, stream 0:
//   [kBase,          +4 MiB)  active_allocated, 4,000,000 bytes requested
//   [kBase + 4 MiB,  +6 MiB)  inactive (a 5,000,000-byte allocation came and went in the trace)
//   [kBase + 10 MiB, +10 MiB) active_allocated, 10,000,000 bytes requested
// Layouts with a trace record: alloc 5,000,000 at kBase + 4 MiB, then its free_requested and
// free_completed (one Free, allocator-model §12.1). Blocks untouched by the trace were live from the
// start: ids 1 and 2 by address, the trace's alloc id 3.
constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kSegSize = 20 * MiB;
constexpr std::uint64_t kSizes[3] = {4 * MiB, 6 * MiB, 10 * MiB};
constexpr std::uint64_t kAddrs[3] = {kBase, kBase + 4 * MiB, kBase + 10 * MiB};
constexpr std::uint64_t kRequested[3] = {4000000, 5000000, 10000000};
constexpr const char* kStates[3] = {"active_allocated", "inactive", "active_allocated"};

const PyList kFrames = {PyDict{{"filename", "train.py"}, {"line", 12}, {"name", "step"}}};

enum class BlockStyle {
  History,           // 1.13 / 2.0: address, size, state, history [{addr, real_size}]
  HistoryNoAddress,  // 2.0-era dumps: size, requested_size, state, history; no address
  Requested,         // 2.1+: address, size, requested_size, state, frames
};

Py block(int i, BlockStyle style) {
  PyDict d;
  if (style != BlockStyle::HistoryNoAddress) d.emplace_back("address", kAddrs[i]);
  d.emplace_back("size", kSizes[i]);
  if (style != BlockStyle::History) d.emplace_back("requested_size", kRequested[i]);
  d.emplace_back("state", kStates[i]);
  if (style == BlockStyle::Requested) {
    d.emplace_back("frames", kFrames);
  } else {
    d.emplace_back("history", PyList{PyDict{{"addr", kAddrs[i]}, {"real_size", kRequested[i]}}});
  }
  return d;
}

PyList blocks(BlockStyle style) { return {block(0, style), block(1, style), block(2, style)}; }

// 1.13 / 2.0 segment keys (§11.3 without is_expandable, segment_pool_id, frames).
PyDict old_segment(PyList segment_blocks) {
  return PyDict{{"device", 0},
                {"address", kBase},
                {"total_size", kSegSize},
                {"allocated_size", 14 * MiB},
                {"active_size", 14 * MiB},
                {"stream", 0},
                {"segment_type", "large"},
                {"blocks", std::move(segment_blocks)}};
}

PyDict new_segment() {
  PyDict d = old_segment(blocks(BlockStyle::Requested));
  d.emplace_back("requested_size", 14000000);
  d.emplace_back("segment_pool_id", PyTuple{{0, 0}});
  d.emplace_back("is_expandable", false);
  d.emplace_back("frames", kFrames);
  return d;
}

// The three trace entries; extra keys are added per layout.
std::vector<PyDict> entries() {
  const std::uint64_t a = kAddrs[1], n = kRequested[1];
  return {PyDict{{"action", "alloc"}, {"addr", a}, {"size", n}, {"stream", 0}},
          PyDict{{"action", "free_requested"}, {"addr", a}, {"size", n}, {"stream", 0}},
          PyDict{{"action", "free_completed"}, {"addr", a}, {"size", n}, {"stream", 0}}};
}

PyList as_list(std::vector<PyDict> dicts) {
  PyList l;
  for (PyDict& d : dicts) l.push_back(std::move(d));
  return l;
}

Trace parse(const Py& snap, int protocol) {
  return parse_snapshot(PickleWriter(protocol).encode(snap), "/x/layout.pickle");
}

std::string parse_error(const Py& snap) {
  try {
    parse(snap, 4);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The start state all layouts share, and (when `with_trace`) the trace's alloc + Free.
void expect_described_state(const Trace& t, bool with_trace) {
  EXPECT_EQ(t.name, "layout");
  EXPECT_EQ(t.source, "pytorch-snapshot");
  ASSERT_EQ(t.initial.segments.size(), 1u);
  EXPECT_EQ(t.initial.segments[0], (InitialSegment{kBase, kSegSize, 0, false, false}));
  ASSERT_EQ(t.initial.allocations.size(), 2u);
  EXPECT_EQ(t.initial.allocations[0], (InitialAllocation{1, kAddrs[0], kRequested[0], kSizes[0], 0, false}));
  EXPECT_EQ(t.initial.allocations[1], (InitialAllocation{2, kAddrs[2], kRequested[2], kSizes[2], 0, false}));
  if (!with_trace) {
    EXPECT_TRUE(t.events.empty());
    EXPECT_EQ(t.source_entries, 0u);
    return;
  }
  EXPECT_EQ(t.source_entries, 3u);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].op, Op::Alloc);
  EXPECT_EQ(t.events[0].id, 3u);
  EXPECT_EQ(t.events[0].size, kRequested[1]);
  EXPECT_EQ(t.events[0].addr, kAddrs[1]);
  EXPECT_EQ(t.events[1].op, Op::Free);
  EXPECT_EQ(t.events[1].id, 3u);
}

TEST(SnapshotLayout, BareListOfSegmentsFrom113) {
  // pickle.dump(torch.cuda.memory_snapshot()): the list of segments alone, no trace (1.13).
  Py snap = PyList{old_segment(blocks(BlockStyle::History))};
  for (int protocol : {2, 4}) {
    SCOPED_TRACE(protocol);
    Trace t = parse(snap, protocol);
    expect_described_state(t, false);
    EXPECT_FALSE(t.allocator_conf_known);
  }
}

TEST(SnapshotLayout, DictOfSegmentsAndTracesFrom113And20) {
  // _dump_snapshot() of 1.13 / 2.0: {segments, device_traces}; entries carry frames but no
  // time_us; blocks carry history; no allocator_settings.
  std::vector<PyDict> trace = entries();
  for (PyDict& e : trace) e.emplace_back("frames", kFrames);
  Py snap =
      PyDict{{"segments", PyList{old_segment(blocks(BlockStyle::History))}}, {"device_traces", PyList{as_list(trace)}}};
  for (int protocol : {2, 4}) {
    SCOPED_TRACE(protocol);
    Trace t = parse(snap, protocol);
    expect_described_state(t, true);
    EXPECT_FALSE(t.allocator_conf_known);
    EXPECT_FALSE(t.events[0].has_time);
  }
}

TEST(SnapshotLayout, BlocksWithoutAddressTileTheirSegment) {
  // The 2.0-era layout of the shipped state-only dump: size, requested_size, state, history,
  // no address. Addresses follow from the segment's and the sizes before (§11.4): 4 MiB and
  // 10 MiB in, as the other layouts state them.
  Py snap = PyDict{{"segments", PyList{old_segment(blocks(BlockStyle::HistoryNoAddress))}},
                   {"device_traces", PyList{as_list(entries())}}};
  for (int protocol : {2, 4}) {
    SCOPED_TRACE(protocol);
    expect_described_state(parse(snap, protocol), true);
  }
}

TEST(SnapshotLayout, SettingsAndTimesFrom23) {
  // 2.3+: allocator_settings, time_us on entries, requested_size and frames on blocks,
  // is_expandable and segment_pool_id on segments.
  std::vector<PyDict> trace = entries();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    trace[i].emplace_back("time_us", static_cast<std::int64_t>(1700000000000000 + i));
    trace[i].emplace_back("frames", kFrames);
  }
  PyDict roundup;
  for (int k = 1; k <= 32768; k *= 2) roundup.emplace_back(std::to_string(k), 0);
  PyDict settings{{"PYTORCH_CUDA_ALLOC_CONF", ""},       {"max_split_size", -1},
                  {"garbage_collection_threshold", 0.0}, {"expandable_segments", false},
                  {"release_lock_on_cudamalloc", false}, {"roundup_power2_divisions", roundup}};
  Py snap = PyDict{
      {"segments", PyList{new_segment()}}, {"device_traces", PyList{as_list(trace)}}, {"allocator_settings", settings}};
  for (int protocol : {2, 4, 5}) {
    SCOPED_TRACE(protocol);
    Trace t = parse(snap, protocol);
    expect_described_state(t, true);
    EXPECT_TRUE(t.allocator_conf_known);
    EXPECT_EQ(t.allocator_conf, "");  // all defaults
    EXPECT_TRUE(t.events[0].has_time);
    EXPECT_EQ(t.events[0].time_us, 1700000000000000);
    EXPECT_EQ(t.events[1].time_us, 1700000000000001);
  }
}

TEST(SnapshotLayout, NewestKeysAreIgnored) {
  // Newest releases: compile_context and user_metadata on entries, external_annotations at the
  // top; none of them changes the allocator state.
  std::vector<PyDict> trace = entries();
  for (PyDict& e : trace) {
    e.emplace_back("time_us", 5);
    e.emplace_back("frames", kFrames);
    e.emplace_back("compile_context", "N/A");
    e.emplace_back("user_metadata", "step=3");
  }
  Py snap = PyDict{{"segments", PyList{new_segment()}},
                   {"device_traces", PyList{as_list(trace)}},
                   {"external_annotations", PyList{}}};
  expect_described_state(parse(snap, 4), true);
}

TEST(SnapshotLayout, StateOnlyDumps) {
  // _record_memory_history never enabled: every device's trace is empty, or there is none.
  for (const PyList& traces : {PyList{PyList{}}, PyList{}}) {
    Py snap = PyDict{{"segments", PyList{new_segment()}}, {"device_traces", traces}};
    expect_described_state(parse(snap, 4), false);
  }
}

TEST(SnapshotLayout, BlocksWithoutAddressThatDoNotTileAreErrors) {
  // Sizes adding up to less than total_size: the addresses cannot be known.
  PyList short_blocks = blocks(BlockStyle::HistoryNoAddress);
  short_blocks.pop_back();
  std::string msg = parse_error(PyDict{{"segments", PyList{old_segment(short_blocks)}}, {"device_traces", PyList{}}});
  EXPECT_NE(msg.find("layout.pickle: segments[0]: its blocks have no 'address' and do not tile "
                     "it: they cover 10485760 of its total_size 20971520 bytes"),
            std::string::npos)
      << msg;

  // A block running past the segment's end names that block.
  PyList long_blocks = blocks(BlockStyle::HistoryNoAddress);
  long_blocks.push_back(block(0, BlockStyle::HistoryNoAddress));
  msg = parse_error(PyDict{{"segments", PyList{old_segment(long_blocks)}}, {"device_traces", PyList{}}});
  EXPECT_NE(msg.find("layout.pickle: segments[0] block 3: no 'address', and its 4194304 bytes "
                     "from 0x7f0001400000"),
            std::string::npos)
      << msg;
}

TEST(SnapshotLayout, RealDumpWithoutBlockAddresses) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  const std::string path = (dir / "state-only-blocks-without-address.pickle").string();
  Trace t = parse_snapshot(read_file_bytes(path), path);
  // README: 1 entry (a free_completed), 112 segments, 1,851,785,216 B reserved throughout.
  // Read with a restricted Unpickler: 541 blocks not inactive, requesting 807,625,200 B in all;
  // the freed allocation adds one more (2,224,128 B). The addresses, summed, are those of the
  // blocks' newest history records plus the freed one's: the running sums found them all.
  EXPECT_EQ(t.source_entries, 1u);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].op, Op::FreeCompleted);
  EXPECT_EQ(t.initial.segments.size(), 112u);
  EXPECT_EQ(t.initial.reserved_bytes(), 1851785216u);
  EXPECT_EQ(t.initial.allocations.size(), 542u);
  std::uint64_t requested = 0, addr_sum = 0;
  for (const InitialAllocation& a : t.initial.allocations) {
    requested += a.requested;
    addr_sum += a.addr;
  }
  EXPECT_EQ(requested, 807625200u + 2224128u);
  EXPECT_EQ(addr_sum, 75958264590142976u + 140402178916352u);
}

}  // namespace
}  // namespace fraglab
