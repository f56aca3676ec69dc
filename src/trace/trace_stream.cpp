// TraceStream: see include/fraglab/trace_stream.hpp.
//
// The buffer holds [begin, end) of the file's bytes not parsed yet; a window is its longest prefix
// that ends just after a '\n' (or all of it at the end of the file), so no line is ever split.
// What follows the window's last '\n' moves to the front before the next read.
#include "fraglab/trace_stream.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "trace/input_sniff.hpp"
#include "trace/jsonl_reader.hpp"

namespace fraglab {

struct TraceStream::Impl {
  Impl(std::string origin, const ReadProgress& report)
      : path(std::move(origin)), progress(report), reader(path, progress) {}
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  // Reads until the buffer is full or the file ends; a full buffer without a '\n' grows first.
  void fill() {
    if (begin > 0) {
      std::memmove(buffer.get(), buffer.get() + begin, end - begin);
      offset += begin;
      end -= begin;
      begin = 0;
    }
    if (end == capacity) grow();
    while (!at_eof && end < capacity) {
      const ssize_t n = ::read(fd, buffer.get() + end, capacity - end);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw InputError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
      }
      if (n == 0) at_eof = true;
      end += static_cast<std::size_t>(n);
    }
  }
  void grow() {
    std::unique_ptr<char[]> bigger(new char[capacity * 2]);  // default-initialised: not zeroed
    std::memcpy(bigger.get(), buffer.get(), end);
    buffer = std::move(bigger);
    capacity *= 2;
  }
  // The next window (fills the buffer as needed); empty at the end of the file.
  std::string_view window() {
    for (;;) {
      const std::string_view bytes(buffer.get() + begin, end - begin);
      if (at_eof) return bytes;
      const std::size_t nl = bytes.rfind('\n');
      if (nl != std::string_view::npos) return bytes.substr(0, nl + 1);
      fill();
    }
  }
  void start(std::string_view w) {
    reader.start_window(w, offset + begin, total);
    begin += w.size();
  }

  std::string path;
  ReadProgress progress;
  detail::JsonlWindowReader reader;
  int fd = -1;
  std::unique_ptr<char[]> buffer;
  std::size_t capacity = 0;
  std::size_t begin = 0, end = 0;  // unparsed bytes in the buffer
  std::uint64_t offset = 0;        // file offset of buffer[0]
  std::uint64_t total = 0;         // the file's size
  bool at_eof = false;
  bool window_open = false;  // the window the header came from still has events to read
  std::uint64_t events = 0;
};

TraceStream::TraceStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceStream::~TraceStream() = default;

std::unique_ptr<TraceStream> TraceStream::open(const std::string& path, const ReadProgress& progress,
                                               std::size_t window_bytes) {
  if (path == kStdinPath || (path.size() >= 3 && path.ends_with(".gz"))) return nullptr;
  auto impl = std::make_unique<Impl>(path, progress);
  impl->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(impl->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return nullptr;
  impl->total = static_cast<std::uint64_t>(st.st_size);
  impl->capacity = std::max<std::size_t>(window_bytes, 64);
  impl->buffer.reset(new char[impl->capacity]);
  // Anything the whole-file reader would refuse or read another way is left to it (and its errors).
  try {
    impl->fill();
    const std::string_view start(impl->buffer.get(), impl->end);
    if (start.empty() || static_cast<unsigned char>(start[0]) == 0x80 || static_cast<unsigned char>(start[0]) == 0x1f)
      return nullptr;  // empty, a pickle, or gzip
    if (detail::not_a_trace(start)) return nullptr;
    impl->start(impl->window());
    if (!impl->reader.read_header()) return nullptr;  // only blank lines in the first window
  } catch (const InputError&) {
    return nullptr;
  }
  const Trace& header = impl->reader.trace();
  if (!header.initial.empty() || impl->reader.has_stacks() || !header.frames.empty()) return nullptr;
  if (header.name.empty()) impl->reader.trace().name = detail::default_trace_name(path);
  impl->window_open = true;
  return std::unique_ptr<TraceStream>(new TraceStream(std::move(impl)));
}

const Trace& TraceStream::trace() const { return impl_->reader.trace(); }

bool TraceStream::next(std::vector<Event>& events) {
  events.clear();
  Impl& s = *impl_;
  while (events.empty()) {
    if (!s.window_open) {
      const std::string_view w = s.window();
      if (w.empty()) {
        if (s.progress) s.progress(s.total, s.total);
        return false;
      }
      s.start(w);
    }
    s.window_open = false;
    s.reader.read_events(events);
  }
  s.events += events.size();
  return true;
}

TraceSummary TraceStream::summary() const { return impl_->reader.summary(impl_->events); }

}  // namespace fraglab
