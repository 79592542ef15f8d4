// Small string helpers shared by the incremental output parsers (reasoning, tool calls), which
// hold back text that may still turn out to be the start of a marker.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tandem::server {

inline bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Length of the longest suffix of s that is a proper prefix of marker (a marker split across
// deltas).
inline size_t partial_suffix(std::string_view s, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t len = std::min(s.size(), marker.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

inline size_t partial_suffix(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t n = 0;
  for (std::string_view m : markers) n = std::max(n, partial_suffix(s, m));
  return n;
}

// Whether s is a proper prefix of one of the markers (undecided until more text comes).
inline bool is_partial_marker(std::string_view s, std::initializer_list<std::string_view> markers) {
  for (std::string_view m : markers)
    if (s.size() < m.size() && m.substr(0, s.size()) == s) return true;
  return false;
}

inline void skip_spaces(std::string& s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  s.erase(0, i);
}

inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Removes a leading marker from s if it is there.
inline bool consume(std::string& s, std::string_view marker) {
  if (s.compare(0, marker.size(), marker) != 0) return false;
  s.erase(0, marker.size());
  return true;
}

}  // namespace tandem::server
