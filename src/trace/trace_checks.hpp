// Parts of validate_trace() (trace.hpp) for readers that prove the rest while they build a trace.
#pragma once

#include <string_view>

#include "fraglab/trace.hpp"

namespace fraglab::detail {

// validate_trace() without its walk over the events: the start state's rules and the stack
// frames' indices. For a reader that built the events itself and proved, while building them,
// that the walk would find no violation (snapshot_reader.cpp tracks each address's lifetime
// anyway); one that cannot prove it calls validate_trace(), which names the first violation.
void validate_trace_except_events(const Trace& trace, std::string_view origin);

}  // namespace fraglab::detail
