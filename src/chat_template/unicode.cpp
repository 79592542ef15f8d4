#include "chat_template/unicode.h"

#include <utf8proc.h>

namespace tandem::jinja::unicode {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++i;
    } else {
      out.push_back(static_cast<char32_t>(cp));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

static bool is_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += !is_continuation(c);
  return n;
}

size_t byte_offset(std::string_view s, size_t index) {
  size_t i = 0;
  while (i < s.size() && index > 0) {
    ++i;
    while (i < s.size() && is_continuation(s[i])) ++i;
    --index;
  }
  return i;
}

bool is_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_line_break(char32_t c) {
  switch (c) {
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029:
      return true;
    default:
      return false;
  }
}

static utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_alpha(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
bool is_decimal(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_ND;
}
// Python's isdigit() adds the superscript/circled digits (category No with a digit value); the
// common ones are listed, the rest of No counts only as numeric.
bool is_digit(char32_t c) {
  return is_decimal(c) || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x2070 && c <= 0x2079) ||
         (c >= 0x2080 && c <= 0x2089) || (c >= 0x2460 && c <= 0x2468);
}
bool is_numeric(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
bool is_alnum(char32_t c) {
  return is_alpha(c) || is_numeric(c);
}
bool is_upper(char32_t c) {
  return utf8proc_isupper(static_cast<utf8proc_int32_t>(c)) != 0;
}
bool is_lower(char32_t c) {
  return utf8proc_islower(static_cast<utf8proc_int32_t>(c)) != 0;
}
bool is_title(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_LT;
}
bool is_cased(char32_t c) {
  return is_upper(c) || is_lower(c) || is_title(c);
}
bool is_word(char32_t c) {
  return c == '_' || is_alnum(c);
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void append_upper(std::u32string& out, char32_t c) {
  if (c == 0xDF) {  // sharp s
    out += U"SS";
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}

void append_lower(std::u32string& out, char32_t c) {
  if (c == 0x130) {  // capital I with dot above lowers to i + combining dot
    out += U"i\u0307";
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

void append_title(std::u32string& out, char32_t c) {
  if (c == 0xDF) {
    out += U"Ss";
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

}  // namespace tandem::jinja::unicode
