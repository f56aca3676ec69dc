// The snapshot reader checks validate_trace()'s event rules while it makes the events (it tracks
// each address's allocation anyway) and skips validate_trace()'s own walk over them when it found
// nothing (snapshot_reader.cpp, check_read). Compared here with the general path: every trace it
// accepts, real or hand-written around the edge cases of that tracking, passes validate_trace()
// run again; every trace that breaks a rule gets validate_trace()'s message, written out below
// from its rules (trace.hpp, live_allocations.hpp) and the ids the reader gives (trace allocations
// k+1.., after k initial ones).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

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

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr const char* kOrigin = "proven.pickle";

Py entry(const char* action, std::uint64_t addr, std::uint64_t size) {
  return PyDict{{"action", action}, {"addr", addr}, {"size", size}, {"stream", 0}, {"frames", PyList{}}};
}

Py oom(std::uint64_t size) {
  return PyDict{{"action", "oom"}, {"device_free", 4096}, {"size", size}, {"stream", 0}, {"frames", PyList{}}};
}

Py block(std::uint64_t addr, std::uint64_t size, std::uint64_t requested, const char* state) {
  return PyDict{
      {"address", addr}, {"size", size}, {"requested_size", requested}, {"state", state}, {"frames", PyList{}}};
}

// One 20 MiB large-pool segment at kBase holding `blocks`, and one device trace.
std::string snapshot_bytes(PyList entries, PyList blocks = {block(kBase, 20 * MiB, 0, "inactive")}) {
  PyDict segment{{"device", 0},
                 {"address", kBase},
                 {"total_size", 20 * MiB},
                 {"stream", 0},
                 {"segment_type", "large"},
                 {"segment_pool_id", PyTuple{{0, 0}}},
                 {"is_expandable", false},
                 {"blocks", std::move(blocks)}};
  PyList device_traces;
  device_traces.push_back(Py(std::move(entries)));
  return PickleWriter(4).encode(PyDict{{"segments", PyList{Py(std::move(segment))}}, {"device_traces", device_traces}});
}

std::string error_of(const std::string& bytes) {
  try {
    parse_snapshot(bytes, kOrigin);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SnapshotProvenEvents, AcceptedRealSnapshotsPassTheGeneralCheck) {
  const std::filesystem::path dir = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(dir);
  int read = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    if (file.path().extension() != ".pickle") continue;
    const std::string path = file.path().string();
    const std::string bytes = read_file_bytes(path);
    for (auto& [device, trace] : parse_snapshot_devices(bytes, path)) {
      EXPECT_NO_THROW(validate_trace(trace, path)) << path << " device " << device;
      ++read;
    }
  }
  EXPECT_GE(read, 6);
}

TEST(SnapshotProvenEvents, AcceptedEdgeCasesPassTheGeneralCheck) {
  const std::uint64_t a = kBase, b = kBase + 2 * MiB, c = kBase + 4 * MiB;
  const PyList cases[] = {
      // A free_requested whose free_completed comes later, then the address reused.
      {entry("alloc", a, 8), entry("free_requested", a, 8), entry("alloc", b, 8), entry("free_completed", a, 8),
       entry("alloc", a, 16), entry("free_requested", a, 16), entry("free_completed", a, 16)},
      // Allocations from before the trace: freed at once, requested only, completed only.
      {entry("free_requested", a, 8), entry("free_completed", a, 8), entry("free_requested", b, 8),
       entry("free_completed", c, 8), entry("free_completed", b, 8)},
      // An address freed before the trace's first alloc there, reused; an oom; a free_requested last.
      {entry("free_requested", a, 8), entry("free_completed", a, 8), entry("alloc", a, 24), oom(40 * MiB),
       entry("free_requested", a, 24)},
  };
  for (const PyList& entries : cases) {
    const std::string bytes = snapshot_bytes(entries);
    Trace t;
    ASSERT_NO_THROW(t = parse_snapshot(bytes, kOrigin));
    EXPECT_NO_THROW(validate_trace(t, kOrigin));
  }
  // A block allocated before the trace and never touched by it: an initial allocation no event names.
  const std::string bytes =
      snapshot_bytes({entry("alloc", b, 8), entry("free_requested", b, 8)},
                     {block(a, 2 * MiB, 100, "active_allocated"), block(b, 2 * MiB, 8, "active_pending_free"),
                      block(c, 16 * MiB, 0, "inactive")});
  Trace t;
  ASSERT_NO_THROW(t = parse_snapshot(bytes, kOrigin));
  ASSERT_EQ(t.initial.allocations.size(), 1u);
  EXPECT_NO_THROW(validate_trace(t, kOrigin));
}

TEST(SnapshotProvenEvents, BrokenRulesGetTheGeneralMessage) {
  const std::uint64_t a = kBase, b = kBase + 2 * MiB;
  const std::pair<PyList, std::string> cases[] = {
      // The second free_requested is joined with the free_completed after it: a `free` (event 2).
      {{entry("alloc", a, 8), entry("free_requested", a, 8), entry("free_requested", a, 8),
        entry("free_completed", a, 8)},
       "proven.pickle: event 2 (free): id 1: free of an id whose free was already requested (expected "
       "free_completed)"},
      {{entry("alloc", a, 8), entry("free_requested", a, 8), entry("free_requested", a, 8), entry("alloc", b, 8)},
       "proven.pickle: event 2 (free_requested): id 1: free_requested twice for the same allocation"},
      // The same from before the trace: the initial allocation is id 1, the trace's alloc id 2.
      {{entry("free_requested", a, 8), entry("alloc", b, 8), entry("free_requested", a, 8)},
       "proven.pickle: event 2 (free_requested): id 1: free_requested twice for the same allocation"},
      {{entry("alloc", a, 8), entry("alloc", b, 8), entry("free_completed", b, 8)},
       "proven.pickle: event 2 (free_completed): id 2: free_completed of an allocation whose free was never "
       "requested"},
      {{entry("alloc", b, 8), entry("alloc", a, 0)},
       "proven.pickle: event 1 (alloc): size 0 (expected a positive size)"},
      {{entry("alloc", a, std::uint64_t{1} << 60)},
       "proven.pickle: event 0 (alloc): impossible size 1152921504606846976 (expected < 2^60)"},
      {{oom(std::uint64_t{1} << 61)},
       "proven.pickle: event 0 (oom): impossible size 2305843009213693952 (expected < 2^60)"},
  };
  for (const auto& [entries, message] : cases) EXPECT_EQ(error_of(snapshot_bytes(entries)), message);
}

}  // namespace
}  // namespace fraglab
