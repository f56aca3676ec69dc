// read_input_file and locate_json_error (fraglab/input_file.hpp).
//
// Invariants: every failure is one InputError naming the path; nothing is read from a directory,
// device or socket; no more than max_bytes + 1 bytes are ever read or held; opening never blocks
// (a FIFO without a writer reads as empty instead of waiting for one).
#include "fraglab/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace fraglab {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return nullptr;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path, std::string_view expected, Bytes max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}; expected {}", path, std::strerror(errno), expected));
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw InputError(fmt::format("{}: cannot read: {}; expected {}", path, std::strerror(errno), expected));
  if (const char* kind = kind_of(st.st_mode))
    throw InputError(fmt::format("{}: is {}; expected {}", path, kind, expected));
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<Bytes>(st.st_size) > max_bytes) {
    throw InputError(fmt::format("{}: is {} bytes ({}), more than the {} accepted for {}", path, st.st_size,
                                 format_bytes(static_cast<Bytes>(st.st_size)), format_bytes(max_bytes), expected));
  }
  // Blocking reads from here on: a pipe with a writer waits for its data, one without ends at once.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);

  std::string bytes;
  std::size_t len = 0;
  try {
    const std::size_t cap = static_cast<std::size_t>(max_bytes) + 1;  // +1: the byte that shows it is too long
    bytes.resize(regular ? static_cast<std::size_t>(st.st_size) + 1 : std::min<std::size_t>(cap, 1 << 16));
    for (;;) {
      if (len == bytes.size()) {
        if (len >= cap) break;
        bytes.resize(std::min(cap, len * 2));
      }
      const ssize_t n = ::read(fd, bytes.data() + len, bytes.size() - len);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw InputError(fmt::format("{}: cannot read: {}; expected {}", path, std::strerror(errno), expected));
      }
      if (n == 0) break;
      len += static_cast<std::size_t>(n);
    }
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format("{}: too large to hold in memory ({} bytes read); expected {}", path, len, expected));
  }
  if (len > max_bytes) {
    throw InputError(fmt::format("{}: stopped after {} of a {} that does not end; expected {}", path,
                                 format_bytes(max_bytes), regular ? "file that grows and" : "stream", expected));
  }
  bytes.resize(len);
  return bytes;
}

JsonErrorAt locate_json_error(std::string_view text, std::size_t byte, std::string_view library_message) {
  // nlohmann's byte position is one past the character it stopped at.
  const std::size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  JsonErrorAt at;
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
  }
  std::string_view what = library_message;
  if (what.starts_with('[')) {
    const std::size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  // "parse error at line 1, column 2: " (and "parse error: ") carry a position we give ourselves.
  if (what.starts_with("parse error")) {
    const std::size_t colon = what.find(": ");
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  at.what = std::string(what);
  for (char& c : at.what) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return at;
}

}  // namespace fraglab
