// run_sweep: replays independent jobs on a pool of worker threads.
//
// Sharing: each trace is parsed once by the caller and only read here (Replayer takes it by const
// reference); every run builds its own Device and Policy (run_replay), and the PolicyRegistry is read-only
// after static initialisation, so workers share nothing mutable but the job counter and the
// completion callback, which runs under one mutex.
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "fraglab/run_replay.hpp"
#include "fraglab/sweep.hpp"

namespace fraglab {

void run_sweep(const std::vector<SweepJob>& jobs, const SweepRunOptions& options,
               const std::function<void(std::size_t, const ReplayResult&)>& on_done) {
  run_sweep(
      jobs.size(), [&jobs](std::size_t i) { return jobs[i]; }, options, on_done);
}

void run_sweep(std::size_t count, const std::function<SweepJob(std::size_t)>& job_at, const SweepRunOptions& options,
               const std::function<void(std::size_t, const ReplayResult&)>& on_done) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards on_done and error
  std::exception_ptr error;

  // Jobs are handed out one at a time from a shared counter: runs differ in cost, and a static
  // split would leave one thread idle while the other finishes its slow half.
  auto worker = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      try {
        const SweepJob job = job_at(i);
        ReplayOptions replay = options.replay;
        replay.start_state = job.start_state;
        const ReplayResult result = run_replay(*job.trace, job.spec, job.device ? *job.device : options.device, replay,
                                               {.check_invariants = options.check_invariants});
        std::lock_guard lock(mutex);
        if (!error) on_done(i, result);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    }
  };

  const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(options.threads, count));
  if (threads == 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  }  // jthreads join here
  if (error) std::rethrow_exception(error);
}

}  // namespace fraglab
