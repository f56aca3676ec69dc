// Reading the small non-trace files a command is given (a model .json, a baseline, a results file,
// a sweep's output to resume): one helper, so that every such path is refused the same way when it
// is no file to read. Traces go through read_trace() / read_file_bytes() (fraglab/trace_io.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab {

// The whole content of `path`. Throws InputError "PATH: ...; expected EXPECTED" in one line when
// the path cannot be opened (missing, unreadable), is a directory, a device or a socket, is a
// regular file larger than `max_bytes`, or is a pipe / FIFO that gives more than `max_bytes`
// (a stream that does not end is read only that far). `expected` says what the file should be
// ("a model .json file").
std::string read_input_file(const std::string& path, std::string_view expected, Bytes max_bytes);

// A parsed JSON document (nlohmann::json) takes up to this many times the bytes of its text (a
// 16-byte value for a 2-byte number, map nodes for keys): JSON inputs are read up to the memory
// budget divided by it.
inline constexpr Bytes kJsonDomExpansion = 32;

// Where a JSON library's parse error is, and what it says, for one-line messages: LINE and COLUMN
// counted from 1 at `byte` (nlohmann's parse_error::byte, one past the character the parser
// stopped at, clamped to `text`), and WHAT the library's message without its bracketed id and its
// own position prefix ("[json.exception.parse_error.101] parse error at line 1, column 2: ").
struct JsonErrorAt {
  std::size_t line = 1;
  std::size_t column = 1;
  std::string what;
};
JsonErrorAt locate_json_error(std::string_view text, std::size_t byte, std::string_view library_message);

}  // namespace fraglab
