// The policy authors' kit (fraglab/policy_kit.hpp): option parsing and its messages.
#include "fraglab/policy_kit.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fraglab/sim_device.hpp"

namespace fraglab::kit {

std::optional<bool> parse_flag(std::string_view text) {
  if (text == "True" || text == "true" || text == "1") return true;
  if (text == "False" || text == "false" || text == "0") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> parse_whole(std::string_view text, std::uint64_t max) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end || value > max) return std::nullopt;
  return value;
}

std::optional<Bytes> parse_whole_units(std::string_view text, Bytes unit) {
  const std::optional<std::uint64_t> count = parse_whole(text, std::numeric_limits<Bytes>::max() / unit);
  if (!count) return std::nullopt;
  return *count * unit;
}

std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<Bytes> parse_bytes(std::string_view text) {
  try {
    return parse_byte_size(text, "");
  } catch (const InputError&) {
    return std::nullopt;
  }
}

OptionReader::OptionReader(const PolicyInfo& info, std::string_view text)
    : info_(info), items_(split_options(text, info.name)) {
  for (const OptionItem& item : items_) {
    const bool known = std::any_of(info_.options.begin(), info_.options.end(),
                                   [&](const PolicyOption& o) { return o.name == item.key; });
    if (known) continue;
    std::string accepted;
    for (const PolicyOption& o : info_.options) accepted += (accepted.empty() ? "" : ", ") + o.name;
    throw InputError(fmt::format("{}: unknown option '{}' (accepted: {})", info_.name, item.key, accepted));
  }
}

OptionReader OptionReader::of(std::string_view name, std::string_view text) {
  const PolicyInfo* info = PolicyRegistry::instance().find(name);
  if (info == nullptr) throw std::logic_error(fmt::format("OptionReader: policy '{}' is not registered", name));
  return OptionReader(*info, text);
}

bool OptionReader::given(std::string_view key) const {
  return std::any_of(items_.begin(), items_.end(), [&](const OptionItem& item) { return item.key == key; });
}

std::size_t OptionReader::choice(std::string_view key, const std::vector<std::string_view>& names) const {
  std::string accepted;
  for (std::size_t i = 0; i < names.size(); ++i) {
    accepted += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  }
  return get<std::size_t>(key, accepted, [&](std::string_view text) -> std::optional<std::size_t> {
    const auto it = std::find(names.begin(), names.end(), text);
    if (it == names.end()) return std::nullopt;
    return static_cast<std::size_t>(it - names.begin());
  });
}

void OptionReader::reject(std::string_view key, std::string_view value, std::string_view accepted) const {
  throw InputError(fmt::format("{}: {}: expected {}, got '{}'", info_.name, key, accepted, value));
}

std::string_view OptionReader::default_of(std::string_view key) const {
  for (const PolicyOption& o : info_.options) {
    if (o.name == key) return o.default_value;
  }
  throw std::logic_error(fmt::format("{}: option '{}' is read but not registered", info_.name, key));
}

void OptionReader::throw_bad_default(std::string_view key) const {
  throw std::logic_error(fmt::format("{}: the registered default of option '{}' does not parse", info_.name, key));
}

void audit_segments(AuditLog& log, const std::vector<SegmentView>& segments) {
  Addr end = 0;
  for (const SegmentView& s : segments) {
    log.require(s.addr >= end, [&] { return fmt::format("segment 0x{:x} overlaps the one before", s.addr); });
    Addr at = s.addr;
    for (const SegmentView::Piece& piece : s.blocks) {
      log.require(piece.addr == at && piece.size > 0, [&] {
        return fmt::format("segment 0x{:x} not tiled at 0x{:x} (next piece 0x{:x})", s.addr, at, piece.addr);
      });
      at = piece.addr + piece.size;
    }
    end = s.addr + s.size;
    log.require(at == end,
                [&] { return fmt::format("segment 0x{:x}: pieces end at 0x{:x}, it at 0x{:x}", s.addr, at, end); });
  }
}

}  // namespace fraglab::kit
