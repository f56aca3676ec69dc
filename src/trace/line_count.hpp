// Counting the lines of a text, for sizing a vector before reading it (jsonl_reader.cpp reserves
// one event per line, so a large trace's event vector is allocated once instead of regrown and
// copied ~20 times). The count changes no result, only how often memory is allocated.
#pragma once

#include <cstddef>
#include <string_view>

namespace fraglab::detail {

// 1 + the number of '\n' bytes in s: the lines of s, a last line without '\n' included (and an
// empty one after a final '\n': an upper bound is all a reservation needs).
std::size_t count_lines(std::string_view s);

}  // namespace fraglab::detail
