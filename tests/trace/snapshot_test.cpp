// parse_snapshot(): real PyTorch snapshots against the figures their README records (computed
// from the files by other means), hand-built snapshots with known start states (allocator-model §12),
// and broken input. Hand-built snapshots are encoded by support/pickle_writer.hpp in the two
// styles PyTorch writes (protocol 2 and protocol 4/5).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
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

// ---- snapshot builders (allocator-model §11.3-§11.5) ------------------------------------------------

const PyList kFrames = {PyDict{{"filename", "train.py"}, {"line", 12}, {"name", "step"}},
                        PyDict{{"filename", "model.py"}, {"line", 40}, {"name", "forward"}}};

Py entry(const char* action, std::uint64_t addr, std::uint64_t size, std::uint64_t stream = 0,
         std::int64_t time_us = -1) {
  PyDict d{{"action", action}, {"addr", addr}, {"size", size}, {"stream", stream}};
  if (time_us >= 0) d.emplace_back("time_us", time_us);
  d.emplace_back("compile_context", "N/A");
  d.emplace_back("frames", kFrames);
  return d;
}

Py block(std::uint64_t addr, std::uint64_t size, std::uint64_t requested, const char* state) {
  return PyDict{
      {"address", addr}, {"size", size}, {"requested_size", requested}, {"state", state}, {"frames", PyList{}}};
}

Py segment(std::uint64_t device, std::uint64_t addr, std::uint64_t total, std::uint64_t stream, const char* type,
           PyList blocks, bool expandable = false) {
  return PyDict{{"device", device},
                {"address", addr},
                {"total_size", total},
                {"allocated_size", 0},
                {"active_size", 0},
                {"requested_size", 0},
                {"stream", stream},
                {"segment_type", type},
                {"segment_pool_id", PyTuple{{0, 0}}},
                {"is_expandable", expandable},
                {"frames", PyList{}},
                {"blocks", std::move(blocks)}};
}

PyDict default_settings() {
  PyDict roundup;
  for (int k = 1; k <= 32768; k *= 2) roundup.emplace_back(std::to_string(k), 0);
  return PyDict{{"PYTORCH_CUDA_ALLOC_CONF", ""},       {"max_split_size", -1},
                {"garbage_collection_threshold", 0.0}, {"expandable_segments", false},
                {"release_lock_on_cudamalloc", false}, {"roundup_power2_divisions", roundup}};
}

Py snapshot(PyList segments, std::vector<PyList> traces, bool with_settings = true) {
  PyList device_traces;
  for (auto& t : traces) device_traces.push_back(std::move(t));
  PyDict d{{"segments", std::move(segments)}, {"device_traces", std::move(device_traces)}};
  if (with_settings) {
    d.emplace_back("allocator_settings", default_settings());
    d.emplace_back("external_annotations", PyList{});
  }
  return d;
}

Trace parse(const Py& snap, int protocol = 4, int device = -1) {
  std::string bytes = PickleWriter(protocol).encode(snap);
  TraceReadOptions options;
  options.device_index = device;
  return parse_snapshot(bytes, "/some/dir/hand-built.pickle", options);
}

std::string parse_error(const Py& snap, int device = -1) {
  try {
    parse(snap, 4, device);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

constexpr std::uint64_t kBase = 0x7f0000000000;

// ---- real snapshots --------------------------------------------------------------------------

// The README's table (../shared/traces/real/README.md), plus counts read from the files with
// Python's pickle module (a restricted Unpickler) while writing these tests: allocs, the
// free_requested/free_completed pairs that become one Free, and the allocations live at start.
struct RealFile {
  const char* file;
  std::uint64_t entries;
  std::uint64_t reserved_start, peak_reserved, reserved_end;
  std::uint64_t segment_allocs, segment_frees;
  std::uint64_t allocs, joined_frees, initial_allocations;
  bool has_settings, has_time;
};
const RealFile kRealFiles[] = {
    {"finetune-step-oldformat.pickle", 10307, 1400897536, 6471811072, 6471811072, 152, 0, 3505, 3325, 622, false,
     false},
    {"gpt2medium-ctx128-train-cutoff.pickle", 19136, 7235174400, 7235174400, 7235174400, 0, 0, 6526, 6305, 438 + 226,
     true, true},
    {"lm-forward-bf16-nosegments.pickle", 2811, 861929472, 861929472, 861929472, 0, 0, 937, 937, 137, true, true},
    {"lm2.7b-ctx128-fullstep.pickle", 19342, 13763608576, 61111009280, 61111009280, 783, 0, 6771, 5894, 324, true,
     true},
    {"lm2.7b-ctx512-forward-bf16.pickle", 6765, 28848422912, 40514879488, 40514879488, 638, 597, 2702, 1414, 325, true,
     true},
    {"tiny-segments.pickle", 97, 0, 3781165056, 3781165056, 9, 0, 36, 26, 0, true, true},
};

TEST(SnapshotReal, FiguresMatchTheReadme) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  for (const RealFile& f : kRealFiles) {
    SCOPED_TRACE(f.file);
    const std::string path = (dir / f.file).string();
    Trace t = parse_snapshot(read_file_bytes(path), path);
    EXPECT_EQ(t.source, "pytorch-snapshot");
    EXPECT_EQ(t.name + ".pickle", f.file);
    EXPECT_EQ(t.source_entries, f.entries);
    EXPECT_EQ(t.events.size(), f.entries - f.joined_frees);

    std::uint64_t reserved = t.initial.reserved_bytes();
    EXPECT_EQ(reserved, f.reserved_start);
    std::uint64_t peak = reserved, seg_allocs = 0, seg_frees = 0, allocs = 0, frees = 0;
    bool any_time = false;
    for (const Event& e : t.events) {
      any_time = any_time || e.has_time;
      switch (e.op) {
        case Op::SegmentAlloc:
        case Op::SegmentMap:
          seg_allocs += e.op == Op::SegmentAlloc;
          reserved += e.size;
          peak = std::max(peak, reserved);
          break;
        case Op::SegmentFree:
        case Op::SegmentUnmap:
          seg_frees += e.op == Op::SegmentFree;
          reserved -= e.size;
          break;
        case Op::Alloc:
          ++allocs;
          break;
        case Op::Free:
          ++frees;
          break;
        default:
          break;
      }
    }
    EXPECT_EQ(peak, f.peak_reserved);
    EXPECT_EQ(reserved, f.reserved_end);
    EXPECT_EQ(seg_allocs, f.segment_allocs);
    EXPECT_EQ(seg_frees, f.segment_frees);
    EXPECT_EQ(allocs, f.allocs);
    EXPECT_EQ(frees, f.joined_frees);
    EXPECT_EQ(t.initial.allocations.size(), f.initial_allocations);
    EXPECT_EQ(any_time, f.has_time);
    EXPECT_EQ(t.allocator_conf_known, f.has_settings);
    EXPECT_EQ(t.allocator_conf, "");  // every real file ran with default settings

    // Ids: initial allocations 1..k by address, trace allocs after, in order.
    for (std::size_t i = 0; i < t.initial.allocations.size(); ++i) {
      EXPECT_EQ(t.initial.allocations[i].id, i + 1);
      if (i) {
        EXPECT_LT(t.initial.allocations[i - 1].addr, t.initial.allocations[i].addr);
      }
    }
    AllocId next = t.initial.allocations.size() + 1;
    for (const Event& e : t.events)
      if (e.op == Op::Alloc) {
        EXPECT_EQ(e.id, next++);
      }
    for (std::size_t i = 1; i < t.initial.segments.size(); ++i)
      EXPECT_LT(t.initial.segments[i - 1].addr, t.initial.segments[i].addr);
  }
}

TEST(SnapshotReal, CutOffTraceStartsWithLiveAllocations) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  const std::string path = (dir / "gpt2medium-ctx128-train-cutoff.pickle").string();
  Trace t = parse_snapshot(read_file_bytes(path), path);
  // 438 allocations are freed in the trace without being allocated in it (block size unknown),
  // 226 are still live at the end and never touched (block size from the snapshot).
  std::size_t unknown_block = 0, known_block = 0;
  for (const InitialAllocation& a : t.initial.allocations) {
    (a.block_size ? known_block : unknown_block)++;
    EXPECT_GT(a.requested, 0u);
    EXPECT_FALSE(a.free_requested);
    if (a.block_size) {
      EXPECT_GE(a.block_size, a.requested);
    }
  }
  EXPECT_EQ(unknown_block, 438u);
  EXPECT_EQ(known_block, 226u);
  EXPECT_EQ(t.initial.segments.size(), 377u);  // no segment events: the snapshot's own
}

TEST(SnapshotReal, EmptyCacheBurstIsUndone) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  const std::string path = (dir / "lm2.7b-ctx512-forward-bf16.pickle").string();
  Trace t = parse_snapshot(read_file_bytes(path), path);
  // 868 segments at the end, 638 of them allocated in the trace, 597 freed before: 827 at start.
  EXPECT_EQ(t.initial.segments.size(), 868u - 638u + 597u);
  // The trace starts with the 597 segment_free of an empty_cache().
  for (std::size_t i = 0; i < 597; ++i) ASSERT_EQ(t.events[i].op, Op::SegmentFree) << i;
}

// ---- hand-built snapshots with known start states --------------------------------------------

TEST(SnapshotHandBuilt, FreeWithoutAllocIsAnInitialAllocation) {
  const std::uint64_t a = kBase, b = kBase + 4096, c = kBase + 8192;
  Py snap = snapshot(
      {segment(0, kBase, 2 * MiB, 0, "small",
               {block(a, 4096, 100, "inactive"), block(b, 4096, 200, "inactive"),
                block(c, 2 * MiB - 8192, 300, "active_allocated")})},
      {{entry("free_requested", b, 200, 0, 10), entry("free_completed", b, 200, 0, 11), entry("alloc", c, 300, 0, 12),
        entry("free_completed", a, 100, 0, 13)}});  // a: freed before, completing now
  for (int protocol : {2, 4, 5}) {
    SCOPED_TRACE(protocol);
    Trace t = parse(snap, protocol);
    ASSERT_EQ(t.initial.allocations.size(), 2u);
    // Address order: a (id 1), b (id 2); the trace's alloc gets id 3.
    EXPECT_EQ(t.initial.allocations[0], (InitialAllocation{1, a, 100, 0, 0, true}));  // pending at start
    EXPECT_EQ(t.initial.allocations[1], (InitialAllocation{2, b, 200, 0, 0, false}));
    ASSERT_EQ(t.events.size(), 3u);
    EXPECT_EQ(t.events[0].op, Op::Free);
    EXPECT_EQ(t.events[0].id, 2u);
    EXPECT_TRUE(t.events[0].has_time);
    EXPECT_EQ(t.events[0].time_us, 10);
    EXPECT_EQ(t.events[1].op, Op::Alloc);
    EXPECT_EQ(t.events[1].id, 3u);
    EXPECT_EQ(t.events[1].size, 300u);
    EXPECT_EQ(t.events[1].addr, c);
    EXPECT_TRUE(t.events[1].has_addr);
    EXPECT_EQ(t.events[2].op, Op::FreeCompleted);
    EXPECT_EQ(t.events[2].id, 1u);
    EXPECT_EQ(t.source_entries, 4u);
    ASSERT_EQ(t.initial.segments.size(), 1u);
    EXPECT_EQ(t.initial.segments[0], (InitialSegment{kBase, 2 * MiB, 0, true, false}));
    EXPECT_EQ(t.name, "hand-built");
    EXPECT_TRUE(t.allocator_conf_known);
    EXPECT_EQ(t.allocator_conf, "");
  }
}

TEST(SnapshotHandBuilt, PendingFreeBlockAtStart) {
  const std::uint64_t seg = kBase, p = seg, q = seg + 4 * MiB, r = seg + 8 * MiB;
  Py snap = snapshot(
      {segment(0, seg, 20 * MiB, 7, "large",
               {block(p, 4 * MiB, 4000000, "active_pending_free"), block(q, 4 * MiB, 3000000, "active_pending_free"),
                block(r, 12 * MiB, 5000000, "active_allocated")})},
      {{entry("alloc", q, 3000000, 7), entry("free_requested", q, 3000000, 7), entry("alloc", 0x1000, 10, 7),
        entry("free_requested", 0x1000, 10, 7), entry("free_completed", 0x1000, 10, 7)}});
  Trace t = parse(snap);
  // p: pending for the whole trace, never touched: from the snapshot, with its block size.
  // q: allocated in the trace and still pending at the end: no initial allocation.
  // r: live through the trace: from the snapshot.
  ASSERT_EQ(t.initial.allocations.size(), 2u);
  EXPECT_EQ(t.initial.allocations[0], (InitialAllocation{1, p, 4000000, 4 * MiB, 7, true}));
  EXPECT_EQ(t.initial.allocations[1], (InitialAllocation{2, r, 5000000, 12 * MiB, 7, false}));
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[0].id, 3u);
  EXPECT_EQ(t.events[1].op, Op::FreeRequested);  // not followed by its free_completed
  EXPECT_EQ(t.events[1].id, 3u);
  EXPECT_EQ(t.events[3].op, Op::Free);  // the joined pair
  EXPECT_EQ(t.events[3].id, 4u);
  EXPECT_EQ(t.initial.segments[0], (InitialSegment{seg, 20 * MiB, 7, false, false}));
}

TEST(SnapshotHandBuilt, SegmentFreeOfASegmentNeverSeenAllocated) {
  // A ring buffer cut: the trace frees segments it never saw allocated (allocator-model §11.6).
  Py snap =
      snapshot({segment(0, kBase + 100 * MiB, 20 * MiB, 0, "large", {})},
               {{entry("segment_free", kBase, 2 * MiB, 3), entry("segment_free", kBase + 20 * MiB, 40 * MiB, 3)}});
  Trace t = parse(snap);
  ASSERT_EQ(t.initial.segments.size(), 3u);
  EXPECT_EQ(t.initial.segments[0], (InitialSegment{kBase, 2 * MiB, 3, true, false}));
  EXPECT_EQ(t.initial.segments[1], (InitialSegment{kBase + 20 * MiB, 40 * MiB, 3, false, false}));
  EXPECT_EQ(t.initial.segments[2], (InitialSegment{kBase + 100 * MiB, 20 * MiB, 0, false, false}));
  EXPECT_EQ(t.initial.reserved_bytes(), 62 * MiB);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[1], (Event{Op::SegmentFree, true, false, 0, kNoString, 0, 40 * MiB, 3, kBase + 20 * MiB, 0}));
}

TEST(SnapshotHandBuilt, EmptyCacheBurstThenRegrowth) {
  // Start: segments S1, S2, S3. empty_cache frees all three, then S1's address is reused by a new
  // 60 MiB segment and a fourth appears. End: the two new ones.
  const std::uint64_t s1 = kBase, s2 = kBase + 20 * MiB, s3 = kBase + 40 * MiB, s4 = kBase + 200 * MiB;
  Py snap = snapshot(
      {segment(0, s1, 60 * MiB, 0, "large", {block(s1, 60 * MiB, 1, "inactive")}),
       segment(0, s4, 2 * MiB, 0, "small", {block(s4, 2 * MiB, 1, "inactive")})},
      {{entry("segment_free", s1, 20 * MiB), entry("segment_free", s2, 20 * MiB), entry("segment_free", s3, 2 * MiB),
        entry("segment_alloc", s1, 60 * MiB), entry("segment_alloc", s4, 2 * MiB)}});
  Trace t = parse(snap);
  ASSERT_EQ(t.initial.segments.size(), 3u);
  EXPECT_EQ(t.initial.segments[0], (InitialSegment{s1, 20 * MiB, 0, false, false}));
  EXPECT_EQ(t.initial.segments[1], (InitialSegment{s2, 20 * MiB, 0, false, false}));
  EXPECT_EQ(t.initial.segments[2], (InitialSegment{s3, 2 * MiB, 0, true, false}));
  EXPECT_EQ(t.initial.reserved_bytes(), 42 * MiB);
  EXPECT_TRUE(t.initial.allocations.empty());
}

TEST(SnapshotHandBuilt, ExpandableSegmentMapAndUnmapAreUndone) {
  // Start: mapped runs [X, X+40) and [X+60, X+80) MiB (stream 5), and a lone small-pool page P.
  // Trace: map [X+40, X+60) (the runs join), unmap [X, X+20), map [X+100, X+120),
  //        unmap P (2 MiB).
  // End: runs [X+20, X+80) and [X+100, X+120).
  const std::uint64_t x = kBase, p = kBase + 500 * MiB;
  Py snap =
      snapshot({segment(0, x + 20 * MiB, 60 * MiB, 5, "large", {block(x + 20 * MiB, 60 * MiB, 1, "inactive")}, true),
                segment(0, x + 100 * MiB, 20 * MiB, 5, "large", {block(x + 100 * MiB, 20 * MiB, 1, "inactive")}, true)},
               {{entry("segment_map", x + 40 * MiB, 20 * MiB, 5), entry("segment_unmap", x, 20 * MiB, 5),
                 entry("segment_map", x + 100 * MiB, 20 * MiB, 5), entry("segment_unmap", p, 2 * MiB, 5)}});
  for (int protocol : {2, 4}) {
    Trace t = parse(snap, protocol);
    ASSERT_EQ(t.initial.segments.size(), 3u);
    EXPECT_EQ(t.initial.segments[0], (InitialSegment{x, 40 * MiB, 5, false, true}));
    EXPECT_EQ(t.initial.segments[1], (InitialSegment{x + 60 * MiB, 20 * MiB, 5, false, true}));
    EXPECT_EQ(t.initial.segments[2], (InitialSegment{p, 2 * MiB, 5, true, true}));
    // Reserved timeline: start 62 MiB; +20 -20 +20 -2 = end 80 MiB = Σ snapshot total_size.
    EXPECT_EQ(t.initial.reserved_bytes(), 62 * MiB);
    ASSERT_EQ(t.events.size(), 4u);
    EXPECT_EQ(t.events[0].op, Op::SegmentMap);
    EXPECT_EQ(t.events[3].op, Op::SegmentUnmap);
  }
}

TEST(SnapshotHandBuilt, TwoDevicesNeedAnIndex) {
  Py snap = snapshot(
      {segment(0, kBase, 2 * MiB, 0, "small", {}),
       segment(1, kBase + GiB, 20 * MiB, 0, "large", {block(kBase + GiB, 20 * MiB, 1000, "active_allocated")}),
       segment(1, kBase + 2 * GiB, 20 * MiB, 0, "large", {})},
      {{entry("alloc", kBase, 512, 0), entry("free_requested", kBase, 512, 0), entry("free_completed", kBase, 512, 0)},
       {entry("segment_alloc", kBase + 2 * GiB, 20 * MiB, 0)},
       {}});
  std::string msg = parse_error(snap);
  EXPECT_NE(msg.find("hand-built.pickle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("several devices (0, 1)"), std::string::npos) << msg;

  Trace d0 = parse(snap, 4, 0);
  EXPECT_EQ(d0.events.size(), 2u);
  EXPECT_EQ(d0.initial.segments.size(), 1u);
  Trace d1 = parse(snap, 4, 1);
  ASSERT_EQ(d1.events.size(), 1u);
  EXPECT_EQ(d1.events[0].device, 1u);
  ASSERT_EQ(d1.initial.segments.size(), 1u);  // the other one is allocated in the trace
  EXPECT_EQ(d1.initial.segments[0].addr, kBase + GiB);
  ASSERT_EQ(d1.initial.allocations.size(), 1u);
  EXPECT_EQ(d1.initial.allocations[0].requested, 1000u);

  msg = parse_error(snap, 2);
  EXPECT_NE(msg.find("device 2 has no trace entries and no segments"), std::string::npos) << msg;
  msg = parse_error(snap, 5);
  EXPECT_NE(msg.find("device 5"), std::string::npos) << msg;
}

TEST(SnapshotHandBuilt, OldHistoryLayout) {
  // 1.13/2.0: blocks carry history [{addr, real_size, frames}], no requested_size; entries have
  // no time_us; no allocator_settings; segments have no is_expandable.
  PyDict old_block{{"address", kBase},
                   {"size", 1 * MiB},
                   {"state", "active_allocated"},
                   {"history", PyList{PyDict{{"addr", kBase}, {"real_size", 1000}, {"frames", kFrames}},
                                      PyDict{{"addr", kBase}, {"real_size", 999000}, {"frames", kFrames}}}}};
  PyDict old_segment{{"device", 0},
                     {"address", kBase},
                     {"total_size", 2 * MiB},
                     {"allocated_size", 1 * MiB},
                     {"active_size", 1 * MiB},
                     {"stream", 0},
                     {"segment_type", "small"},
                     {"blocks", PyList{old_block}}};
  PyDict old_entry{{"action", "alloc"}, {"addr", kBase + MiB}, {"size", 4}, {"stream", 0}, {"frames", kFrames}};
  Py snap = snapshot({old_segment}, {{old_entry}}, /*with_settings=*/false);
  for (int protocol : {2, 4}) {
    Trace t = parse(snap, protocol);
    EXPECT_FALSE(t.allocator_conf_known);
    ASSERT_EQ(t.initial.allocations.size(), 1u);
    EXPECT_EQ(t.initial.allocations[0], (InitialAllocation{1, kBase, 999000, 1 * MiB, 0, false}));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_FALSE(t.events[0].has_time);
    EXPECT_EQ(t.events[0].id, 2u);
  }
}

TEST(SnapshotHandBuilt, NewerKeysAreIgnored) {
  // host_segments / host_traces (pinned memory), user_metadata, annotations: no effect.
  Py base = snapshot({segment(0, kBase, 20 * MiB, 0, "large", {})}, {{entry("segment_alloc", kBase, 20 * MiB)}});
  PyDict snap = std::get<PyDict>(base.v);
  snap.emplace_back("host_segments", PyList{PyDict{{"address", 1}}});
  snap.emplace_back("host_traces", PyList{PyList{}});
  snap.emplace_back("external_annotations",
                    PyList{PyDict{{"stage", "START"}, {"name", "x"}, {"device", 0}, {"time_us", 5}}});
  Trace t = parse(Py(snap));
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].op, Op::SegmentAlloc);
}

TEST(SnapshotHandBuilt, SkippedEntriesAndOom) {
  PyDict oom{{"action", "oom"}, {"device_free", 123456}, {"size", 40 * MiB}, {"stream", 9}, {"frames", PyList{}}};
  PyDict annotate{{"action", "annotate"}, {"addr", kBase}, {"frames", PyList{}}};
  Py snap = snapshot({segment(0, kBase, 20 * MiB, 9, "large", {})},
                     {{entry("snapshot", 0, 77), entry("user_defined", 0, 0), Py(annotate), Py(oom),
                       entry("segment_alloc", kBase, 20 * MiB, 9)}});
  Trace t = parse(snap);
  EXPECT_EQ(t.source_entries, 5u);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].op, Op::Oom);
  EXPECT_EQ(t.events[0].size, 40 * MiB);
  EXPECT_EQ(t.events[0].addr, 123456u);  // device_free
  EXPECT_EQ(t.events[0].stream, 9u);
  EXPECT_EQ(t.events[1].op, Op::SegmentAlloc);
}

TEST(SnapshotHandBuilt, SeparatedFreeRequestIsNotJoined) {
  Py snap =
      snapshot({}, {{entry("alloc", kBase, 512, 1), entry("free_requested", kBase, 512, 1),
                     entry("alloc", kBase + 512, 512, 1), entry("free_completed", kBase, 512, 1),
                     entry("free_requested", kBase + 512, 512, 1), entry("free_completed", kBase + 512, 512, 1)}});
  Trace t = parse(snap);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[1].op, Op::FreeRequested);
  EXPECT_EQ(t.events[3].op, Op::FreeCompleted);
  EXPECT_EQ(t.events[3].id, 1u);
  EXPECT_EQ(t.events[4].op, Op::Free);
  EXPECT_EQ(t.events[4].id, 2u);
  EXPECT_EQ(t.source_entries, 6u);
}

TEST(SnapshotHandBuilt, AllocatorSettingsBecomeAnAllocConf) {
  PyDict s = default_settings();
  auto set = [&](const char* key, Py v) {
    for (auto& [k, val] : s)
      if (std::get<std::string>(k.v) == key) {
        val = std::move(v);
        return;
      }
    s.emplace_back(key, std::move(v));
  };
  PyDict roundup;
  for (int k = 1; k <= 32768; k *= 2) roundup.emplace_back(std::to_string(k), k >= 256 ? 4 : 1);
  set("max_split_size", std::int64_t{256 * MiB});
  set("roundup_power2_divisions", roundup);
  set("garbage_collection_threshold", 0.6);
  set("expandable_segments", true);
  set("max_non_split_rounding", std::int64_t{20 * MiB});  // the default: not written
  set("large_segment_size", std::int64_t{64 * MiB});
  PyDict snap{{"segments", PyList{segment(0, kBase, 20 * MiB, 0, "large", {})}},
              {"device_traces", PyList{PyList{}}},
              {"allocator_settings", s}};
  Trace t = parse(Py(snap));
  EXPECT_TRUE(t.allocator_conf_known);
  EXPECT_EQ(t.allocator_conf,
            "max_split_size_mb:256,roundup_power2_divisions:[1:1,2:1,4:1,8:1,16:1,32:1,64:1,"
            "128:1,256:4,512:4,1024:4,2048:4,4096:4,8192:4,16384:4,32768:4],"
            "garbage_collection_threshold:0.6,expandable_segments:True,large_segment_size_mb:64");
}

TEST(SnapshotHandBuilt, ProtocolsGiveTheSameTrace) {
  Py snap =
      snapshot({segment(0, kBase, 20 * MiB, 0, "large",
                        {block(kBase, 10 * MiB, 10 * MiB - 5, "active_allocated"),
                         block(kBase + 10 * MiB, 10 * MiB, 0, "inactive")})},
               {{entry("segment_alloc", kBase, 20 * MiB, 0, 1), entry("alloc", kBase + 10 * MiB, 4000, 0, 2),
                 entry("free_requested", kBase + 10 * MiB, 4000, 0, 3),
                 entry("free_completed", kBase + 10 * MiB, 4000, 0, 4), entry("alloc", kBase, 10 * MiB - 5, 0, 5)}});
  Trace p2 = parse(snap, 2), p4 = parse(snap, 4), p5 = parse(snap, 5);
  EXPECT_EQ(p2, p4);
  EXPECT_EQ(p4, p5);
  EXPECT_TRUE(p4.initial.empty());
}

// ---- broken input ----------------------------------------------------------------------------

TEST(SnapshotBroken, UnknownActionNamesTheEntry) {
  Py snap = snapshot({}, {{entry("segment_alloc", kBase, 20 * MiB), entry("teleport", kBase, 1)}});
  std::string msg = parse_error(snap);
  EXPECT_NE(msg.find("hand-built.pickle: device_traces[0] entry 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown action 'teleport'"), std::string::npos) << msg;
}

TEST(SnapshotBroken, MissingKeysAndWrongTypes) {
  PyDict no_addr{{"action", "alloc"}, {"size", 4}, {"stream", 0}};
  std::string msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), Py(no_addr)}}));
  EXPECT_NE(msg.find("entry 1: (alloc) missing key 'addr'"), std::string::npos) << msg;

  // Each action needs its own keys: an oom names device_free, not addr, and may omit stream.
  PyDict no_stream{{"action", "free_requested"}, {"addr", kBase}, {"size", 8}};
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), Py(no_stream)}}));
  EXPECT_NE(msg.find("entry 1: (free_requested) missing key 'stream'"), std::string::npos) << msg;
  PyDict oom_no_free{{"action", "oom"}, {"addr", kBase}, {"size", 8}, {"stream", 0}};
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), Py(oom_no_free)}}));
  EXPECT_NE(msg.find("entry 1: (oom) missing key 'device_free'"), std::string::npos) << msg;
  PyDict oom_no_size{{"action", "oom"}, {"device_free", 1024}};
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), Py(oom_no_size)}}));
  EXPECT_NE(msg.find("entry 1: (oom) missing key 'size'"), std::string::npos) << msg;

  PyDict str_size{{"action", "alloc"}, {"addr", kBase}, {"size", "big"}, {"stream", 0}};
  msg = parse_error(snapshot({}, {{Py(str_size)}}));
  EXPECT_NE(msg.find("entry 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("key 'size': expected a non-negative int, got str"), std::string::npos) << msg;

  PyDict no_action{{"addr", kBase}};
  msg = parse_error(snapshot({}, {{Py(no_action)}}));
  EXPECT_NE(msg.find("missing key 'action'"), std::string::npos) << msg;

  PyDict no_traces{{"segments", PyList{}}};
  msg = parse_error(Py(no_traces));
  EXPECT_NE(msg.find("snapshot: missing key 'device_traces'"), std::string::npos) << msg;

  // A list at the top is 1.13's list of segments (snapshot_layouts_test.cpp); anything else is
  // no snapshot.
  msg = parse_error(Py(7));
  EXPECT_NE(msg.find("hand-built.pickle: snapshot: expected a dict with 'segments' and "
                     "'device_traces'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("got int"), std::string::npos) << msg;

  Py bad_state = snapshot({segment(0, kBase, 2 * MiB, 0, "small", {block(kBase, 2 * MiB, 1, "haunted")})}, {{}});
  msg = parse_error(bad_state);
  EXPECT_NE(msg.find("segments[0] block 0: unknown block state 'haunted'"), std::string::npos) << msg;

  PyDict seg = std::get<PyDict>(segment(0, kBase, 2 * MiB, 0, "small", {}).v);
  seg.erase(seg.begin() + 2);  // total_size
  msg = parse_error(snapshot({Py(seg)}, {{}}));
  EXPECT_NE(msg.find("segments[0]: missing key 'total_size'"), std::string::npos) << msg;

  msg = parse_error(snapshot({}, {{}}));
  EXPECT_NE(msg.find("no device has trace entries or segments"), std::string::npos) << msg;
}

TEST(SnapshotBroken, InconsistentSnapshotAndTrace) {
  // segment_alloc of a segment the end state does not have.
  std::string msg = parse_error(snapshot({}, {{entry("segment_alloc", kBase, 20 * MiB)}}));
  EXPECT_NE(msg.find("entry 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot be undone"), std::string::npos) << msg;
  // An alloc at an address still allocated.
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), entry("alloc", kBase, 8)}}));
  EXPECT_NE(msg.find("entry 1: alloc at 0x7f0000000000, which is still allocated"), std::string::npos) << msg;
  // A block active at the end at an address the trace freed and never re-allocated.
  msg = parse_error(
      snapshot({segment(0, kBase, 2 * MiB, 0, "small", {block(kBase, 2 * MiB, 8, "active_allocated")})},
               {{entry("alloc", kBase, 8), entry("free_requested", kBase, 8), entry("free_completed", kBase, 8)}}));
  EXPECT_NE(msg.find("snapshot and trace disagree"), std::string::npos) << msg;
  // A double free is caught by validate_trace.
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, 8), entry("free_requested", kBase, 8),
                                   entry("free_requested", kBase, 8), entry("free_completed", kBase, 8)}}));
  EXPECT_FALSE(msg.empty());
}

TEST(SnapshotBroken, ImpossibleSizesAndRanges) {
  // Segment arithmetic must never wrap: absurd sizes and ranges past 2^64 are errors.
  std::string msg = parse_error(snapshot({segment(0, kBase, 20 * MiB, 0, "large", {})},
                                         {{entry("segment_free", kBase + GiB, std::uint64_t{1} << 62)}}));
  EXPECT_NE(msg.find("entry 0: impossible segment range"), std::string::npos) << msg;
  msg = parse_error(snapshot({segment(0, ~std::uint64_t{0} - 4095, 20 * MiB, 0, "large", {})}, {{}}));
  EXPECT_NE(msg.find("segments[0]: impossible segment"), std::string::npos) << msg;
  // An allocation of an exabyte is caught by validate_trace.
  msg = parse_error(snapshot({}, {{entry("alloc", kBase, std::uint64_t{1} << 61)}}));
  EXPECT_NE(msg.find("impossible size"), std::string::npos) << msg;
}

TEST(SnapshotBroken, AllocationOutsideEverySegment) {
  // A block active at the end in a segment the trace allocated, but never allocated itself.
  std::string msg =
      parse_error(snapshot({segment(0, kBase, 20 * MiB, 0, "large", {block(kBase, 20 * MiB, 8, "active_allocated")})},
                           {{entry("segment_alloc", kBase, 20 * MiB)}}));
  EXPECT_NE(msg.find("lies in no segment that exists at trace start"), std::string::npos) << msg;
}

TEST(SnapshotBroken, HostilePicklesAreRefused) {
  for (const std::string& bytes :
       {std::string("cos\nsystem\n(S'echo hi'\ntR."), std::string("\x80\x04\x8c\x05posix\x8c\x06system\x93.", 19)}) {
    try {
      parse_snapshot(bytes, "evil.pickle");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("evil.pickle: pickle byte"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("GLOBAL"), std::string::npos) << e.what();
    }
  }
}

TEST(SnapshotBroken, EveryTruncationOfASnapshotFails) {
  Py snap = snapshot({segment(0, kBase, 2 * MiB, 0, "small", {block(kBase, 1024, 1000, "active_allocated")})},
                     {{entry("alloc", kBase + 1024, 100), entry("free_requested", kBase + 1024, 100),
                       entry("free_completed", kBase + 1024, 100)}});
  for (int protocol : {2, 4}) {
    std::string whole = PickleWriter(protocol).encode(snap);
    EXPECT_NO_THROW(parse_snapshot(whole, "cut.pickle"));
    for (std::size_t n = 0; n < whole.size(); ++n) {
      std::unique_ptr<char[]> buf(new char[n ? n : 1]);
      if (n) std::memcpy(buf.get(), whole.data(), n);
      EXPECT_THROW(parse_snapshot(std::string_view(buf.get(), n), "cut.pickle"), InputError) << n;
    }
  }
}

}  // namespace
}  // namespace fraglab
