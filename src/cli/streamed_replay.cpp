// replay_streamed: see streamed_replay.hpp.
#include "cli/streamed_replay.hpp"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "cli/common.hpp"
#include "cli/log.hpp"
#include "cli/replay_progress.hpp"
#include "fraglab/policy.hpp"
#include "fraglab/trace_identity.hpp"
#include "fraglab/trace_stream.hpp"

namespace fraglab::cli {

bool streamable_policy(const std::string& spec) {
  // offline plans from the whole trace and gemini reads its tags before the replay (their
  // prepare()); pytorch's reads events only to rebuild a start state, which a streamed trace lacks.
  static constexpr std::array<std::string_view, 7> kStreamable = {"pytorch", "tlsf",   "nocache",   "buddy",
                                                                  "bestfit", "gmlake", "cuda_async"};
  const std::string_view name = policy_name(spec);
  for (std::string_view s : kStreamable)
    if (name == s) return true;
  return false;
}

namespace {

// The file is parsed on a second thread a few windows ahead of the replays (parsing is about half
// of the work): the replays get the same windows in the same order, so the same results. The
// parsing thread owns the TraceStream; the replays read a copy of its header whose strings grow
// by the strings each window added (marks name them by index), so no string is shared between
// the threads.
class ReadAhead {
 public:
  struct Piece {
    std::vector<Event> events;
    std::vector<std::string> new_strings;  // appended to the trace's strings by this piece
    bool observed = false;                 // the trace has observed events (up to this piece)
  };

  explicit ReadAhead(TraceStream& stream)
      : stream_(stream), strings_seen_(stream.trace().strings.size()), thread_([this] { produce(); }) {}
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next piece (false at the end of the file); rethrows the reader's error (a bad line) when
  // the pieces before it are used up.
  bool next(Piece& piece) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || done_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    if (!piece.events.empty() || piece.events.capacity() > 0) spare_.push_back(std::move(piece.events));
    piece = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return true;
  }

 private:
  static constexpr std::size_t kDepth = 3;  // windows parsed ahead

  void produce() {
    try {
      for (;;) {
        Piece piece;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!spare_.empty()) {
            piece.events = std::move(spare_.back());  // reused: no fresh pages to fault in
            spare_.pop_back();
          }
        }
        const bool more = stream_.next(piece.events);
        const std::vector<std::string>& strings = stream_.trace().strings;
        piece.new_strings.assign(strings.begin() + static_cast<std::ptrdiff_t>(strings_seen_), strings.end());
        strings_seen_ = strings.size();
        piece.observed = stream_.summary().observed_events > 0;
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return ready_.size() < kDepth || stop_; });
        if (stop_) return;
        if (!more) {
          done_ = true;
          changed_.notify_all();
          return;
        }
        ready_.push_back(std::move(piece));
        changed_.notify_all();
        if (ready_.back().observed) {  // the caller drops the stream here: read no further
          done_ = true;
          return;
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
      changed_.notify_all();
    }
  }

  TraceStream& stream_;
  std::size_t strings_seen_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> ready_;
  std::vector<std::vector<Event>> spare_;
  bool stop_ = false;
  bool done_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once everything above is built
};

// One pass over the file: every replay fed each window in turn, `header` (the replays' trace)
// given each window's new strings first. False when an observed event showed that the trace must
// be read whole.
bool stream_once(TraceStream& stream, Trace& header, std::vector<std::unique_ptr<StreamedReplay>>& replays,
                 RequestHasher* hasher) {
  ReadAhead ahead(stream);
  ReadAhead::Piece piece;
  while (ahead.next(piece)) {
    if (piece.observed) return false;
    header.strings.insert(header.strings.end(), piece.new_strings.begin(), piece.new_strings.end());
    if (hasher != nullptr)
      for (const Event& e : piece.events) hasher->add(e);
    for (auto& replay : replays) replay->feed(piece.events);
  }
  return true;
}

}  // namespace

std::optional<StreamedReplayRun> replay_streamed(const std::string& path, const std::vector<std::string>& specs,
                                                 const StreamedReplayOptions& options) {
  // A progress line on a terminal counts a replay's events against the trace's total, which only
  // a whole read knows before the replay: there the trace is read whole, as before.
  if (path == kStdinPath || specs.empty() || progress_on_terminal()) return std::nullopt;
  for (const std::string& spec : specs)
    if (!streamable_policy(spec)) return std::nullopt;
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<TraceStream> stream = TraceStream::open(path, progress_callback("reading " + path, "bytes"));
  if (!stream) return std::nullopt;
  remember_trace_path(path);

  // Without observed events the trace records no oom: the device is the option's or the default,
  // and with no start state every --start-state but cold means the recorded (empty) one. Both are
  // chosen again, with their messages, once the stream is known to be complete.
  const DeviceChoice device = choose_device(options.device_option);
  ReplayOptions replay = options.replay;
  replay.start_state = options.start_option == "cold" ? StartState::Cold : StartState::Recorded;
  ReplayObservers observers;
  observers.check_invariants = options.check_invariants;
  observers.anatomy = options.anatomy;
  StreamedReplayRun run;
  run.header = stream->trace();  // what the replays read; its strings grow as the file is read
  std::vector<std::unique_ptr<StreamedReplay>> replays;
  std::vector<ReplayProgress> verbose;
  for (const std::string& spec : specs) {
    replays.push_back(std::make_unique<StreamedReplay>(spec, device.device, run.header, replay, observers));
    verbose.push_back(terminal_progress(spec));
  }
  std::optional<RequestHasher> hasher;
  if (options.anatomy) hasher.emplace();
  if (!stream_once(*stream, run.header, replays, hasher ? &*hasher : nullptr)) return std::nullopt;

  run.summary = stream->summary();
  if (hasher) run.request_hash = hasher->value();
  log::info(fmt::format("read {}: trace {}, {} events in {:.2f} s (streamed into the replays)", path, run.header.name,
                        run.summary.events,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
  run.device = choose_device(options.device_option, run.header);
  warn_capacity_options(run.device, specs);
  run.start_state = choose_start_state(options.start_option, run.header, specs);
  for (std::size_t i = 0; i < replays.size(); ++i) {
    run.results.push_back(replays[i]->finish());
    // -v says how long each replay took (here: the streamed pass), as ProgressObserver's last
    // report makes it say.
    if (verbose[i]) verbose[i](run.results.back().events_replayed, run.summary.events);
    if (!replays[i]->needs_anatomy_pass()) continue;
    // As PolicyOnDevice::run does: the replay is deterministic, so a second one reaches the same
    // state at the peak event; here the file is streamed again for it.
    std::unique_ptr<TraceStream> again = TraceStream::open(path);
    if (!again) throw InputError(fmt::format("{}: changed while it was read (cannot read it again)", path));
    Trace header = again->trace();
    std::vector<std::unique_ptr<StreamedReplay>> second;
    second.push_back(std::make_unique<StreamedReplay>(specs[i], device.device, header, replay, ReplayObservers{},
                                                      run.results.back().metrics.peak_reserved_event));
    stream_once(*again, header, second, nullptr);
    run.results.back().anatomy_at_peak = second.front()->finish().anatomy_at_peak;
  }
  return run;
}

}  // namespace fraglab::cli
