// The PyTorch releases the policy can emulate, and every behaviour that differs between them
// (allocator-model §13). Invariant: behaviour is selected only through the predicates below, never by
// comparing versions elsewhere, so this table is the one place that says what changed when.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fraglab::cca {

// Ordered oldest -> newest; "newest" is a 2025/26 main-branch copy (large_segment_size era).
enum class Version : std::uint8_t { V1_13, V2_0, V2_1, V2_4, V2_6, V2_8, V2_9, Newest };

std::optional<Version> parse_version(std::string_view text);
std::string_view version_name(Version v);
inline constexpr std::string_view kVersionChoices = "1.13, 2.0, 2.1, 2.4, 2.6, 2.8, 2.9, newest";

// How PYTORCH_CUDA_ALLOC_CONF is tokenised and how its errors read (§10.1).
enum class ParserStyle : std::uint8_t {
  Regex113,   // 1.13: split on [\s,]+ then on ':'; items without value silently ignored
  Lexer,      // 2.0-2.8: tokens , : [ ]; separators checked strictly
  Tokenizer,  // 2.9+: ConfigTokenizer; separators checked leniently
};

// Wording of the out-of-memory error (§5.4).
enum class OomStyle : std::uint8_t {
  Legacy,      // 1.13, 2.0: "(GPU d; T total capacity; A already allocated; ...)"
  Capacty,     // 2.1: new sentence form with the "capacty" typo, no "allowed" part
  Modern,      // 2.4-2.9: "has a total capacity of", "allowed; ", expandable_segments hint
  ModernDocs,  // newest: same, docs.pytorch.org link
};

constexpr bool operator>=(Version a, Version b) { return static_cast<int>(a) >= static_cast<int>(b); }
constexpr bool operator<(Version a, Version b) { return static_cast<int>(a) < static_cast<int>(b); }

constexpr ParserStyle parser_style(Version v) {
  return v < Version::V2_0 ? ParserStyle::Regex113 : v < Version::V2_9 ? ParserStyle::Lexer : ParserStyle::Tokenizer;
}
// §1.2/§1.4: 16 per-interval division slots and the list syntax (1.13: one global value).
constexpr bool has_interval_divisions(Version v) { return v >= Version::V2_0; }
// §1.2: 1.13 only; roundup_bypass_threshold_mb option.
constexpr bool has_roundup_bypass(Version v) { return v < Version::V2_0; }
// §10.2: a list value of 0 ("disable") is accepted from ~2.3 on; 2.0/2.1 reject it.
constexpr bool list_allows_zero_division(Version v) { return v >= Version::V2_4; }
// §10.2: "divisons" spelling in the error text up to 2.1.
constexpr bool divisions_typo(Version v) { return v < Version::V2_4; }
// §1.4: `>` fills from the last explicit slot (<= 2.8, overwriting it) or from the one after (2.9+).
constexpr bool gt_fill_starts_after_last(Version v) { return v >= Version::V2_9; }
// §3.2 step 4: oversize slack R = max_non_split_rounding_mb (2.6+) instead of kLargeBuffer.
constexpr bool has_max_non_split_rounding(Version v) { return v >= Version::V2_6; }
// §7: expandable segments exist from 2.1.
constexpr bool has_expandable_segments(Version v) { return v >= Version::V2_1; }
// §1.1/§10.2: large_segment_size_mb (newest).
constexpr bool has_large_segment_size(Version v) { return v >= Version::Newest; }
// §10.2: max_split_size_mb minimum: "> 20" up to 2.8, ">= 20" in 2.9, ">= large_segment" newest.
constexpr bool max_split_min_inclusive(Version v) { return v >= Version::V2_9; }
// §5.6: newest leaves the limit unset for fraction == 1.0 (so GC stays off); older: any call sets it.
constexpr bool fraction_one_means_unset(Version v) { return v >= Version::Newest; }
// §8: requested_bytes exists from 2.0.
constexpr bool has_requested_bytes_stat(Version v) { return v >= Version::V2_0; }
// §10.2: release_lock_on_cudamalloc (2.1+), pinned_* (~2.2+), graph_capture_record_stream_reuse (~2.8+).
constexpr bool has_release_lock_option(Version v) { return v >= Version::V2_1; }
constexpr bool has_pinned_options(Version v) { return v >= Version::V2_4; }
constexpr bool has_graph_capture_reuse_option(Version v) { return v >= Version::V2_8; }

constexpr OomStyle oom_style(Version v) {
  return v < Version::V2_1     ? OomStyle::Legacy
         : v < Version::V2_4   ? OomStyle::Capacty
         : v < Version::Newest ? OomStyle::Modern
                               : OomStyle::ModernDocs;
}

}  // namespace fraglab::cca
