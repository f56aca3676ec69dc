// Results-file lines (results_format.cpp), shared with the file handling (results_file.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fraglab/sweep.hpp"

namespace fraglab {

using LineOrigin = std::string;  // "FILE:LINE", the prefix of every error about that line

// The knob keys named by a CSV header line (no '\n'). Throws InputError if it is not a header.
std::vector<std::string> parse_csv_header(std::string_view line, const LineOrigin& at);
SweepRow parse_csv_row(std::string_view line, const std::vector<std::string>& knob_keys, const LineOrigin& at);
// JSONL rows carry their knob keys: the first row sets `knob_keys` (keys_known = false), later
// rows must have the same ones.
SweepRow parse_jsonl_row(std::string_view line, std::vector<std::string>& knob_keys, bool keys_known,
                         const LineOrigin& at);

// The sweep metadata line (sweep_meta.cpp), recognised by metadata_line() (fraglab/sweep.hpp).
SweepMeta parse_meta_line(std::string_view json_text, const LineOrigin& at);

// Writes `text` to PATH.tmp and renames it over `path` (results_file.cpp): a reader never sees a
// half-written file. Throws InputError naming the file.
void replace_file_with(const std::string& path, const std::string& text);

}  // namespace fraglab
