// Option parsing with each version's tokeniser and validation messages (allocator-model §10).
//
// Structure: `version:` is taken out first (it selects everything else); then the rest of the
// string goes through the selected version's tokeniser; each recognised key is handled by one
// function below shared by all versions, which only differ in the wording of their errors.
#include "pytorch/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "fraglab/types.hpp"

namespace fraglab::cca {
namespace {

[[noreturn]] void fail(std::string_view message) { throw InputError(fmt::format("pytorch: {}", message)); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// ---- number parsing with std::stoi / stoull / stod semantics (a numeric prefix is enough) ------

enum class IntWidth { Int32, UInt64 };  // stoi (<= 2.8) or stoull (2.9+)

Bytes parse_unsigned(std::string_view text, std::string_view key, IntWidth width) {
  const std::string s(text);
  const char* begin = s.c_str();
  while (std::isspace(static_cast<unsigned char>(*begin))) ++begin;
  if (*begin == '-') fail(fmt::format("{}: expected a non-negative integer, got '{}'", key, text));
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(begin, &end, 10);
  if (end == begin) fail(fmt::format("{}: expected an integer, got '{}'", key, text));
  const unsigned long long limit = width == IntWidth::Int32
                                       ? static_cast<unsigned long long>(std::numeric_limits<int>::max())
                                       : std::numeric_limits<unsigned long long>::max();
  if (errno == ERANGE || value > limit) fail(fmt::format("{}: integer '{}' is out of range", key, text));
  return value;
}

double parse_double(std::string_view text, std::string_view key) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) fail(fmt::format("{}: expected a number, got '{}'", key, text));
  return value;
}

// ---- tokenisers -----------------------------------------------------------------------------

// 2.0+: ',', ':', '[', ']' are tokens; other characters form words; spaces are dropped
// (2.0-2.8: only ' '; 2.9+: any whitespace).
std::vector<std::string> lex(std::string_view text, bool drop_all_whitespace) {
  std::vector<std::string> tokens;
  std::string word;
  for (char ch : text) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!word.empty()) tokens.push_back(std::move(word)), word.clear();
      tokens.emplace_back(1, ch);
    } else if (drop_all_whitespace ? !std::isspace(static_cast<unsigned char>(ch)) : ch != ' ') {
      word += ch;
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

// 1.13: items split on runs of whitespace and commas, each item on runs of ':'.
std::vector<std::vector<std::string>> split_113(std::string_view text) {
  std::vector<std::vector<std::string>> items;
  std::size_t i = 0;
  auto is_sep = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
  while (i <= text.size()) {
    std::size_t j = i;
    while (j < text.size() && !is_sep(text[j])) ++j;
    const std::string_view item = text.substr(i, j - i);
    std::vector<std::string> parts;
    std::size_t a = 0;
    while (a <= item.size()) {
      std::size_t b = item.find(':', a);
      if (b == std::string_view::npos) b = item.size();
      parts.emplace_back(item.substr(a, b - a));
      std::size_t c = b;
      while (c < item.size() && item[c] == ':') ++c;
      if (c >= item.size()) break;  // an empty trailing part is not produced
      a = c;
    }
    if (!item.empty()) items.push_back(std::move(parts));
    while (j < text.size() && is_sep(text[j])) ++j;
    if (j >= text.size()) break;
    i = j;
  }
  return items;
}

// ---- the parser -----------------------------------------------------------------------------

class Parser {
 public:
  Parser(Config& config) : c_(config), v_(config.version) {}

  void run(std::string_view text) {
    switch (parser_style(v_)) {
      case ParserStyle::Regex113:
        run_113(text);
        break;
      case ParserStyle::Lexer:
        run_lexer(text);
        break;
      case ParserStyle::Tokenizer:
        run_tokenizer(text);
        break;
    }
  }

 private:
  bool strict() const { return parser_style(v_) == ParserStyle::Lexer; }
  std::size_t mib_limit() const { return kUnlimited / MiB; }

  // -- token access with the version's error behaviour --
  // 2.9+ ConfigTokenizer stops with "Index out of bounds" when the config ends early; say which
  // key was being read and what it expected, keeping PyTorch's words at the end.
  void check_index(std::size_t i, std::string_view expected) const {
    if (i >= t_.size()) {
      fail(fmt::format("{}: the config ends where {} was expected (PyTorch: Index out of bounds in ConfigTokenizer)",
                       key_, expected));
    }
  }
  void expect(std::size_t i, char c) const {
    if (strict()) {
      if (i >= t_.size() || t_[i] != std::string(1, c)) {
        fail(fmt::format("Error parsing CachingAllocator settings, expected {}", c));
      }
    } else {
      check_index(i, fmt::format("'{}'", c));  // 2.9+: the comparison result is ignored (§10.1)
    }
  }
  const std::string& value_at(std::size_t i, std::string_view missing) const {
    if (strict()) {
      if (i >= t_.size()) fail(missing);
    } else {
      check_index(i, "a value");
    }
    return t_[i];
  }
  bool bool_at(std::size_t i, std::string_view key) const {
    if (strict()) {
      if (i >= t_.size() || (t_[i] != "True" && t_[i] != "False")) {
        fail(fmt::format("Expected a single True/False argument for {}", key));
      }
      return t_[i] == "True";
    }
    check_index(i, "True or False");
    if (t_[i] == "True") return true;
    if (t_[i] == "False") return false;
    fail(fmt::format("Expected 'True' or 'False' at index {} in ConfigTokenizer but got '{}'", i, t_[i]));
  }
  IntWidth int_width() const { return strict() ? IntWidth::Int32 : IntWidth::UInt64; }
  // ConfigTokenizer::skipKey: past ':' and the value (a whole [...] list).
  std::size_t skip_key(std::size_t i) const {
    expect(++i, ':');
    check_index(++i, "a value");
    if (t_[i] != "[") return i;
    while (++i < t_.size() && t_[i] != "]") {}
    if (i >= t_.size()) fail("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
    return i;
  }

  // -- the options (shared by all versions) --
  void set_max_split(std::string_view text, std::string_view key, Bytes& target) {
    const Bytes mb = parse_unsigned(text, key, int_width());
    if (v_ >= Version::Newest) {
      const Bytes min_mb = c_.large_segment_size / MiB;
      if (mb < min_mb) fail(fmt::format("CachingAllocator option {} too small, must be >= {}", key, min_mb));
    } else if (max_split_min_inclusive(v_)) {
      if (mb < kLargeBuffer / MiB) fail(fmt::format("CachingAllocator option {} too small, must be >= 20", key));
    } else if (mb <= kLargeBuffer / MiB) {
      fail(fmt::format("CachingAllocator option {} too small, must be > 20", key));
    }
    target = std::min<Bytes>(mb, mib_limit()) * MiB;
  }
  void set_gc_threshold(std::string_view text) {
    const double value = parse_double(text, "garbage_collection_threshold");
    if (v_ >= Version::V2_9) {
      if (!(value > 0 && value < 1.0)) fail("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    } else {
      if (!(value > 0)) fail("garbage_collect_threshold too small, set it 0.0~1.0");
      if (!(value < 1.0)) fail("garbage_collect_threshold too big, set it 0.0~1.0");
    }
    c_.garbage_collection_threshold = value;
  }
  std::string divisions_message(bool list) const {
    const char* word = divisions_typo(v_) ? "divisons" : "divisions";
    if (list && list_allows_zero_division(v_)) {
      return fmt::format("For roundups, the {} has to be power of 2 or 0 to disable roundup ", word);
    }
    return fmt::format("For roundups, the {} has to be power of 2 ", word);
  }
  void set_scalar_divisions(std::string_view text) {
    const Bytes d = parse_unsigned(text, "roundup_power2_divisions", int_width());
    if (!std::has_single_bit(d)) fail(divisions_message(false));
    c_.rounding.divisions.fill(d);
  }
  void set_fraction(std::string_view text) {
    const double f = parse_double(text, "per_process_memory_fraction");
    if (!(f >= 0.0 && f <= 1.0)) {
      if (v_ >= Version::Newest) fail("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      fail(fmt::format("Invalid fraction value: {}. Allowed range: 0~1", text));  // memory.py
    }
    c_.memory_fraction = f;
  }
  void set_backend(std::string_view value) {
    if (value == "native") {
      c_.notes.emplace_back("backend:native (the default)");
    } else if (value == "cudaMallocAsync") {
      fail(
          "backend:cudaMallocAsync replaces the caching allocator with the driver's stream-ordered "
          "allocator (docs/allocator-model.md §9); this policy emulates the native allocator only: use the "
          "cuda_async policy for it");
    } else {
      fail("Unknown allocator backend, options are native and cudaMallocAsync");
    }
  }
  void set_register_threads(std::string_view text) {
    const Bytes n = parse_unsigned(text, "pinned_num_register_threads", int_width());
    constexpr Bytes kMaxThreads = 128;  // pinned_max_register_threads()
    if (!std::has_single_bit(n)) {
      fail(v_ >= Version::V2_9 ? fmt::format("Number of register threads has to be power of 2, got {}", n)
                               : std::string("Number of register threads has to be power of 2 "));
    }
    if (n > kMaxThreads) {
      fail(v_ >= Version::V2_9
               ? fmt::format("Number of register threads should be less than or equal to {}, got {}", kMaxThreads, n)
               : fmt::format("Number of register threads should be less than or equal to {}", kMaxThreads));
    }
    note("pinned_num_register_threads", text);
  }
  void note(std::string_view key, std::string_view value) {
    c_.notes.push_back(fmt::format("{}:{} (host-side/concurrency option: no effect on device memory)", key, value));
  }
  [[noreturn]] void unknown(std::string_view key) const {
    if (v_ >= Version::Newest) fail(fmt::format("Unrecognized key '{}' in Accelerator allocator config.", key));
    if (v_ >= Version::V2_9) fail(fmt::format("Unrecognized key '{}' in CUDA allocator config.", key));
    fail(fmt::format("Unrecognized CachingAllocator option: {}", key));
  }

  // roundup_power2_divisions starting at the key index; returns the index of its last token.
  std::size_t parse_divisions(std::size_t i) {
    const std::string_view key = "roundup_power2_divisions";
    expect(++i, ':');
    const std::string& first = value_at(++i, "Error, expecting roundup_power2_divisions value");
    if (first != "[") {
      set_scalar_divisions(first);
      return i;
    }
    check_list(i);
    DivisionTable& table = c_.rounding.divisions;
    bool first_value = true;
    std::size_t last_index = 0;
    while (++i < t_.size() && t_[i] != "]") {
      const std::string boundary = t_[i];
      if (i + 2 >= t_.size() || t_[i + 1] == "]" || t_[i + 2] == "]" || boundary == ",") {
        fail(
            fmt::format("{}: list entry '{}' has no value (expected SIZE_MB:DIVISIONS or >:DIVISIONS, "
                        "e.g. [256:1,512:2,>:4])",
                        key, boundary));
      }
      expect(++i, ':');
      const Bytes value =
          parse_unsigned(value_at(++i, "Error parsing roundup_power2_divisions value"), key, int_width());
      const bool ok = std::has_single_bit(value) || (value == 0 && list_allows_zero_division(v_));
      if (!ok) fail(divisions_message(true));
      if (boundary == ">") {
        const std::size_t from = gt_fill_starts_after_last(v_) ? last_index + 1 : last_index;
        for (std::size_t s = std::min(from, table.size()); s < table.size(); ++s) table[s] = value;
      } else {
        const Bytes mb = parse_unsigned(boundary, key, IntWidth::UInt64);  // stoul / stoull
        if (!std::has_single_bit(mb)) fail("For roundups, the intervals have to be power of 2 ");
        const std::size_t index = std::min<std::size_t>(63 - std::countl_zero(mb), table.size() - 1);
        if (first_value) {
          std::fill(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(index), value);
          first_value = false;
        }
        table[index] = value;
        last_index = index;
      }
      if (i + 1 >= t_.size() || t_[i + 1] != "]") expect(++i, ',');
    }
    if (i >= t_.size() && !strict()) {
      fail("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
    }
    return i;
  }

  // A roundup_power2_divisions list starting at token `open` ('['): it must close before the
  // config ends (PyTorch: an out-of-bounds read or "expected ,"); an empty one sets nothing.
  void check_list(std::size_t open) {
    std::size_t close = open + 1;
    while (close < t_.size() && t_[close] != "]") ++close;
    if (close >= t_.size()) {
      std::string list;
      for (std::size_t k = open; k < t_.size(); ++k) list += t_[k];
      fail(
          fmt::format("roundup_power2_divisions: the list '{}' has no closing ']' (expected "
                      "[SIZE_MB:DIVISIONS,...,>:DIVISIONS], e.g. [256:1,512:2,>:4])",
                      list));
    }
    if (close == open + 1) {
      c_.notes.emplace_back(
          "roundup_power2_divisions:[] is an empty list: every size keeps the default rounding (PyTorch accepts it)");
    }
  }

  // ---- 2.0-2.8: one strict pass over the tokens ----
  void run_lexer(std::string_view text) {
    t_ = lex(text, /*drop_all_whitespace=*/false);
    for (std::size_t i = 0; i < t_.size(); ++i) {
      const std::string key = t_[i];
      i = handle_key(i, key, /*pass=*/0);
      if (i + 1 < t_.size()) expect(++i, ',');
    }
  }

  // ---- 2.9+: the device-independent keys first, then the CUDA ones (§10.1) ----
  void run_tokenizer(std::string_view text) {
    t_ = lex(text, /*drop_all_whitespace=*/true);
    if (has_large_segment_size(v_)) {
      // newest reads large_segment_size_mb before anything else; max_non_split_rounding follows it.
      for (std::size_t i = 0; i < t_.size(); ++i) {
        if (t_[i] != "large_segment_size_mb") continue;
        expect(++i, ':');
        key_ = "large_segment_size_mb";
        const Bytes mb = parse_unsigned(value_at(++i, ""), "large_segment_size_mb", IntWidth::UInt64);
        if (mb <= kMinLargeAlloc / MiB) fail("CachingAllocator option large_segment_size_mb must be > 10 MB");
        c_.large_segment_size = std::min<Bytes>(mb, mib_limit()) * MiB;
      }
      c_.max_non_split_rounding = c_.large_segment_size;
    }
    for (int pass = 1; pass <= 2; ++pass) {
      for (std::size_t i = 0; i < t_.size(); ++i) {
        const std::string key = t_[i];
        i = handle_key(i, key, pass);
        if (i + 1 < t_.size()) expect(++i, ',');  // lenient: never fails on a wrong separator
      }
    }
  }

  static bool is_accelerator_key(std::string_view key, Version v) {
    return key == "max_split_size_mb" || key == "max_non_split_rounding_mb" || key == "garbage_collection_threshold" ||
           key == "roundup_power2_divisions" || key == "expandable_segments" ||
           key == "pinned_use_background_threads" || (key == "large_segment_size_mb" && has_large_segment_size(v));
  }

  // Handles the key at index i; returns the index of its last token. pass 0 = everything
  // (2.0-2.8), 1 = device-independent keys only, 2 = CUDA keys only (2.9+).
  std::size_t handle_key(std::size_t i, const std::string& key, int pass) {
    key_ = key;
    if (pass != 0) {
      const bool accelerator = is_accelerator_key(key, v_);
      if ((pass == 1) != accelerator) {
        // Unknown keys: newest rejects them in the first pass ("Accelerator allocator config"),
        // 2.9 in the CUDA pass ("CUDA allocator config").
        if (!accelerator && !is_cuda_key(key) && (pass == 2 || v_ >= Version::Newest)) unknown(key);
        return skip_key(i);
      }
    }
    auto value = [&](std::string_view missing) -> const std::string& {
      expect(++i, ':');
      return value_at(++i, missing);
    };
    if (key == "max_split_size_mb") {
      set_max_split(value("Error, expecting max_split_size_mb value"), key, c_.max_split_size);
    } else if (key == "max_non_split_rounding_mb" && has_max_non_split_rounding(v_)) {
      set_max_split(value("Error, expecting max_non_split_rounding_mb value"), key, c_.max_non_split_rounding);
    } else if (key == "garbage_collection_threshold") {
      set_gc_threshold(value("Error, expecting garbage_collection_threshold value"));
    } else if (key == "roundup_power2_divisions") {
      i = parse_divisions(i);
    } else if (key == "large_segment_size_mb" && has_large_segment_size(v_)) {
      i = skip_key(i);  // read in the first pass of run_tokenizer
    } else if (key == "expandable_segments" && has_expandable_segments(v_)) {
      expect(++i, ':');
      c_.expandable_segments = bool_at(++i, key);
    } else if (key == "backend") {
      set_backend(value("Error parsing backend value"));
    } else if ((key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") &&
               has_release_lock_option(v_)) {
      expect(++i, ':');
      const bool on = bool_at(++i, "release_lock_on_cudamalloc");
      note(key, on ? "True" : "False");
    } else if ((key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
                key == "pinned_use_background_threads") &&
               has_pinned_options(v_)) {
      expect(++i, ':');
      const bool on = bool_at(++i, key);
      note(key, on ? "True" : "False");
    } else if (key == "pinned_num_register_threads" && has_pinned_options(v_)) {
      set_register_threads(value("Error, expecting pinned_num_register_threads value"));
    } else if (key == "pinned_reserve_segment_size_mb" && has_graph_capture_reuse_option(v_)) {
      const std::string& text = value("Error, expecting pinned_reserve_segment_size_mb value");
      if (parse_unsigned(text, key, int_width()) == 0) fail("Pinned reserve segment size has to be greater than 0");
      note(key, text);
    } else if (key == "graph_capture_record_stream_reuse" && has_graph_capture_reuse_option(v_)) {
      expect(++i, ':');
      const bool on = bool_at(++i, key);
      note(key, on ? "True" : "False");
    } else if (key == "per_process_memory_fraction") {
      set_fraction(value("Error, expecting per_process_memory_fraction value"));
    } else {
      unknown(key);
    }
    return i;
  }

  bool is_cuda_key(std::string_view key) const {
    return key == "backend" || key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
           key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
           key == "pinned_num_register_threads" || key == "pinned_reserve_segment_size_mb" ||
           key == "graph_capture_record_stream_reuse" || key == "per_process_memory_fraction";
  }

  // ---- 1.13: regex items, values taken from the second ':'-separated part ----
  void run_113(std::string_view text) {
    for (const std::vector<std::string>& kv : split_113(text)) {
      if (kv.size() < 2) {
        c_.notes.push_back(fmt::format("'{}' ignored: no value (PyTorch 1.13 skips such items)", kv.front()));
        continue;
      }
      const std::string& key = kv[0];
      const std::string& val = kv[1];
      if (key == "max_split_size_mb") {
        set_max_split(val, key, c_.max_split_size);
      } else if (key == "roundup_power2_divisions") {
        set_scalar_divisions(val);
      } else if (key == "roundup_bypass_threshold_mb") {
        c_.rounding.bypass_threshold = parse_unsigned(val, key, IntWidth::Int32) * MiB;
      } else if (key == "backend") {
        set_backend(val);
      } else if (key == "garbage_collection_threshold") {
        set_gc_threshold(val);
      } else if (key == "per_process_memory_fraction") {
        set_fraction(val);
      } else {
        unknown(key);
      }
    }
  }

  Config& c_;
  Version v_;
  std::vector<std::string> t_;
  std::string key_;  // the option being read, for the messages of check_index
};

// Takes `version:V` out of the option string (comma-separated, outside brackets) and returns it;
// the other items are kept verbatim, in order.
Version take_version(std::string& options) {
  std::optional<Version> version;
  std::vector<std::string_view> kept;
  const std::string_view text(options);
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '[') ++depth;
      if (text[i] == ']') --depth;
      if (text[i] != ',' || depth > 0) continue;
    }
    const std::string_view item = text.substr(start, i - start);
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos && trim(item.substr(0, colon)) == "version") {
      const std::string_view name = trim(item.substr(colon + 1));
      version = parse_version(name);
      if (!version) fail(fmt::format("version: unknown PyTorch version '{}' (accepted: {})", name, kVersionChoices));
    } else {
      kept.push_back(item);
    }
    start = i + 1;
  }
  std::string rest;
  for (std::size_t k = 0; k < kept.size(); ++k) {
    if (k > 0) rest += ',';
    rest += kept[k];
  }
  options = std::move(rest);
  return version.value_or(Version::Newest);
}

}  // namespace

Config parse_config(std::string_view options) {
  std::string text(options);
  Config config;
  config.version = take_version(text);
  config.rounding.version = config.version;
  Parser(config).run(text);
  if (config.expandable_segments && config.large_segment_size % kSmallBuffer != 0) {
    fail(
        fmt::format("expandable_segments:True needs large_segment_size_mb to be a multiple of 2 "
                    "(the device page); got {} MiB",
                    config.large_segment_size / MiB));
  }
  return config;
}

}  // namespace fraglab::cca
