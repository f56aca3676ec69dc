#include "workload/trace_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace fraglab::workload {

namespace {
// The tags of README "Traces", in Tag order.
constexpr std::array<std::string_view, 6> kTagNames = {"param", "grad", "act", "opt", "comm", "temp"};
// What a trace may hold (src/trace/live_allocations.hpp kImpossibleSize): a size, and here also the
// total live at once, below 2^60; times as signed 64-bit µs, kept below 2^62.
constexpr Bytes kTraceSizeLimit = Bytes{1} << 60;
constexpr double kClockLimitUs = 4611686018427387904.0;  // 2^62
}  // namespace

TraceBuilder::TraceBuilder(Trace& trace, GpuTiming& gpu) : trace_(trace), gpu_(gpu) {
  for (std::size_t i = 0; i < kTagNames.size(); ++i) tags_[i] = trace_.intern(kTagNames[i]);
  step_label_ = trace_.intern("step");
  phase_label_ = trace_.intern("phase");
}

Event TraceBuilder::event(Op op, std::uint64_t id) const {
  const double now = gpu_.now();
  if (!(now < kClockLimitUs)) {
    throw InputError(
        fmt::format("the timing model's clock passed 2^62 µs at event {} (trace times are signed 64-bit µs): the work "
                    "is too large for the GPU timing options (--gpu-tflops, --hbm-gbps, --bus-gbps); reduce the model, "
                    "--micro-batch, the sequence lengths or --steps",
                    trace_.events.size()));
  }
  Event e;
  e.op = op;
  e.id = id;
  e.has_time = true;
  e.time_us = std::llround(gpu_.now());
  return e;
}

void TraceBuilder::complete_due(double up_to) {
  while (!pending_.empty() && pending_.top().time <= up_to) {
    trace_.events.push_back(event(Op::FreeCompleted, pending_.top().id));
    release(pending_.top().id);
    pending_.pop();
  }
}

TensorId TraceBuilder::alloc(Bytes size, Stream stream, Tag tag) {
  if (size == 0) return 0;
  complete_due(gpu_.now());  // PyTorch processes finished events at the start of each malloc
  if (size >= kTraceSizeLimit || live_ + size >= kTraceSizeLimit) {
    throw InputError(
        fmt::format("a {} allocation of {} bytes at event {} would make {} bytes live at once; a trace holds less than "
                    "2^60 (1 EiB): reduce the model, --micro-batch or the sequence lengths",
                    kTagNames[static_cast<std::size_t>(tag)], size, trace_.events.size(),
                    size >= kTraceSizeLimit ? std::string("more than 2^60") : fmt::format("{}", live_ + size)));
  }
  Event e = event(Op::Alloc, next_id_++);
  e.size = size;
  sizes_.push_back(size);
  live_ += size;
  e.stream = stream_id(stream);
  e.tag = tags_[static_cast<std::size_t>(tag)];
  trace_.events.push_back(e);
  return e.id;
}

void TraceBuilder::free(TensorId id) {
  if (id == 0) return;
  trace_.events.push_back(event(Op::Free, id));
  release(id);
}

void TraceBuilder::free_at(TensorId id, double gpu_time) {
  if (id == 0) return;
  trace_.events.push_back(event(Op::FreeRequested, id));
  pending_.push(Pending{gpu_time, pending_seq_++, id});
}

void TraceBuilder::free_after(TensorId id, std::initializer_list<Stream> users) {
  double t = 0;
  for (Stream s : users) t = std::max(t, gpu_.tail(s));
  free_at(id, t);
}

void TraceBuilder::mark_step(std::uint32_t step) {
  Event e = event(Op::Mark, step_label_);
  e.size = trace_.intern(std::to_string(step));
  trace_.events.push_back(e);
}

void TraceBuilder::mark_phase(std::string_view phase) {
  Event e = event(Op::Mark, phase_label_);
  e.size = trace_.intern("\"" + std::string(phase) + "\"");
  trace_.events.push_back(e);
}

void TraceBuilder::empty_cache() {
  // emptyCache synchronizes on every outstanding free event first (allocator-model §5.3).
  double last = gpu_.now();
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> copy = pending_;
  while (!copy.empty()) {
    last = std::max(last, copy.top().time);
    copy.pop();
  }
  gpu_.sync_until(last);
  complete_due(last);
  trace_.events.push_back(event(Op::EmptyCache, 0));
}

void TraceBuilder::finish() {
  gpu_.sync_device();
  complete_due(std::numeric_limits<double>::infinity());
}

}  // namespace fraglab::workload
