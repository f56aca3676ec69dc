// The GPU timing model and the deferred frees it places (workload-model §0, §6.1; allocator-model §6).
#include <gtest/gtest.h>

#include "workload/gpu_timing.hpp"
#include "workload/trace_builder.hpp"

namespace fraglab::workload {
namespace {

TimingOptions exact(std::uint32_t queue = 1024) {
  TimingOptions t;
  t.cpu_op_us = 10;
  t.jitter = 0;
  t.launch_queue = queue;
  return t;
}

TEST(GpuTiming, KernelsQueueBehindEachOtherAndTheCpuRunsAhead) {
  GpuTiming gpu(exact(), Precision::Bf16, 2, 0, 0);
  gpu.launch(Stream::Default, 100);  // issued at 10, runs 10..110
  gpu.launch(Stream::Default, 100);  // issued at 20, runs 110..210
  EXPECT_DOUBLE_EQ(gpu.now(), 20);
  EXPECT_DOUBLE_EQ(gpu.tail(Stream::Default), 210);
  gpu.launch(Stream::Unshard, 50);  // another stream runs concurrently: 30..80
  EXPECT_DOUBLE_EQ(gpu.tail(Stream::Unshard), 80);
  gpu.wait(Stream::Unshard, Stream::Default);  // wait_stream: next Unshard work after 210
  gpu.launch(Stream::Unshard, 50);
  EXPECT_DOUBLE_EQ(gpu.tail(Stream::Unshard), 260);
  gpu.sync_stream(Stream::Default);  // .item()
  EXPECT_DOUBLE_EQ(gpu.now(), 210);
}

TEST(GpuTiming, AFullLaunchQueueBlocksTheCpu) {
  GpuTiming gpu(exact(2), Precision::Bf16, 2, 0, 0);
  gpu.launch(Stream::Default, 100);  // 10..110
  gpu.launch(Stream::Default, 100);  // 110..210
  gpu.launch(Stream::Default, 100);  // two unfinished: the CPU waits for the first (110)
  EXPECT_DOUBLE_EQ(gpu.now(), 110);
  EXPECT_DOUBLE_EQ(gpu.tail(Stream::Default), 310);
}

TEST(GpuTiming, JitterIsSeededAndBounded) {
  TimingOptions t = exact();
  t.jitter = 0.3;
  GpuTiming a(t, Precision::Bf16, 2, 7, 0), b(t, Precision::Bf16, 2, 7, 0), c(t, Precision::Bf16, 2, 8, 0);
  for (int i = 0; i < 100; ++i) {
    a.launch(Stream::Default, 1000);
    b.launch(Stream::Default, 1000);
    c.launch(Stream::Default, 1000);
  }
  EXPECT_DOUBLE_EQ(a.tail(Stream::Default), b.tail(Stream::Default));
  EXPECT_NE(a.tail(Stream::Default), c.tail(Stream::Default));
  EXPECT_GT(a.tail(Stream::Default), 10 + 100 * 700.0);
  EXPECT_LT(a.tail(Stream::Default), 10 + 100 * 1300.0);
}

TEST(TraceBuilder, RecordStreamFreeCompletesAtTheFirstMallocAfterTheGpuPassed) {
  Trace trace;
  GpuTiming gpu(exact(), Precision::Bf16, 2, 0, 0);
  TraceBuilder tb(trace, gpu);
  const TensorId a = tb.alloc(1 << 20, Stream::Unshard, Tag::Param);
  gpu.launch(Stream::Default, 100);  // DEFAULT uses it until 110
  tb.free_after(a, {Stream::Default});
  tb.alloc(4096, Stream::Default, Tag::Act);  // CPU at 10: not yet
  gpu.cpu_work(200);                          // CPU at 210
  tb.alloc(4096, Stream::Default, Tag::Act);  // the event is polled here: completes first
  tb.finish();
  std::vector<Op> ops;
  for (const Event& e : trace.events) ops.push_back(e.op);
  EXPECT_EQ(ops, (std::vector<Op>{Op::Alloc, Op::FreeRequested, Op::Alloc, Op::FreeCompleted, Op::Alloc}));
  EXPECT_EQ(trace.events[3].id, a);
  EXPECT_EQ(trace.events[0].stream, stream_id(Stream::Unshard));
  EXPECT_NE(stream_id(Stream::Unshard), 0u);
  EXPECT_EQ(trace.events[2].stream, 0u);
  EXPECT_NO_THROW(validate_trace(trace, "builder"));
}

TEST(TraceBuilder, EmptyCacheAndFinishCompleteEveryPendingFree) {
  Trace trace;
  GpuTiming gpu(exact(), Precision::Bf16, 2, 0, 0);
  TraceBuilder tb(trace, gpu);
  const TensorId a = tb.alloc(100, Stream::Default, Tag::Temp), b = tb.alloc(100, Stream::Default, Tag::Temp);
  gpu.launch(Stream::DsReduce, 1000);
  tb.free_after(a, {Stream::DsReduce});
  tb.empty_cache();  // synchronises on the pending event first
  EXPECT_EQ(trace.events.back().op, Op::EmptyCache);
  EXPECT_EQ(trace.events[trace.events.size() - 2].op, Op::FreeCompleted);
  EXPECT_GE(gpu.now(), 1010);
  gpu.launch(Stream::DsReduce, 1000);
  tb.free_after(b, {Stream::DsReduce});
  tb.finish();
  EXPECT_EQ(trace.events.back().op, Op::FreeCompleted);
  EXPECT_NO_THROW(validate_trace(trace, "builder"));
}

}  // namespace
}  // namespace fraglab::workload
