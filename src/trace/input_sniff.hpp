// Telling what an input that is not a trace looks like, from its first bytes, so that a wrong
// file (a folder's listing, a torch.save archive, a results JSON, random bytes) fails with one
// line saying what it is and what was expected, instead of a parser error deep inside it.
//
// Invariants:
//  - only the first line / first kSniffBytes bytes are looked at (never the whole input): the
//    check costs nothing on a real trace;
//  - it accepts everything the readers accept at the start of a trace (a pickle's PROTO byte,
//    a JSONL header line naming "fraglab_trace", blank lines before it): a real trace never
//    fails here, and the readers still check everything after the start.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fraglab::detail {

// How many leading bytes decide "binary or text".
inline constexpr std::size_t kSniffBytes = 512;

// What every "not a trace" message ends with.
inline constexpr std::string_view kExpectedTrace =
    "expected a fraglab JSONL trace (first line {\"fraglab_trace\": 1, ...}; .gz ok) or a PyTorch "
    "memory snapshot pickle from torch.cuda.memory._dump_snapshot()";

// Decompressed (or plain) bytes that cannot be the start of a trace: the "looks like ..., expected
// ..." part of the message (without the origin). nullopt when the start looks like a trace.
std::optional<std::string> not_a_trace(std::string_view bytes);

// The same for the first bytes of a stream still being read (a pipe, a FIFO, a device): nullopt
// also when too few bytes have arrived to tell. Lets an endless stream of junk (/dev/zero) be
// refused after its first read instead of filling memory.
std::optional<std::string> not_a_trace_start(std::string_view prefix);

// "1f 8b 08 00": up to `n` leading bytes in hex, for messages about binary input.
std::string hex_prefix(std::string_view bytes, std::size_t n = 4);

}  // namespace fraglab::detail
