// End to end: --frames, inspect --top-at-peak and diff --by-frame on hand-made JSONL traces whose
// figures are worked out by hand in the comments, and convert keeping a real snapshot's frames.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace {

namespace fs = std::filesystem;
using fraglab::testing::read_text;
using fraglab::testing::run_fraglab;
using fraglab::testing::scratch_dir;
using fraglab::testing::write_text;

// Frames: 0 train.py:10:step, 1 model.py:20:forward, 2 the allocator's own (ignored by default).
// Stacks: 0 = [allocator, forward, step], 1 = [allocator, step]; top frames (the innermost Python
// frame not ignored): stack 0 -> model.py:20:forward, stack 1 -> train.py:10:step.
// Events: 0 alloc 1 (1000, stack 0), 1 alloc 2 (SIZE2, stack 1), 2 alloc 3 (2000, no stack),
// 3 free 1, 4 alloc 4 (500, stack 0), 5 free 2.
std::string trace_text(int size2) {
  return "{\"fraglab_trace\":1,\"name\":\"t" + std::to_string(size2) +
         "\",\"source\":\"test\",\"frames\":[[\"train.py\",10,\"step\"],[\"model.py\",20,\"forward\"],"
         "[\"CUDACachingAllocator.cpp\",0,\"c10::cuda::CUDACachingAllocator::malloc\"]],\"stacks\":[[2,1,0],[2,0]]}\n"
         "{\"op\":\"alloc\",\"id\":1,\"size\":1000,\"stack\":0}\n"
         "{\"op\":\"alloc\",\"id\":2,\"size\":" +
         std::to_string(size2) +
         ",\"stack\":1}\n"
         "{\"op\":\"alloc\",\"id\":3,\"size\":2000}\n"
         "{\"op\":\"free\",\"id\":1}\n"
         "{\"op\":\"alloc\",\"id\":4,\"size\":500,\"stack\":0}\n"
         "{\"op\":\"free\",\"id\":2}\n";
}

fs::path write_trace(const std::string& name, int size2) {
  const fs::path path = scratch_dir("frames-cli") / name;
  write_text(path, trace_text(size2));
  return path;
}

// Requested bytes live after each event (size2 = 3000): 1000, 4000, 6000, 5000, 5500, 2500: the
// peak is after event 2, with 2 (3000), 3 (2000) and 1 (1000) live.
TEST(InspectTopAtPeak, LargestAtThePeakOfRequestedBytes) {
  const fs::path path = write_trace("a.jsonl", 3000);
  const auto r = run_fraglab("inspect " + path.string() + " --top-at-peak 2 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto top = nlohmann::json::parse(r.out)["top_at_peak"];
  EXPECT_EQ(top["basis"], "requested");
  EXPECT_EQ(top["event_index"], 2);
  EXPECT_EQ(top["live_requested_bytes"], 6000);
  EXPECT_EQ(top["live_allocations"], 3);
  ASSERT_EQ(top["allocations"].size(), 2u);
  const auto& first = top["allocations"][0];
  EXPECT_EQ(first["id"], 2);
  EXPECT_EQ(first["size"], 3000);
  EXPECT_EQ(first["alloc_event"], 1);
  EXPECT_EQ(first["frames"].size(), 2u);
  EXPECT_EQ(first["top_frame"]["filename"], "train.py");
  EXPECT_EQ(first["top_frame"]["line"], 10);
  const auto& second = top["allocations"][1];
  EXPECT_EQ(second["id"], 3);
  EXPECT_EQ(second["size"], 2000);
  EXPECT_TRUE(second["top_frame"].is_null());

  const auto text = run_fraglab("inspect " + path.string() + " --top-at-peak 2");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("top 2 live allocations at the peak of requested bytes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(3000 B)  id 2  event 1  stream 0\n        train.py:10:step\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("(2000 B)  id 3  event 2  stream 0\n        (no stack recorded)\n"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("CUDACachingAllocator"), std::string::npos) << text.out;  // PyTorch's own: not shown
}

// nocache reserves each request on its own, so its reserved bytes peak where requested bytes do.
TEST(InspectTopAtPeak, AtAPolicysPeakReserved) {
  const fs::path path = write_trace("p.jsonl", 3000);
  const auto r = run_fraglab("inspect " + path.string() + " --top-at-peak 1 -p nocache --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto top = nlohmann::json::parse(r.out)["top_at_peak"];
  EXPECT_EQ(top["basis"], "reserved");
  EXPECT_EQ(top["policy"], "nocache");
  EXPECT_EQ(top["event_index"], 2);
  EXPECT_EQ(top["allocations"][0]["id"], 2);
}

TEST(InspectTopAtPeak, BadOptions) {
  const fs::path path = write_trace("b.jsonl", 3000);
  auto r = run_fraglab("inspect " + path.string() + " --top-at-peak 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--top-at-peak 0: expected a number of allocations of at least 1"), std::string::npos) << r.err;
  r = run_fraglab("inspect " + path.string() + " --frames=-1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--frames -1: expected a number of stack frames from 0 to 1048576"), std::string::npos) << r.err;
  r = run_fraglab("inspect " + path.string() + " -p nocache");
  EXPECT_EQ(r.status, 2);
}

// By top frame (B: alloc 2 is 5000 instead of 3000):
//   train.py:10:step     A: 1 alloc, peak 3000   B: peak 5000   (change 2000: first)
//   (no stack)           A and B: alloc 3, peak 2000
//   model.py:20:forward  A and B: allocs 1 and 4, 1500 requested, peak 1000 (1 is freed before 4)
TEST(DiffByFrame, GroupsRequestedBytesByTopFrame) {
  const fs::path a = write_trace("da.jsonl", 3000), b = write_trace("db.jsonl", 5000);
  const auto r = run_fraglab("diff " + a.string() + " " + b.string() + " -p nocache --by-frame --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto groups = nlohmann::json::parse(r.out)["by_frame"]["groups"];
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0]["frame"], "train.py:10:step");
  EXPECT_EQ(groups[0]["a"]["peak_live_bytes"], 3000);
  EXPECT_EQ(groups[0]["b"]["peak_live_bytes"], 5000);
  EXPECT_EQ(groups[1]["frame"], "(no stack)");
  EXPECT_EQ(groups[1]["a"]["peak_live_bytes"], 2000);
  EXPECT_EQ(groups[2]["frame"], "model.py:20:forward");
  EXPECT_EQ(groups[2]["a"]["allocs"], 2);
  EXPECT_EQ(groups[2]["a"]["requested_bytes"], 1500);
  EXPECT_EQ(groups[2]["a"]["peak_live_bytes"], 1000);
  EXPECT_EQ(groups[2]["b"]["peak_live_bytes"], 1000);

  const auto text = run_fraglab("diff " + a.string() + " " + b.string() + " -p nocache --by-frame");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("by top stack frame"), std::string::npos) << text.out;
  // Ignoring train.py too leaves the stack [allocator, step] with nothing: its group is named so.
  const auto ignored =
      run_fraglab("diff " + a.string() + " " + b.string() + " -p nocache --by-frame --frame-ignore train.py --json -");
  ASSERT_EQ(ignored.status, 0) << ignored.err;
  EXPECT_EQ(nlohmann::json::parse(ignored.out)["by_frame"]["groups"][0]["frame"], "(only PyTorch frames)");

  const auto without = run_fraglab("diff " + a.string() + " " + b.string() + " --frames 3");
  EXPECT_EQ(without.status, 2);
}

// tiny-segments.pickle (no allocation live at its start, no segment frees: ids are alloc order and
// no event is inferred), with Python's pickle module: trace entries joined as fraglab joins them
// (a free_requested followed by the free_completed of its address is one free), requested bytes
// live after each event, the first maximum:
//   peak 3249143816 after event 43; the largest live then, (id, size, alloc event), by size then
//   id: (10, 536870912, 15), (21, 536870912, 33), (23, 536870912, 37)
// and the first frame of allocs[9] (id 10) whose filename ends in .py, frame 25:
//   .../cs336_systems/trace_peak_memory.py line 7, custom_softmax (none of the 25 before is .py).
TEST(InspectTopAtPeak, RealSnapshotAgainstPython) {
  const fs::path snap = fs::path(FRAGLAB_REAL_TRACES) / "tiny-segments.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(snap);
  const auto r = run_fraglab("inspect " + snap.string() + " --top-at-peak 3 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto top = nlohmann::json::parse(r.out)["top_at_peak"];
  EXPECT_EQ(top["event_index"], 43);
  EXPECT_EQ(top["live_requested_bytes"], 3249143816u);
  const int ids[] = {10, 21, 23}, events[] = {15, 33, 37};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(top["allocations"][k]["id"], ids[k]);
    EXPECT_EQ(top["allocations"][k]["size"], 536870912u);
    EXPECT_EQ(top["allocations"][k]["alloc_event"], events[k]);
  }
  EXPECT_EQ(top["allocations"][0]["top_frame"]["filename"],
            "/root/autodl-tmp/assignment2-systems/cs336_systems/trace_peak_memory.py");
  EXPECT_EQ(top["allocations"][0]["top_frame"]["line"], 7);
  EXPECT_EQ(top["allocations"][0]["top_frame"]["name"], "custom_softmax");
}

// convert --frames carries a snapshot's frames into JSONL: the converted file lists the same top
// allocations with the same frames as the snapshot itself.
TEST(ConvertFrames, KeepsTheSnapshotsFrames) {
  const fs::path snap = fs::path(FRAGLAB_REAL_TRACES) / "tiny-segments.pickle";
  FRAGLAB_NEEDS_REAL_TRACE(snap);
  const fs::path out = scratch_dir("frames-cli") / "tiny.jsonl";
  fs::remove(out);
  const auto c = run_fraglab("convert " + snap.string() + " -o " + out.string() + " --frames 40");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(read_text(out).find("\"stacks\":[["), std::string::npos);
  const auto from_snapshot = run_fraglab("inspect " + snap.string() + " --top-at-peak 3 --frames 40 --json -");
  const auto from_jsonl = run_fraglab("inspect " + out.string() + " --top-at-peak 3 --json -");
  ASSERT_EQ(from_snapshot.status, 0) << from_snapshot.err;
  ASSERT_EQ(from_jsonl.status, 0) << from_jsonl.err;
  const auto a = nlohmann::json::parse(from_snapshot.out)["top_at_peak"];
  const auto b = nlohmann::json::parse(from_jsonl.out)["top_at_peak"];
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a["allocations"][0]["frames"].empty());

  const fs::path plain = scratch_dir("frames-cli") / "plain.jsonl";
  fs::remove(plain);
  ASSERT_EQ(run_fraglab("convert " + snap.string() + " -o " + plain.string()).status, 0);
  EXPECT_EQ(read_text(plain).find("\"stack"), std::string::npos);  // not asked for: not kept
}

}  // namespace
