#include "html_page.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fraglab::html {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::uint64_t byte_tick_step(std::uint64_t top, int ticks) {
  const std::uint64_t raw = std::max<std::uint64_t>(top / static_cast<std::uint64_t>(ticks), 1);
  std::uint64_t unit = 1;
  while (unit <= raw / 1024) unit *= 1024;
  for (std::uint64_t m : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}) {
    if (unit * m >= raw) return unit * m;
  }
  return unit * 1024;
}

std::uint64_t count_tick_step(std::uint64_t top, int ticks) {
  const std::uint64_t raw = std::max<std::uint64_t>(top / static_cast<std::uint64_t>(ticks), 1);
  std::uint64_t unit = 1;
  while (unit <= raw / 10) unit *= 10;
  for (std::uint64_t m : {1, 2, 5, 10}) {
    if (unit * m >= raw) return unit * m;
  }
  return unit * 10;
}

std::string coord(double value) { return fmt::format("{:.1f}", value); }

std::string page_start(std::string_view title) {
  return fmt::format(R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #212529; background: #fff; max-width: 1160px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }}
h2 {{ font-size: 18px; margin: 28px 0 6px; padding-top: 8px; border-top: 2px solid #dee2e6; }}
h3 {{ font-size: 15px; margin: 16px 0 4px; }}
code {{ font: 13px ui-monospace, monospace; background: #f1f3f5; padding: 1px 4px; border-radius: 3px; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border-bottom: 1px solid #e9ecef; padding: 3px 8px; text-align: left; vertical-align: top; }}
td.num, th.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
svg {{ display: block; font: 11px system-ui, sans-serif; }}
svg text {{ fill: #495057; }}
.na {{ color: #868e96; font-style: italic; }}
.meta {{ color: #495057; margin: 2px 0; }}
.peak {{ font-weight: 600; }}
.legend span {{ display: inline-block; margin-right: 14px; }}
.legend i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }}
.frames {{ font: 11px ui-monospace, monospace; white-space: pre; color: #495057; }}
</style>
</head>
<body>
)",
                     escape(title));
}

std::string page_end() { return "</body>\n</html>\n"; }

}  // namespace fraglab::html
