// A simple GPU timing model (wm §0, §6.1): it exists to decide *when* a free that waits for
// another stream (record_stream) completes, so the allocator sees the same deferral a real run has.
//
// Model: one CPU clock; per stream a "tail" = the time its last issued kernel finishes. Issuing a
// kernel costs the CPU cpu_op_us; the kernel starts when it has been issued and its stream is free,
// and runs for its duration times a seeded jitter factor. A stream holds at most launch_queue
// unfinished kernels: one more blocks the CPU until the oldest finishes (CUDA's launch queue,
// about 1024 entries [E]) — the only bound on how far the CPU runs ahead between syncs. Streams run concurrently (NCCL
// kernels use their own SMs). Cross-stream waits (wait_stream / wait_event) delay the waiter's next kernel. CPU
// synchronisation (event.synchronize(), .item(), stream.synchronize()) moves the CPU clock to the GPU time it waits
// for. Durations: FLOPs / achieved TFLOPS, bytes / HBM bandwidth, collective bytes · (N-1)/N / bus bandwidth.
#pragma once

#include <array>
#include <cstdint>
#include <deque>

#include "fraglab/rng.hpp"
#include "fraglab/workload.hpp"
#include "workload/streams.hpp"

namespace fraglab::workload {

class GpuTiming {
 public:
  GpuTiming(const TimingOptions& options, Precision precision, std::uint32_t world_size, std::uint64_t seed,
            std::uint32_t rank);

  double now() const { return cpu_; }
  // A new training step: with side_delay_us > 0 every side stream draws this step's extra delay
  // per kernel, uniform in [0, side_delay_us], from its own seeded generator (the jitter's
  // draws are unchanged). Off (0): nothing drawn, nothing added.
  void begin_step(std::uint32_t step);
  double side_delay(Stream s) const { return delay_[index_of(s)]; }
  // CPU time spent outside kernel launches (Python bookkeeping).
  void cpu_work(double us) { cpu_ += us; }
  void hook() { cpu_ += options_.hook_us; }  // one framework hook
  // Issues a kernel of (unjittered) duration `gpu_us` on `s`.
  void launch(Stream s, double gpu_us);
  double tail(Stream s) const { return tail_[index_of(s)]; }
  void wait(Stream waiter, Stream on);
  void wait_until(Stream waiter, double gpu_time);
  void sync_until(double gpu_time);
  void sync_stream(Stream s) { sync_until(tail(s)); }
  void sync_device();

  // Kernel durations in µs.
  double matmul_us(double flops) const { return flops / (tflops_ * 1e6); }
  double memory_us(double bytes) const { return bytes / (options_.hbm_gbps * 1e3); }
  // all-gather / reduce-scatter whose full (unsharded) buffer is `bytes`.
  double collective_us(double bytes) const;

 private:
  TimingOptions options_;
  double tflops_;
  std::uint32_t world_size_;
  std::uint64_t seed_;
  std::uint32_t rank_;
  Rng rng_;
  double cpu_ = 0;
  std::array<double, kStreamCount> tail_{};
  std::array<double, kStreamCount> delay_{};             // this step's extra µs per kernel (begin_step)
  std::array<std::deque<double>, kStreamCount> queued_;  // end times of unfinished kernels
};

}  // namespace fraglab::workload
