// Stack frames kept (README "Stack frames", TraceReadOptions::frames): hand-built snapshots whose
// interned tables are worked out by hand below, the JSONL form, cutting to the top N, the frame
// filter, the live allocations at a peak, and a real snapshot checked against Python.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "fraglab/frames.hpp"
#include "fraglab/peak_allocations.hpp"
#include "fraglab/trace.hpp"
#include "fraglab/trace_io.hpp"
#include "support/command.hpp"
#include "support/pickle_writer.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

using testing::PickleWriter;
using testing::Py;
using testing::PyDict;
using testing::PyList;

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kMiB = 1 << 20;

Py frame(const char* file, int line, const char* name) {
  return PyDict{{"filename", file}, {"line", line}, {"name", name}};
}
const Py kA = frame("a.py", 1, "fa");
const Py kB = frame("b.py", 2, "fb");
const Py kC = frame("c.py", 3, "fc");

Py entry(const char* action, std::uint64_t addr, std::uint64_t size, PyList frames) {
  return PyDict{{"action", action}, {"addr", addr}, {"size", size}, {"stream", 0}, {"frames", std::move(frames)}};
}
Py block(std::uint64_t addr, std::uint64_t size, std::uint64_t requested, const char* state, PyList frames) {
  return PyDict{{"address", addr},
                {"size", size},
                {"requested_size", requested},
                {"state", state},
                {"frames", std::move(frames)}};
}
Py segment(std::uint64_t addr, std::uint64_t total, const char* type, PyList blocks) {
  return PyDict{{"device", 0},          {"address", addr},        {"total_size", total}, {"stream", 0},
                {"segment_type", type}, {"is_expandable", false}, {"frames", PyList{}},  {"blocks", std::move(blocks)}};
}

// A 20 MiB segment made in the trace holding two allocs, one of them freed, and a 2 MiB segment
// from before the trace holding one allocation live throughout (an initial allocation).
// Stacks, innermost first: alloc 1 [a,b,c], alloc 2 [b,c], the free of 1 [c], the segment_alloc
// none, the initial allocation [a].
Py snapshot() {
  PyList trace{entry("segment_alloc", kBase, 20 * kMiB, {}), entry("alloc", kBase, kMiB, {kA, kB, kC}),
               entry("alloc", kBase + kMiB, 2 * kMiB, {kB, kC}), entry("free_requested", kBase, kMiB, {kC}),
               entry("free_completed", kBase, kMiB, {kC})};
  PyList segments{segment(kBase, 20 * kMiB, "large",
                          {block(kBase, kMiB, kMiB, "inactive", {}),
                           block(kBase + kMiB, 2 * kMiB, 2 * kMiB, "active_allocated", {kB, kC}),
                           block(kBase + 3 * kMiB, 17 * kMiB, 0, "inactive", {})}),
                  segment(kBase + 64 * kMiB, 2 * kMiB, "small",
                          {block(kBase + 64 * kMiB, 512, 512, "active_allocated", {kA}),
                           block(kBase + 64 * kMiB + 512, 2 * kMiB - 512, 0, "inactive", {})})};
  return PyDict{{"segments", std::move(segments)}, {"device_traces", PyList{PyList(std::move(trace))}}};
}

Trace read(std::uint32_t frames, int protocol = 4) {
  return parse_snapshot(PickleWriter(protocol).encode(snapshot()), "hand.pickle",
                        TraceReadOptions{.device_index = -1, .frames = frames});
}

const Frame kFa{"a.py", 1, "fa"}, kFb{"b.py", 2, "fb"}, kFc{"c.py", 3, "fc"};

TEST(Frames, NotKeptByDefault) {
  const Trace t = read(0);
  EXPECT_TRUE(t.frames.empty());
  EXPECT_TRUE(t.stacks.empty());
  EXPECT_TRUE(t.event_stacks.empty());
  ASSERT_EQ(t.initial.allocations.size(), 1u);
  EXPECT_EQ(t.initial.allocations[0].stack, kNoString);
  EXPECT_FALSE(t.stack_of(1));
}

// Top 2 of each stack, interned in the order met: events first (alloc 1 [a,b] -> frames a=0, b=1,
// stack 0; alloc 2 [b,c] -> c=2, stack 1; the joined free [c] -> stack 2), then the blocks
// (initial allocation [a] -> stack 3).
TEST(Frames, TopTwoInternedInOrderMet) {
  for (int protocol : {2, 4}) {
    SCOPED_TRACE(protocol);
    const Trace t = read(2, protocol);
    EXPECT_EQ(t.frames, (std::vector<Frame>{kFa, kFb, kFc}));
    EXPECT_EQ(t.stacks, (std::vector<std::vector<std::uint32_t>>{{0, 1}, {1, 2}, {2}, {0}}));
    ASSERT_EQ(t.events.size(), 4u);  // segment_alloc, alloc, alloc, free (the pair joined)
    EXPECT_EQ(t.events[3].op, Op::Free);
    EXPECT_EQ(t.event_stacks, (std::vector<std::uint32_t>{kNoString, 0, 1, 2}));
    ASSERT_EQ(t.initial.allocations.size(), 1u);
    EXPECT_EQ(t.initial.allocations[0].stack, 3u);
    ASSERT_TRUE(t.stack_of(2));
    const std::span<const std::uint32_t> stack = *t.stack_of(2);
    EXPECT_EQ(std::vector<std::uint32_t>(stack.begin(), stack.end()), (std::vector<std::uint32_t>{1, 2}));
    EXPECT_FALSE(t.stack_of(0));
  }
}

// Keeping frames changes nothing else about the trace.
TEST(Frames, EventsTheSameWithAndWithout) {
  Trace with = read(3);
  const Trace without = read(0);
  EXPECT_EQ(with.events, without.events);
  with.frames.clear();
  with.stacks.clear();
  with.event_stacks.clear();
  for (InitialAllocation& a : with.initial.allocations) a.stack = kNoString;
  EXPECT_EQ(with, without);
}

// Top 1: a, b, c each a stack of their own; the initial allocation's [a] is alloc 1's stack again.
TEST(Frames, TopOneSharesStacks) {
  const Trace t = read(1);
  EXPECT_EQ(t.frames, (std::vector<Frame>{kFa, kFb, kFc}));
  EXPECT_EQ(t.stacks, (std::vector<std::vector<std::uint32_t>>{{0}, {1}, {2}}));
  EXPECT_EQ(t.event_stacks, (std::vector<std::uint32_t>{kNoString, 0, 1, 2}));
  EXPECT_EQ(t.initial.allocations[0].stack, 0u);
}

TEST(Frames, JsonlRoundTripKeepsThem) {
  const Trace t = read(2);
  std::ostringstream out;
  write_jsonl(t, out);
  EXPECT_NE(
      out.str().find(R"("frames":[["a.py",1,"fa"],["b.py",2,"fb"],["c.py",3,"fc"]],"stacks":[[0,1],[1,2],[2],[0]])"),
      std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find(R"("op":"alloc","id":2,"size":1048576,"addr":139637976727552,"stack":0})"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(parse_jsonl(out.str(), "t.jsonl"), t);
}

TEST(Frames, JsonlWithoutFramesHasNoneOfTheKeys) {
  std::ostringstream out;
  write_jsonl(read(0), out);
  EXPECT_EQ(out.str().find("stack"), std::string::npos);
  EXPECT_EQ(out.str().find("frames"), std::string::npos);
}

// A JSONL trace read with --frames N keeps N frames of each stack, 0 none.
TEST(Frames, JsonlCutToTheFramesAskedFor) {
  const auto dir = testing::scratch_dir("frames");
  const std::string path = (dir / "two.jsonl").string();
  write_jsonl_file(read(2), path);
  EXPECT_EQ(read_trace(path, TraceReadOptions{.frames = 1}), read(1));
  EXPECT_EQ(read_trace(path, TraceReadOptions{.frames = 5}), read(2));
  EXPECT_EQ(read_trace(path), read(0));
}

TEST(Frames, JsonlStackOutOfRangeIsAnError) {
  const std::string text =
      "{\"fraglab_trace\":1,\"name\":\"x\",\"source\":\"t\",\"frames\":[[\"a.py\",1,\"f\"]],\"stacks\":[[0]]}\n"
      "{\"op\":\"alloc\",\"id\":1,\"size\":8,\"stack\":1}\n";
  try {
    parse_jsonl(text, "x.jsonl");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "x.jsonl:2: field 'stack': 1 out of range (the header lists 1 stacks)");
  }
  const std::string bad_frame =
      "{\"fraglab_trace\":1,\"name\":\"x\",\"source\":\"t\",\"frames\":[[\"a.py\",1,\"f\"]],\"stacks\":[[3]]}\n";
  EXPECT_THROW(parse_jsonl(bad_frame, "x.jsonl"), InputError);
}

TEST(Frames, SnapshotFrameNotADictIsAnError) {
  PyList trace{entry("alloc", kBase, kMiB, {Py(7)})};
  const Py snap = PyDict{{"segments", PyList{}}, {"device_traces", PyList{PyList(std::move(trace))}}};
  try {
    parse_snapshot(PickleWriter(4).encode(snap), "bad.pickle", TraceReadOptions{.frames = 4});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad.pickle: device_traces[0] entry 0 frames: frame 0: expected a dict with filename, line and name, "
              "got int");
  }
}

// A free_requested's stack is read once the entry after it is known: joined to its free_completed,
// the Free's place (and so a bad stack's message) is the free_completed's; alone, its own, also as
// the last entry.
TEST(Frames, FreeRequestedFrameErrorNamesTheFreesPlace) {
  auto message = [](PyList trace) {
    const Py snap = PyDict{{"segments", PyList{}}, {"device_traces", PyList{PyList(std::move(trace))}}};
    try {
      parse_snapshot(PickleWriter(4).encode(snap), "bad.pickle", TraceReadOptions{.frames = 4});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string bad = ": frame 0: expected a dict with filename, line and name, got int";
  EXPECT_EQ(message({entry("alloc", kBase, kMiB, {kA}), entry("free_requested", kBase, kMiB, {Py(7)}),
                     entry("free_completed", kBase, kMiB, {kB})}),
            "bad.pickle: device_traces[0] entry 2 frames" + bad);
  EXPECT_EQ(message({entry("alloc", kBase, kMiB, {kA}), entry("free_requested", kBase, kMiB, {Py(7)}),
                     entry("alloc", kBase + kMiB, kMiB, {kB})}),
            "bad.pickle: device_traces[0] entry 1 frames" + bad);
  EXPECT_EQ(message({entry("alloc", kBase, kMiB, {kA}), entry("free_requested", kBase, kMiB, {Py(7)})}),
            "bad.pickle: device_traces[0] entry 1 frames" + bad);
  // The stack of the entry after a lone free_requested is read after the free_requested's.
  EXPECT_EQ(message({entry("alloc", kBase, kMiB, {kA}), entry("free_requested", kBase, kMiB, {Py(7)}),
                     entry("alloc", kBase + kMiB, kMiB, {Py(8)})}),
            "bad.pickle: device_traces[0] entry 1 frames" + bad);
}

// The top frame: the innermost Python frame not ignored, else the innermost frame not ignored.
TEST(Frames, TopFrameSkipsPyTorchsOwnAndPrefersPython) {
  Trace t;
  t.frames = {{"??", 0, "torch::unwind::unwind()"},
              {"CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::malloc"},
              {"Blas.cpp", 0, "at::native::addmm_out_cuda_impl"},
              {"/site/model.py", 40, "forward"}};
  const FrameFilter filter;
  const std::vector<std::uint32_t> all{0, 1, 2, 3}, cpp_only{0, 1, 2}, ignored_only{0, 1};
  EXPECT_EQ(filter.top_frame(t, all), 3u);
  EXPECT_EQ(filter.top_frame(t, cpp_only), 2u);
  EXPECT_FALSE(filter.top_frame(t, ignored_only));
  FrameFilter more;
  more.ignore.push_back("/site/");
  EXPECT_EQ(more.top_frame(t, all), 2u);
  EXPECT_EQ(frame_text(t.frames[3]), "/site/model.py:40:forward");
}

// Requested bytes live after each event, by hand: 100, 400, 300, 550, 600, 350: the peak is after
// event 4, with allocations 2 (300), 3 (250) and 4 (50) live.
TEST(PeakAllocations, LargestLiveAtThePeakOfRequestedBytes) {
  const std::string text =
      "{\"fraglab_trace\":1,\"name\":\"p\",\"source\":\"t\"}\n"
      "{\"op\":\"alloc\",\"id\":1,\"size\":100}\n"
      "{\"op\":\"alloc\",\"id\":2,\"size\":300,\"stream\":7}\n"
      "{\"op\":\"free\",\"id\":1}\n"
      "{\"op\":\"alloc\",\"id\":3,\"size\":250}\n"
      "{\"op\":\"alloc\",\"id\":4,\"size\":50}\n"
      "{\"op\":\"free\",\"id\":3}\n";
  const Trace t = parse_jsonl(text, "p.jsonl");
  EXPECT_EQ(peak_requested_event(t), 4);
  const LiveSet live = live_after(t, 4);
  EXPECT_EQ(live.after_event, 4);
  EXPECT_EQ(live.live_bytes, 600u);
  ASSERT_EQ(live.allocations.size(), 3u);
  EXPECT_EQ(live.allocations[0].id, 2u);
  EXPECT_EQ(live.allocations[0].size, 300u);
  EXPECT_EQ(live.allocations[0].stream, 7u);
  EXPECT_EQ(live.allocations[0].alloc_event, 1);
  EXPECT_EQ(live.allocations[1].id, 3u);
  EXPECT_EQ(live.allocations[2].id, 4u);
  EXPECT_EQ(live_after(t, -1).allocations.size(), 0u);
  EXPECT_EQ(live_after(t, 100).live_bytes, 350u);  // past the end: the end
}

// tiny-segments.pickle, read with Python's pickle module (the numbers below come from it, not
// from fraglab):
//   t = pickle.load(open(f, 'rb'))['device_traces'][0]; allocs = [e for e in t if e['action'] == 'alloc']
//   top = [[(f['filename'], f['line'], f['name']) for f in e['frames'][:12]] for e in allocs]
//   len({f for s in top for f in s}) == 32; len({tuple(s) for s in top}) == 5
//   allocs[20]['size'] == 536870912; top[20][0], top[20][3], top[20][11] as below
//   the first .py frame of allocs[0] (frames[:64], none ignored before it): trace_peak_memory.py:35 main
TEST(FramesReal, TinySegmentsAgainstPython) {
  const std::filesystem::path path = std::filesystem::path(FRAGLAB_REAL_TRACES) / "tiny-segments.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(path);
  const Trace t = read_trace(path.string(), TraceReadOptions{.frames = 12});
  std::vector<std::size_t> allocs;
  for (std::size_t i = 0; i < t.events.size(); ++i)
    if (t.events[i].op == Op::Alloc) allocs.push_back(i);
  ASSERT_EQ(allocs.size(), 36u);
  std::set<std::uint32_t> frames, stacks;
  for (std::size_t i : allocs) {
    ASSERT_TRUE(t.stack_of(i));
    const std::span<const std::uint32_t> stack = *t.stack_of(i);
    EXPECT_LE(stack.size(), 12u);
    stacks.insert(t.event_stacks[i]);
    for (std::uint32_t f : stack) frames.insert(f);
  }
  EXPECT_EQ(frames.size(), 32u);
  EXPECT_EQ(stacks.size(), 5u);
  const std::size_t a20 = allocs[20];
  EXPECT_EQ(t.events[a20].size, 536870912u);
  const auto s = *t.stack_of(a20);
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(t.frames[s[0]], (Frame{"??", 0, "torch::unwind::unwind()"}));
  EXPECT_EQ(t.frames[s[3]], (Frame{"CUDACachingAllocator.cpp", 0,
                                   "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed "
                                   "char, unsigned long, CUstream_st*)"}));
  EXPECT_EQ(t.frames[s[11]], (Frame{"RegisterCUDA.cpp", 0,
                                    "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
                                    "c10::TensorOptions const&)"}));

  const Trace deep = read_trace(path.string(), TraceReadOptions{.frames = 64});
  std::size_t first_alloc = 0;
  while (deep.events[first_alloc].op != Op::Alloc) ++first_alloc;
  const auto top = FrameFilter{}.top_frame(deep, *deep.stack_of(first_alloc));
  ASSERT_TRUE(top);
  EXPECT_EQ(deep.frames[*top],
            (Frame{"/root/autodl-tmp/assignment2-systems/cs336_systems/trace_peak_memory.py", 35, "main"}));
}

}  // namespace
}  // namespace fraglab
