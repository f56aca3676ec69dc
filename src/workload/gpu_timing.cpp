#include "workload/gpu_timing.hpp"

#include <algorithm>

namespace fraglab::workload {

namespace {
constexpr double kCollectiveLatencyUs = 15;  // NCCL launch + ring latency, 2 GPUs on NVLink [E]
}

GpuTiming::GpuTiming(const TimingOptions& options, Precision precision, std::uint32_t world_size, std::uint64_t seed,
                     std::uint32_t rank)
    : options_(options),
      // A100 dense matmul, achieved: ~150 TFLOPS bf16; fp32 runs at 19.5 (PyTorch leaves TF32 off
      // for matmuls since 1.12) [E].
      tflops_(options.matmul_tflops > 0 ? options.matmul_tflops : (precision == Precision::Bf16 ? 150.0 : 19.5)),
      world_size_(world_size),
      seed_(seed),
      rank_(rank),
      rng_(Rng::derive(seed, 0x71a1, rank)) {}

void GpuTiming::launch(Stream s, double gpu_us) {
  cpu_ += options_.cpu_op_us;
  std::deque<double>& queued = queued_[index_of(s)];
  while (!queued.empty() && queued.front() <= cpu_) queued.pop_front();
  if (options_.launch_queue > 0 && queued.size() >= options_.launch_queue) {
    cpu_ = std::max(cpu_, queued.front());  // the launch blocks until a slot frees up
    queued.pop_front();
  }
  const double factor = 1.0 + options_.jitter * (2.0 * rng_.uniform() - 1.0);
  double& t = tail_[index_of(s)];
  t = std::max(t, cpu_) + gpu_us * factor + delay_[index_of(s)];
  queued.push_back(t);
}

void GpuTiming::begin_step(std::uint32_t step) {
  if (options_.side_delay_us <= 0) return;
  // Its own generator per (seed, rank, step), so the jitter's sequence is the same with or without it.
  Rng rng = Rng::derive(seed_, (0x5de1a7ull << 32) | rank_, step);
  for (std::size_t i = 0; i < kStreamCount; ++i)
    delay_[i] = i == index_of(Stream::Default) ? 0.0 : options_.side_delay_us * rng.uniform();
}

void GpuTiming::wait(Stream waiter, Stream on) { wait_until(waiter, tail(on)); }

void GpuTiming::wait_until(Stream waiter, double gpu_time) {
  double& t = tail_[index_of(waiter)];
  t = std::max(t, gpu_time);
}

void GpuTiming::sync_until(double gpu_time) { cpu_ = std::max(cpu_, gpu_time); }

void GpuTiming::sync_device() {
  for (double t : tail_) sync_until(t);
}

double GpuTiming::collective_us(double bytes) const {
  if (world_size_ <= 1) return 0;
  const double on_wire = bytes * (world_size_ - 1) / world_size_;
  return kCollectiveLatencyUs + on_wire / (options_.bus_gbps * 1e3);
}

}  // namespace fraglab::workload
