// What a non-trace input looks like (input_sniff.hpp). The magic numbers are the formats people
// hand over by mistake: torch.save's zip archive (the usual .pt), other compressors than gzip,
// a results / baseline JSON, a binary.
#include "trace/input_sniff.hpp"

#include <fmt/format.h>

#include <array>

namespace fraglab::detail {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f'; }

struct Magic {
  std::string_view bytes;
  std::string_view looks_like;
};
constexpr std::array<Magic, 6> kMagics{{
    // torch.save() writes a zip since PyTorch 1.6; an empty zip starts with its end record.
    {"PK\x03\x04", "a torch.save/zip archive"},
    {"PK\x05\x06", "a torch.save/zip archive"},
    {"BZh", "bzip2-compressed data (only gzip is decompressed)"},
    {std::string_view("\xfd"
                      "7zXZ\0",
                      6),
     "xz-compressed data (only gzip is decompressed)"},
    {"\x28\xb5\x2f\xfd", "zstd-compressed data (only gzip is decompressed)"},
    {"\x7f"
     "ELF",
     "an executable (ELF)"},
}};

}  // namespace

std::string hex_prefix(std::string_view bytes, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < n; ++i)
    out += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(bytes[i]));
  return out;
}

std::optional<std::string> not_a_trace_start(std::string_view prefix) {
  if (prefix.empty()) return std::nullopt;
  const auto first = static_cast<unsigned char>(prefix[0]);
  if (first == 0x80) return std::nullopt;  // a pickle's PROTO opcode (protocol >= 2)
  if (first == 0x1f && (prefix.size() == 1 || static_cast<unsigned char>(prefix[1]) == 0x8b))
    return std::nullopt;  // gzip (RFC 1952 magic)
  for (const Magic& m : kMagics) {
    if (starts_with(prefix, m.bytes)) {
      if (m.bytes[0] == 'P')  // the case issue reports name: say what is wanted instead
        return fmt::format(
            "looks like {} (it starts with {}); expected a memory snapshot from "
            "torch.cuda.memory._dump_snapshot() or a fraglab JSONL trace",
            m.looks_like, hex_prefix(prefix));
      return fmt::format("looks like {} (it starts with {}); {}", m.looks_like, hex_prefix(prefix), kExpectedTrace);
    }
    // Too few bytes yet to rule this magic number out.
    if (prefix.size() < m.bytes.size() && starts_with(m.bytes, prefix)) return std::nullopt;
  }
  std::size_t i = 0;
  while (i < prefix.size() && is_blank(prefix[i])) ++i;
  if (i == prefix.size()) return std::nullopt;  // blank so far
  const char c = prefix[i];
  if (c == '{') return std::nullopt;  // JSONL or JSON: told apart by the whole first line
  if (c == '[') return fmt::format("looks like JSON (an array), not fraglab JSONL; {}", kExpectedTrace);
  for (std::size_t j = 0; j < prefix.size() && j < kSniffBytes; ++j) {
    const auto b = static_cast<unsigned char>(prefix[j]);
    if ((b < 0x20 && !is_blank(prefix[j])) || b == 0x7f)
      return fmt::format("looks like binary data (it starts with {}); {}", hex_prefix(prefix), kExpectedTrace);
  }
  std::string_view line = prefix.substr(i, std::min<std::size_t>(prefix.find('\n', i) - i, 40));
  return fmt::format("looks like text that is not a trace (it starts \"{}\"); {}", line, kExpectedTrace);
}

std::optional<std::string> not_a_trace(std::string_view bytes) {
  if (bytes.empty()) return fmt::format("is empty; {}", kExpectedTrace);
  if (auto what = not_a_trace_start(bytes.substr(0, kSniffBytes))) return what;
  if (static_cast<unsigned char>(bytes[0]) == 0x80) return std::nullopt;
  std::size_t i = 0;
  while (i < bytes.size() && is_blank(bytes[i])) ++i;
  if (i == bytes.size()) return fmt::format("has only blank lines; {}", kExpectedTrace);
  // bytes[i] is '{' (not_a_trace_start refused everything else). JSONL's header names the
  // format on its first line (README "Traces"); pretty-printed or other JSON does not.
  std::string_view line = bytes.substr(i, bytes.find('\n', i) - i);
  if (line.find("\"fraglab_trace\"") != std::string_view::npos) return std::nullopt;
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  if (line == "{")
    return fmt::format(
        "looks like pretty-printed JSON (its first line is \"{{\"), not fraglab "
        "JSONL; expected one JSON object per line, the first "
        "{{\"fraglab_trace\": 1, ...}}");
  return fmt::format(
      "looks like JSON, not a fraglab JSONL trace: its first line has no "
      "\"fraglab_trace\" key (expected a first line {{\"fraglab_trace\": 1, ...}})");
}

}  // namespace fraglab::detail
