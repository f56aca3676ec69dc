// Trace files: reading whole files or standard input ("-"; gzip transparently inflated),
// refusing what is no trace, picking the reader from the first bytes, and writing JSONL files
// (gzip-compressed when the name ends in ".gz").
//
// Invariants:
//  - read_file_bytes() returns the decompressed content or throws InputError naming the path; a
//    gzip stream that is truncated or corrupt is an error, never a silently shorter trace;
//  - concatenated gzip members (what `cat a.gz b.gz` gives) are read as one stream, as gzip does;
//  - no input ends in anything but an InputError: a directory, a stream that never ends, one too
//    large for memory, a ".gz" that is not gzip, and (for traces) bytes that cannot start a trace
//    are each refused in one line naming the input (input_sniff.hpp says what they look like);
//  - regular files are read in one piece of their size (the fast path), into a buffer that is not
//    zero-filled first (read() overwrites it); only streams (pipes,
//    FIFOs, devices, stdin) are read in growing pieces and sniffed after their first bytes;
//  - gzip input is sniffed as soon as its first inflated bytes come out (a bomb of zeros fails
//    at once), and its inflated size is capped: beyond kInflateFloor, at most kMaxInflateRatio
//    times the compressed size, and never beyond the memory budget (fraglab/memory_budget.hpp),
//    so a small file cannot make us hold gigabytes;
//  - running out of memory (std::bad_alloc, which --max-memory makes happen at the budget) while
//    reading or parsing is an InputError naming the input and the budget;
//  - the gzip we write has no timestamp or file name in its header, so the same trace gives the
//    same bytes.
#include <fmt/format.h>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <streambuf>

#include "fraglab/memory_budget.hpp"
#include "fraglab/trace_io.hpp"
#include "trace/frame_interner.hpp"
#include "trace/input_sniff.hpp"
#include "trace/jsonl_reader.hpp"

namespace fraglab {

namespace {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// zlib counts in 32-bit uInt: feed and drain larger buffers in pieces of this size.
constexpr std::size_t kZlibChunk = std::size_t{1} << 30;

// How much gzip input may inflate to. Real traces inflate 8-30 times (the shipped JSONL .gz 8-9x,
// real snapshots 8-29x); a bomb inflates ~1000x (gzip's limit is 1032:1). Beyond the floor, text
// may be at most kMaxInflateRatio times the compressed size, the ratio Apache POI's zip-bomb guard
// uses by default, and never more than the memory budget.
constexpr std::size_t kInflateFloor = std::size_t{256} << 20;
constexpr std::size_t kMaxInflateRatio = 100;

std::size_t inflate_limit(std::size_t compressed) {
  const std::size_t by_ratio =
      compressed > kZlibChunk * 1024 ? ~std::size_t{0} : std::max(kInflateFloor, compressed * kMaxInflateRatio);
  return static_cast<std::size_t>(std::min<Bytes>({by_ratio, memory_budget(), ~std::size_t{0} - 1}));
}

[[noreturn]] void not_a_trace_error(const std::string& origin, const std::string& what, bool gzipped);

// `in` inflated. as_trace: the first inflated bytes are sniffed (detail::not_a_trace_start) as
// soon as there are enough of them, so an input that is no trace fails before it is inflated.
std::string gunzip(std::string_view in, const std::string& path, bool as_trace) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK)  // 15 + 16: gzip wrapper only
    throw InputError(fmt::format("{}: cannot start gzip decompression", path));
  const std::size_t limit = inflate_limit(in.size());
  std::string out;
  std::size_t in_pos = 0, out_pos = 0;
  bool sniffed = !as_trace;
  auto fail = [&](std::string_view what) {
    inflateEnd(&zs);
    throw InputError(fmt::format("{}: {}", path, what));
  };
  try {
    // A first buffer of 4x the input (most traces inflate more, and grow it a few times), not
    // beyond the limit (+1: the byte that shows the limit was passed).
    out.resize(std::min(std::max<std::size_t>(in.size() * 4, 1 << 16), limit + 1));
  } catch (const std::bad_alloc&) {
    inflateEnd(&zs);
    throw;
  }
  for (;;) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      std::size_t n = std::min(in.size() - in_pos, kZlibChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (out_pos == out.size()) {
      if (out_pos > limit)
        fail(
            fmt::format("gzip data of {} inflates to more than {}, the most it may ({} times its compressed size "
                        "beyond {}, and within the memory budget of {} (--max-memory)); expected a gzip-compressed "
                        "trace (real ones inflate 8-30 times)",
                        format_bytes(in.size()), format_bytes(limit), kMaxInflateRatio, format_bytes(kInflateFloor),
                        format_bytes(memory_budget())));
      try {
        out.resize(std::min(out.size() * 2, limit + 1));
      } catch (const std::bad_alloc&) {
        inflateEnd(&zs);
        throw;
      }
    }
    std::size_t room = std::min(out.size() - out_pos, kZlibChunk);
    // While not sniffed yet, inflate a little at a time: the first bytes decide.
    if (!sniffed) room = std::min(room, detail::kSniffBytes - std::min(out_pos, detail::kSniffBytes - 1));
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(room);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out_pos += room - zs.avail_out;
    if (!sniffed && out_pos >= detail::kSniffBytes) {
      sniffed = true;
      if (auto what = detail::not_a_trace_start(std::string_view(out.data(), out_pos))) {
        inflateEnd(&zs);
        not_a_trace_error(path, *what, true);
      }
    }
    if (rc == Z_STREAM_END) {
      std::size_t consumed = in_pos - zs.avail_in;
      if (consumed == in.size()) break;
      // Another member follows (gzip files may be concatenated); anything else is corrupt.
      if (!is_gzip(in.substr(consumed)))
        fail(fmt::format("unexpected bytes after the gzip data at offset {}", consumed));
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == in.size())
      fail("truncated gzip data (the file ends inside the compressed stream)");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      fail(fmt::format("corrupt gzip data ({})", zs.msg ? zs.msg : "inflate failed"));
  }
  inflateEnd(&zs);
  out.resize(out_pos);
  return out;
}

// What a std::bad_alloc while reading `origin` becomes.
[[noreturn]] void out_of_memory(const std::string& origin) {
  throw InputError(fmt::format("{}: reading it needs more memory than the memory budget of {} allows (--max-memory)",
                               origin, format_bytes(memory_budget())));
}

// A streambuf that gzip-compresses what is written to it into another stream, so write_jsonl
// streams straight into a .gz file without the whole text in memory.
class GzipStreambuf : public std::streambuf {
 public:
  explicit GzipStreambuf(std::ostream& sink) : sink_(sink) {
    // Level 6 (zlib's default); 15 + 16 asks for a gzip wrapper with an all-zero header.
    ok_ = deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~GzipStreambuf() override { deflateEnd(&zs_); }
  GzipStreambuf(const GzipStreambuf&) = delete;
  GzipStreambuf& operator=(const GzipStreambuf&) = delete;

  // Flushes the final block and the gzip trailer. False if compression or the sink failed.
  bool finish() {
    if (ok_) compress(nullptr, 0, Z_FINISH);
    return ok_ && sink_.good();
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (!ok_) return 0;
    for (std::streamsize done = 0; done < n;) {
      auto piece =
          static_cast<std::size_t>(std::min<std::streamsize>(n - done, static_cast<std::streamsize>(kZlibChunk)));
      compress(s + done, piece, Z_NO_FLUSH);
      done += static_cast<std::streamsize>(piece);
    }
    return ok_ ? n : 0;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

 private:
  void compress(const char* data, std::size_t n, int flush) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    zs_.avail_in = static_cast<uInt>(n);
    char out[1 << 16];
    int rc;
    do {
      zs_.next_out = reinterpret_cast<Bytef*>(out);
      zs_.avail_out = sizeof out;
      rc = deflate(&zs_, flush);
      if (rc == Z_STREAM_ERROR) {
        ok_ = false;
        return;
      }
      sink_.write(out, static_cast<std::streamsize>(sizeof out - zs_.avail_out));
    } while (zs_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }

  std::ostream& sink_;
  z_stream zs_{};
  bool ok_ = false;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string origin_of(const std::string& path) { return path == kStdinPath ? std::string(kStdinOrigin) : path; }

// 0x80 is the PROTO opcode that starts every pickle of protocol 2 or later (snapshots are 2, 4
// or 5, allocator-model §11.1); JSONL starts with '{' or whitespace.
bool is_pickle(std::string_view bytes) { return !bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80; }

// Streams (pipes, FIFOs, character devices) have no size to trust: read them in pieces, up to
// this much (far beyond any trace; an endless stream of plausible text stops here).
constexpr std::size_t kMaxStreamBytes = std::size_t{64} << 30;
constexpr std::size_t kStreamChunk = std::size_t{1} << 20;

// Standard input can be read once; a second "-" in the same run would see it empty.
std::atomic<bool> stdin_taken{false};

[[noreturn]] void not_a_trace_error(const std::string& origin, const std::string& what, bool gzipped) {
  throw InputError(fmt::format("{}: {}{}", origin, gzipped ? "after gzip decompression, " : "", what));
}

// A file's bytes in a buffer that is never zero-filled first (read() overwrites it: the memset
// of std::string::resize cost a sixth of reading a large trace), or gzip's inflated text.
class FileBytes {
 public:
  std::string_view view() const {
    return inflated_ ? std::string_view(*inflated_) : std::string_view(data_.get(), size_);
  }
  // Room for at least `capacity` bytes, keeping the first size() (a stream's buffer growing).
  void reserve(std::size_t capacity) {
    if (capacity <= capacity_) return;
    std::unique_ptr<char[]> bigger(new char[capacity]);  // default-initialised: not zeroed
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  char* data() { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  void set_size(std::size_t size) { size_ = size; }
  void replace_with(std::string text) {
    inflated_ = std::move(text);
    data_.reset();
    size_ = capacity_ = 0;
  }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::optional<std::string> inflated_;
};

// Every byte of an open descriptor. `regular`: its size is `size` (read in one piece, then to
// the end in case it grew); otherwise a stream, capped at kMaxStreamBytes and, for a trace,
// refused as soon as its first bytes cannot start one (detail::not_a_trace_start).
FileBytes read_fd(int fd, const std::string& origin, bool regular, std::size_t size, bool as_trace) {
  FileBytes bytes;
  std::size_t len = 0;
  bool sniffed = regular || !as_trace;
  if (regular) check_memory_estimate(size, origin);  // before holding it all
  try {
    bytes.reserve(regular ? size + 1 : kStreamChunk);  // +1: the read that sees the end
    for (;;) {
      if (len == bytes.capacity()) {
        if (!regular && len >= kMaxStreamBytes)
          throw InputError(
              fmt::format("{}: stopped after {} bytes of a stream that does not "
                          "end; expected a trace file",
                          origin, len));
        bytes.reserve(std::min(len * 2, kMaxStreamBytes));
      }
      ssize_t n = ::read(fd, bytes.data() + len, bytes.capacity() - len);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw InputError(fmt::format("{}: cannot read: {}", origin, std::strerror(errno)));
      }
      if (n == 0) break;
      len += static_cast<std::size_t>(n);
      if (!sniffed && len >= detail::kSniffBytes) {
        sniffed = true;
        if (auto what = detail::not_a_trace_start(std::string_view(bytes.data(), len)))
          not_a_trace_error(origin, *what, false);
      }
    }
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format("{}: too large to hold in memory ({} bytes{}; the memory budget is {}, --max-memory)",
                                 origin, regular ? size : len, regular ? "" : " read", format_bytes(memory_budget())));
  }
  bytes.set_size(len);
  return bytes;
}

// The bytes of `path` ("-": stdin), gzip inflated; as_trace: refused with a one-line "looks
// like ..." message when they cannot be a trace (input_sniff.hpp).
FileBytes read_input(const std::string& path, bool as_trace) {
  const std::string origin = origin_of(path);
  const bool from_stdin = path == kStdinPath;
  int fd = STDIN_FILENO;
  if (from_stdin) {
    if (stdin_taken.exchange(true))
      throw InputError(
          fmt::format("{}: already read for an earlier '-' (standard input can be "
                      "given once)",
                      origin));
    if (::isatty(fd))
      throw InputError(
          fmt::format("{}: is a terminal; expected a trace piped or redirected in "
                      "(e.g. fraglab inspect - < trace.jsonl)",
                      origin));
  } else {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", origin, std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    bool owned;
    ~FdCloser() {
      if (owned) ::close(fd);
    }
  } closer{fd, !from_stdin};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(fmt::format("{}: cannot read: {}", origin, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    throw InputError(
        fmt::format("{}: is a directory; {}", origin, as_trace ? detail::kExpectedTrace : "expected a file"));
  const bool regular = S_ISREG(st.st_mode);
  FileBytes bytes = read_fd(fd, origin, regular, regular ? static_cast<std::size_t>(st.st_size) : 0, as_trace);
  const bool gzipped = is_gzip(bytes.view());
  if (!gzipped && !from_stdin && ends_with(path, ".gz") && !bytes.view().empty())
    throw InputError(
        fmt::format("{}: is named .gz but is not gzip data (it starts with {}); "
                    "expected a gzip stream (starting 1f 8b)",
                    origin, detail::hex_prefix(bytes.view())));
  if (gzipped) {
    try {
      std::string text = gunzip(bytes.view(), origin, as_trace);
      bytes.replace_with(std::move(text));
    } catch (const std::bad_alloc&) {
      out_of_memory(origin);
    }
  }
  if (as_trace) {
    if (auto what = detail::not_a_trace(bytes.view())) not_a_trace_error(origin, *what, gzipped);
  }
  return bytes;
}

}  // namespace

namespace detail {

std::string default_trace_name(const std::string& path) {
  if (path == kStdinPath) return "stdin";
  std::filesystem::path p(path);
  if (p.extension() == ".gz") p = p.stem();
  return p.stem().string();
}

}  // namespace detail

std::string read_file_bytes(const std::string& path) { return std::string(read_input(path, false).view()); }

Trace read_trace(const std::string& path, const TraceReadOptions& options) {
  const std::string origin = origin_of(path);
  try {
    const FileBytes file = read_input(path, true);
    const std::string_view bytes = file.view();
    Trace trace;
    if (is_pickle(bytes)) {
      trace = parse_snapshot(bytes, origin, options);
    } else {
      trace = parse_jsonl(bytes, origin, options.progress);
      detail::keep_top_frames(trace, options.frames);  // a file's frames, as many as asked for
    }
    if (trace.name.empty()) trace.name = detail::default_trace_name(path);
    return trace;
  } catch (const std::bad_alloc&) {
    out_of_memory(origin);
  }
}

std::vector<std::pair<int, Trace>> read_trace_devices(const std::string& path) {
  const std::string origin = origin_of(path);
  try {
    const FileBytes file = read_input(path, true);
    const std::string_view bytes = file.view();
    std::vector<std::pair<int, Trace>> traces;
    if (is_pickle(bytes)) {
      traces = parse_snapshot_devices(bytes, origin);
    } else {
      traces.emplace_back(0, parse_jsonl(bytes, origin));
    }
    for (auto& [device, trace] : traces) {
      if (trace.name.empty()) trace.name = detail::default_trace_name(path);
    }
    return traces;
  } catch (const std::bad_alloc&) {
    out_of_memory(origin);
  }
}

void write_jsonl_file(const Trace& trace, const std::string& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  bool ok;
  if (ends_with(path, ".gz")) {
    GzipStreambuf gz(file);
    std::ostream out(&gz);
    write_jsonl(trace, out);
    ok = out.good() && gz.finish();
  } else {
    write_jsonl(trace, file);
    ok = true;
  }
  file.flush();
  if (!ok || !file) throw InputError(fmt::format("{}: write failed", path));
}

}  // namespace fraglab
