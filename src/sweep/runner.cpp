// run_sweep: replays independent jobs on a pool of worker threads, answering a job from an earlier
// replay when that replay's decision bounds cover its setting (Policy::coverage).
//
// Sharing of data: each trace is parsed once by the caller and only read here (Replayer takes it
// by const reference); every replay builds its own Device and Policy, and the PolicyRegistry is
// read-only after static initialisation, so workers share nothing mutable but the job queue, the
// finished replays of each group (share_groups.hpp) and the completion callback, each under its
// mutex.
//
// Sharing of results is exact by construction: a covered setting makes every decision the
// covering replay made, so its Metrics and OOMs are that replay's. Which replay answers a job
// depends on thread timing; what it answers does not.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "fraglab/run_replay.hpp"
#include "fraglab/sweep.hpp"
#include "share_groups.hpp"

namespace fraglab {
namespace {

// Hands out job indexes: each worker walks a contiguous range of its own, and one whose range is
// empty takes the back half of the largest remaining one. Neighbouring grid points often make the
// same decisions: a worker that walks them in order answers most from its own last replay, where
// a shared counter would have both workers replay the same decisions side by side.
class JobQueue {
 public:
  JobQueue(std::size_t count, std::size_t workers) {
    for (std::size_t w = 0; w < workers; ++w) ranges_.emplace_back(count * w / workers, count * (w + 1) / workers);
  }

  std::optional<std::size_t> take(std::size_t worker) {
    std::lock_guard lock(mutex_);
    auto& own = ranges_[worker];
    if (own.first == own.second) {
      auto largest = std::max_element(ranges_.begin(), ranges_.end(), [](const auto& a, const auto& b) {
        return a.second - a.first < b.second - b.first;
      });
      if (largest->first == largest->second) return std::nullopt;
      const std::size_t middle = largest->first + (largest->second - largest->first) / 2;
      own = {middle, largest->second};
      largest->second = middle;
    }
    return own.first++;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;  // [next, end) per worker
};

}  // namespace

SweepRunStats run_sweep(const std::vector<SweepJob>& jobs, const SweepRunOptions& options,
                        const std::function<void(std::size_t, const ReplayResult&)>& on_done) {
  return run_sweep(
      jobs.size(), [&jobs](std::size_t i) { return jobs[i]; }, options, on_done);
}

SweepRunStats run_sweep(std::size_t count, const std::function<SweepJob(std::size_t)>& job_at,
                        const SweepRunOptions& options,
                        const std::function<void(std::size_t, const ReplayResult&)>& on_done) {
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards on_done, stats and error
  std::exception_ptr error;
  SweepRunStats stats;
  // An invariant checker watches each replay: every job is replayed.
  const bool share = options.share && !options.check_invariants;
  ShareGroups groups;
  const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(options.threads, count));
  JobQueue queue(count, threads);

  auto worker = [&](std::size_t w) {
    while (!stop.load(std::memory_order_relaxed)) {
      const std::optional<std::size_t> i = queue.take(w);
      if (!i) return;
      try {
        const SweepJob job = job_at(*i);
        const DeviceSpec& device = job.device ? *job.device : options.device;
        ShareGroup* group = share ? &groups.of(job, device) : nullptr;
        if (group != nullptr) {
          if (std::optional<ReplayResult> answer = group->answer(job.spec)) {
            std::lock_guard lock(mutex);
            ++stats.shared;
            if (!error) on_done(*i, *answer);
            continue;
          }
        }
        ReplayOptions replay = options.replay;
        replay.start_state = job.start_state;
        replay.detailed_stats = false;  // no sweep output reads them
        PolicyOnDevice run(job.spec, device);
        if (group != nullptr) run.policy().record_coverage();
        const ReplayResult result = run.run(*job.trace, replay, {.check_invariants = options.check_invariants});
        if (group != nullptr) group->add(run.policy().coverage(), result);
        std::lock_guard lock(mutex);
        ++stats.replayed;
        if (!error) on_done(*i, result);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    }
  };

  if (threads == 1) {
    worker(0);
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  }  // jthreads join here
  if (error) std::rethrow_exception(error);
  return stats;
}

}  // namespace fraglab
