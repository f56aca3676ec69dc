// Trace files: reading whole files (gzip transparently inflated), picking the reader from the
// first bytes, and writing JSONL files (gzip-compressed when the name ends in ".gz").
//
// Invariants:
//  - read_file_bytes() returns the decompressed content or throws InputError naming the path; a
//    gzip stream that is truncated or corrupt is an error, never a silently shorter trace;
//  - concatenated gzip members (what `cat a.gz b.gz` gives) are read as one stream, as gzip does;
//  - the gzip we write has no timestamp or file name in its header, so the same trace gives the
//    same bytes.
#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <streambuf>

#include "fraglab/trace_io.hpp"

namespace fraglab {

namespace {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// zlib counts in 32-bit uInt: feed and drain larger buffers in pieces of this size.
constexpr std::size_t kZlibChunk = std::size_t{1} << 30;

std::string gunzip(std::string_view in, const std::string& path) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK)  // 15 + 16: gzip wrapper only
    throw InputError(fmt::format("{}: cannot start gzip decompression", path));
  std::string out;
  out.resize(std::max<std::size_t>(in.size() * 4, 1 << 16));
  std::size_t in_pos = 0, out_pos = 0;
  auto fail = [&](std::string_view what) {
    inflateEnd(&zs);
    throw InputError(fmt::format("{}: {}", path, what));
  };
  for (;;) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      std::size_t n = std::min(in.size() - in_pos, kZlibChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (out_pos == out.size()) out.resize(out.size() * 2);
    std::size_t room = std::min(out.size() - out_pos, kZlibChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(room);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out_pos += room - zs.avail_out;
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

// A streambuf that gzip-compresses what is written to it into another stream, so write_jsonl
// streams straight into a .gz file without the whole text in memory.
class GzipStreambuf : public std::streambuf {
 public:
  explicit GzipStreambuf(std::ostream& sink) : sink_(sink) {
    // Level 6 (zlib's default); 15 + 16 asks for a gzip wrapper with an all-zero header.
    ok_ = deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) ==
          Z_OK;
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
      auto piece = static_cast<std::size_t>(
          std::min<std::streamsize>(n - done, static_cast<std::streamsize>(kZlibChunk)));
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

// "runs/step3.jsonl.gz" -> "step3": the default trace name (trace.hpp).
std::string file_stem(const std::string& path) {
  std::filesystem::path p(path);
  if (p.extension() == ".gz") p = p.stem();
  return p.stem().string();
}

}  // namespace

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string bytes;
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size > 0) {  // a regular file: read it in one go
    bytes.resize(static_cast<std::size_t>(size));
    in.seekg(0);
    in.read(bytes.data(), size);
    if (in.gcount() != size) throw InputError(fmt::format("{}: read error", path));
  } else {  // a pipe or special file: read until the end
    in.clear();
    in.seekg(0);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (is_gzip(bytes)) return gunzip(bytes, path);
  return bytes;
}

Trace read_trace(const std::string& path, const TraceReadOptions& options) {
  std::string bytes = read_file_bytes(path);
  // 0x80 is the PROTO opcode that starts every pickle of protocol 2 or later; JSONL starts with
  // '{' or whitespace.
  Trace trace = !bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80
                    ? parse_snapshot(bytes, path, options)
                    : parse_jsonl(bytes, path);
  if (trace.name.empty()) trace.name = file_stem(path);
  return trace;
}

std::vector<std::pair<int, Trace>> read_trace_devices(const std::string& path) {
  std::string bytes = read_file_bytes(path);
  std::vector<std::pair<int, Trace>> traces;
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    traces = parse_snapshot_devices(bytes, path);
  } else {
    traces.emplace_back(0, parse_jsonl(bytes, path));
  }
  for (auto& [device, trace] : traces) {
    if (trace.name.empty()) trace.name = file_stem(path);
  }
  return traces;
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
