#include "chat_template/py_string.h"

#include <algorithm>

#include "chat_template/errors.h"
#include "chat_template/unicode.h"

namespace tandem::jinja::py {

using unicode::decode;
using unicode::encode;

std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side) {
  std::u32string text = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : unicode::is_space(c);
  };
  size_t b = 0, e = text.size();
  if (side != Side::kRight) {
    while (b < e && strippable(text[b])) ++b;
  }
  if (side != Side::kLeft) {
    while (e > b && strippable(text[e - 1])) --e;
  }
  return encode(std::u32string_view(text).substr(b, e - b));
}

static std::vector<std::string> split_whitespace(std::string_view s, long maxsplit) {
  std::u32string t = decode(s);
  std::vector<std::string> out;
  size_t i = 0, n = t.size();
  while (true) {
    while (i < n && unicode::is_space(t[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      // The rest keeps its trailing whitespace, as in Python.
      out.push_back(encode(std::u32string_view(t).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !unicode::is_space(t[j])) ++j;
    out.push_back(encode(std::u32string_view(t).substr(i, j - i)));
    i = j;
  }
  return out;
}

static std::vector<std::string> rsplit_whitespace(std::string_view s, long maxsplit) {
  std::u32string t = decode(s);
  std::vector<std::string> out;
  size_t e = t.size();
  while (true) {
    while (e > 0 && unicode::is_space(t[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      out.push_back(encode(std::u32string_view(t).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !unicode::is_space(t[b - 1])) --b;
    out.push_back(encode(std::u32string_view(t).substr(b, e - b)));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit);
  if (sep->empty()) render_fail("empty separator");
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
    size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long maxsplit) {
  if (!sep) return rsplit_whitespace(s, maxsplit);
  if (sep->empty()) render_fail("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string t = decode(s);
  std::vector<std::string> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    size_t j = i;
    while (j < n && !unicode::is_line_break(t[j])) ++j;
    size_t eol = j;
    if (j < n) {
      eol = (t[j] == '\r' && j + 1 < n && t[j + 1] == '\n') ? j + 2 : j + 1;
    }
    out.push_back(encode(std::u32string_view(t).substr(i, (keepends ? eol : j) - i)));
    i = eol;
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, long count) {
  std::string out;
  long done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    std::u32string t = decode(s);
    for (char32_t c : t) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      unicode::append_utf8(out, c);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

// Python slice-bound normalisation for str.find's start/end.
static long clamp_index(std::optional<long> v, long len, long fallback) {
  if (!v) return fallback;
  long x = *v;
  if (x < 0) x += len;
  return std::clamp(x, 0L, len);
}

long find(std::string_view s, std::string_view sub, std::optional<long> start,
          std::optional<long> end, bool reverse) {
  std::u32string t = decode(s);
  std::u32string needle = decode(sub);
  long len = static_cast<long>(t.size());
  long b = clamp_index(start, len, 0);
  long e = clamp_index(end, len, len);
  if (start && *start > len) return -1;
  long n = static_cast<long>(needle.size());
  if (e - b < n) return -1;
  std::u32string_view window = std::u32string_view(t).substr(b, e - b);
  size_t hit = reverse ? window.rfind(needle) : window.find(needle);
  return hit == std::u32string_view::npos ? -1 : b + static_cast<long>(hit);
}

long count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<long>(unicode::length(s)) + 1;
  long n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string upper(std::string_view s) {
  std::u32string out;
  for (char32_t c : decode(s)) unicode::append_upper(out, c);
  return encode(out);
}

std::string lower(std::string_view s) {
  std::u32string out;
  for (char32_t c : decode(s)) unicode::append_lower(out, c);
  return encode(out);
}

std::string title(std::string_view s) {
  std::u32string out;
  bool previous_cased = false;
  for (char32_t c : decode(s)) {
    if (previous_cased) {
      unicode::append_lower(out, c);
    } else {
      unicode::append_title(out, c);
    }
    previous_cased = unicode::is_cased(c);
  }
  return encode(out);
}

std::string capitalize(std::string_view s) {
  std::u32string t = decode(s);
  std::u32string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i == 0) {
      unicode::append_title(out, t[i]);
    } else {
      unicode::append_lower(out, t[i]);
    }
  }
  return encode(out);
}

std::string swapcase(std::string_view s) {
  std::u32string out;
  for (char32_t c : decode(s)) {
    if (unicode::is_upper(c)) {
      unicode::append_lower(out, c);
    } else if (unicode::is_lower(c)) {
      unicode::append_upper(out, c);
    } else {
      out.push_back(c);
    }
  }
  return encode(out);
}

bool all_of(std::string_view s, CharClass k) {
  std::u32string t = decode(s);
  if (t.empty()) return false;
  for (char32_t c : t) {
    bool ok = false;
    switch (k) {
      case CharClass::kSpace:
        ok = unicode::is_space(c);
        break;
      case CharClass::kDigit:
        ok = unicode::is_digit(c);
        break;
      case CharClass::kDecimal:
        ok = unicode::is_decimal(c);
        break;
      case CharClass::kNumeric:
        ok = unicode::is_numeric(c);
        break;
      case CharClass::kAlpha:
        ok = unicode::is_alpha(c);
        break;
      case CharClass::kAlnum:
        ok = unicode::is_alnum(c);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

// islower(): at least one cased character and no upper/title-case ones.
bool is_lower(std::string_view s) {
  bool cased = false;
  for (char32_t c : decode(s)) {
    if (unicode::is_upper(c) || unicode::is_title(c)) return false;
    cased = cased || unicode::is_lower(c);
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (char32_t c : decode(s)) {
    if (unicode::is_lower(c) || unicode::is_title(c)) return false;
    cased = cased || unicode::is_upper(c);
  }
  return cased;
}

static std::string pad(std::string_view s, long left, long right, char32_t fill) {
  std::string out;
  for (long i = 0; i < left; ++i) unicode::append_utf8(out, fill);
  out.append(s);
  for (long i = 0; i < right; ++i) unicode::append_utf8(out, fill);
  return out;
}

std::string center(std::string_view s, long width, char32_t fill) {
  long len = static_cast<long>(unicode::length(s));
  if (width <= len) return std::string(s);
  long marg = width - len;
  long left = marg / 2 + (marg & width & 1);  // CPython's rounding of the odd space
  return pad(s, left, marg - left, fill);
}

std::string ljust(std::string_view s, long width, char32_t fill) {
  long len = static_cast<long>(unicode::length(s));
  return pad(s, 0, std::max(0L, width - len), fill);
}

std::string rjust(std::string_view s, long width, char32_t fill) {
  long len = static_cast<long>(unicode::length(s));
  return pad(s, std::max(0L, width - len), 0, fill);
}

std::string jinja_title(std::string_view s) {
  auto is_boundary = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::u32string out;
  bool at_start = true;
  for (char32_t c : decode(s)) {
    if (is_boundary(c)) {
      out.push_back(c);
      at_start = true;
    } else if (at_start) {
      unicode::append_upper(out, c);
      at_start = false;
    } else {
      unicode::append_lower(out, c);
    }
  }
  return encode(out);
}

long word_count(std::string_view s) {
  long n = 0;
  bool in_word = false;
  for (char32_t c : decode(s)) {
    bool w = unicode::is_word(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
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
        out += "&#34;";
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

}  // namespace tandem::jinja::py
