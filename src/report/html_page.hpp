// Pieces every page of `fraglab report` shares (html_report.cpp, html_sweep.cpp): escaping, the
// page frame with its inline style sheet, and number formats. No script and no external resource:
// the file reads offline and the same input gives the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fraglab::html {

// Text and attribute values: & < > " ' escaped.
std::string escape(std::string_view text);
// The page up to <body> (title escaped), and the end of the page.
std::string page_start(std::string_view title);
std::string page_end();
// A coordinate with one decimal ("12.5"): enough for a screen, a third of the bytes of "%g".
std::string coord(double value);

// A round step for about `ticks` gridlines up to `top`: for bytes 1, 2, 5, 10, ... 500 times a
// binary unit (KiB, MiB, GiB), so labels read as round sizes; for counts 1, 2 or 5 times a power
// of ten.
std::uint64_t byte_tick_step(std::uint64_t top, int ticks);
std::uint64_t count_tick_step(std::uint64_t top, int ticks);

// The colours of requested / allocated / reserved, shared by charts and legends.
inline constexpr const char* kSeriesColour[3] = {"#2b8a3e", "#1c7ed6", "#e8590c"};
inline constexpr const char* kSeriesName[3] = {"requested", "allocated", "reserved"};

}  // namespace fraglab::html
