// Small JSON text helpers shared by the JSONL reader and writer: quoting a string, and checking
// that a mark value is one JSON scalar (the reader keeps a mark's value as its exact JSON text,
// and the writer emits it verbatim, so both must agree on what counts as valid text).
#pragma once

#include <string>
#include <string_view>

namespace fraglab::detail {

// Appends s as a JSON string literal (quotes included). Only '"', '\\' and control characters are
// escaped, so any valid UTF-8 passes through unchanged and the output is deterministic.
inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && c != '"' && c != '\\') {
      out.push_back(c);
      continue;
    }
    out.push_back('\\');
    switch (c) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\n':
        out.push_back('n');
        break;
      case '\t':
        out.push_back('t');
        break;
      case '\r':
        out.push_back('r');
        break;
      case '\b':
        out.push_back('b');
        break;
      case '\f':
        out.push_back('f');
        break;
      default:
        out.append("u00");
        out.push_back(kHex[u >> 4]);
        out.push_back(kHex[u & 15]);
    }
  }
  out.push_back('"');
}

namespace json_text_impl {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// RFC 8259 number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
inline bool is_number(std::string_view s) {
  std::size_t i = 0, n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  return i == n;
}

// A quoted JSON string with valid escapes. UTF-8 validity is the caller's concern (simdjson
// validates input; the writer's strings come from a Trace).
inline bool is_string(std::string_view s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return false;
  for (std::size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (static_cast<unsigned char>(c) < 0x20 || c == '"') return false;
    if (c != '\\') continue;
    if (++i + 1 >= s.size()) return false;  // a backslash may not escape the closing quote
    switch (s[i]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        break;
      case 'u':
        if (i + 4 > s.size() - 2) return false;  // four hex digits before the closing quote
        for (int k = 1; k <= 4; ++k)
          if (!is_hex(s[i + k])) return false;
        i += 4;
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace json_text_impl

// True when s is exactly one JSON scalar (string, number, true, false, null), no whitespace.
inline bool is_json_scalar(std::string_view s) {
  if (s.empty()) return false;
  if (s == "true" || s == "false" || s == "null") return true;
  if (s.front() == '"') return json_text_impl::is_string(s);
  return json_text_impl::is_number(s);
}

}  // namespace fraglab::detail
