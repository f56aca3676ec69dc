// The policy authors' kit: what every policy needs and used to write for itself (docs/architecture.md "Writing a
// policy").
//  - sizes: one align_up / align_down, and one meaning of the largest request (kImpossibleRequest);
//  - options: OptionReader, driven by the policy's registered PolicyInfo.options (names, defaults,
//    the "unknown option ... (accepted: ...)" error), with typed value parsers;
//  - out of memory: RetryingPolicy, the flush-then-retry-once path and the one place a policy
//    counts retries and OOMs and keeps its last OOM message.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/policy.hpp"
#include "fraglab/types.hpp"

namespace fraglab::kit {

// ---- sizes ------------------------------------------------------------------------------------

constexpr Bytes align_up(Bytes value, Bytes alignment) { return (value + alignment - 1) / alignment * alignment; }
constexpr Bytes align_down(Bytes value, Bytes alignment) { return value / alignment * alignment; }

// The largest request: a size at or above 2^60 bytes (1 EiB) is impossible. No device has an
// exabyte; the trace readers refuse such sizes as corrupt input ("impossible size",
// src/trace/live_allocations.hpp, detail::kImpossibleSize) and PyTorch fails ">= 1 EB" requests up
// front (allocator-model §5). A policy handed one anyway (a what-if, a test) fails it as out of memory
// without rounding it, so no size arithmetic can wrap 64 bits.
inline constexpr Bytes kImpossibleRequest = Bytes{1} << 60;
constexpr bool impossible_request(Bytes size) { return size >= kImpossibleRequest; }

// `size` rounded up to `alignment`, a 0-byte request to one unit (it still needs an address of its
// own); an impossible request unchanged (it will fail).
constexpr Bytes round_request(Bytes size, Bytes alignment) {
  return impossible_request(size) ? size : align_up(std::max<Bytes>(size, 1), alignment);
}

// ---- options ----------------------------------------------------------------------------------

// Value parsers: nullopt = not accepted.
std::optional<bool> parse_flag(std::string_view text);  // True, true, 1 / False, false, 0
std::optional<std::uint64_t> parse_whole(std::string_view text, std::uint64_t max);
// A whole number of `unit`s (MiB, GiB) as bytes, refused when the product overflows 64 bits.
std::optional<Bytes> parse_whole_units(std::string_view text, Bytes unit);
std::optional<double> parse_number(std::string_view text);  // finite
std::optional<Bytes> parse_bytes(std::string_view text);    // parse_byte_size: "4KiB", "512"
// The accepted text of a flag, for messages.
inline constexpr std::string_view kFlagAccepted = "True or False (also true, false, 1, 0)";

// Reads "key:value,..." against the policy's registered option table. The constructor throws
// InputError "NAME: unknown option 'K' (accepted: A, B, ...)" on a key not in the table (and
// split_options' error on a missing value). A getter parses every occurrence of its key in order
// (the last wins), or the table's default when the key is absent; a value its parser refuses
// throws InputError "NAME: KEY: expected ACCEPTED, got 'VALUE'".
class OptionReader {
 public:
  OptionReader(const PolicyInfo& info, std::string_view text);
  // The registered policy `name` (a logic_error if it is not registered).
  static OptionReader of(std::string_view name, std::string_view text);

  bool given(std::string_view key) const;

  template <class T>
  T get(std::string_view key, std::string_view accepted,
        const std::function<std::optional<T>(std::string_view)>& parse) const {
    std::optional<T> value;
    for (const OptionItem& item : items_) {
      if (item.key != key) continue;
      value = parse(item.value);
      if (!value) reject(key, item.value, accepted);
    }
    if (value) return *value;
    value = parse(default_of(key));
    if (!value) throw_bad_default(key);
    return *value;
  }

  bool flag(std::string_view key) const { return get<bool>(key, kFlagAccepted, parse_flag); }
  // One of `names`, as its index ("step, all or none").
  std::size_t choice(std::string_view key, const std::vector<std::string_view>& names) const;

  [[noreturn]] void reject(std::string_view key, std::string_view value, std::string_view accepted) const;

 private:
  std::string_view default_of(std::string_view key) const;  // logic_error on a key not in the table
  [[noreturn]] void throw_bad_default(std::string_view key) const;

  const PolicyInfo& info_;
  std::vector<OptionItem> items_;
};

// ---- out of memory ----------------------------------------------------------------------------

// A policy that answers a failed allocation the same way every cache does: flush (synchronise,
// release cached memory), retry once, and only then report out of memory. It owns the counters
// and the last OOM message, so a policy counts them nowhere else.
class RetryingPolicy : public Policy {
 public:
  PolicyCounters counters() const override { return counters_; }
  std::string last_oom_message() const override { return last_oom_; }

 protected:
  // first_try(); on nullopt flush(), count the retry, retry(); on nullopt again count the OOM and
  // keep describe_oom()'s message.
  template <class T, class FirstTry, class Flush, class Retry, class Describe>
  std::optional<T> with_flush_and_retry(FirstTry first_try, Flush flush, Retry retry, Describe describe_oom) {
    std::optional<T> result = first_try();
    if (result) return result;
    flush();
    ++counters_.num_alloc_retries;
    result = retry();
    if (!result) out_of_memory(describe_oom());
    return result;
  }
  template <class T, class Try, class Flush, class Describe>
  std::optional<T> with_flush_and_retry(Try attempt, Flush flush, Describe describe_oom) {
    return with_flush_and_retry<T>(attempt, flush, attempt, describe_oom);
  }
  // An OOM with no flush to try first (a static plan).
  void out_of_memory(std::string message) {
    ++counters_.num_ooms;
    last_oom_ = std::move(message);
  }

 private:
  PolicyCounters counters_;
  std::string last_oom_;
};

// ---- direct defaults --------------------------------------------------------------------------

// Policy::allocate_into() and Policy::free() as the base defines them (allocate() then the copy;
// free_requested() then free_completed()), for a policy that has no version of its own. The base's
// reach those through the vtable again (and both are out of line, so the Replayer's call
// carries no speculative test for them); these call Self's (a final class) directly, so the compiler
// can inline them. Base is Policy or a class derived from it.
template <class Self, class Base = Policy>
class DirectDefaults : public Base {
 public:
  bool allocate_into(Bytes size, StreamId stream, Block& out) override {
    std::optional<Block> block = static_cast<Self&>(*this).allocate(size, stream);
    if (!block) return false;
    out = *block;
    return true;
  }
  void free(const Block& block) override {
    Self& self = static_cast<Self&>(*this);
    self.free_requested(block);
    self.free_completed(block);
  }
};

// ---- audit ------------------------------------------------------------------------------------

// Collects the broken invariants of one Policy::audit() pass.
class AuditLog {
 public:
  explicit AuditLog(std::string_view policy) : policy_(policy) {}
  // Records "POLICY audit: WHAT" when !ok; `what` is only built then.
  template <class What>
  void require(bool ok, What what) {
    if (!ok) problems_.push_back(std::string(policy_) + " audit: " + std::string(what()));
  }
  std::vector<std::string> take() { return std::move(problems_); }

 private:
  std::string_view policy_;
  std::vector<std::string> problems_;
};

// Checks a policy's segments() listing: segments in address order do not overlap, and the pieces
// of each tile it exactly, in address order.
void audit_segments(AuditLog& log, const std::vector<SegmentView>& segments);

}  // namespace fraglab::kit
