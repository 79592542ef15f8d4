#include "chat_template/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "chat_template/unicode.h"
#include "core/error.h"

namespace tandem::jinja {
namespace {

// One UTF-8 code point at s[i] (with its byte length), for the whitespace checks that must
// see Unicode spaces the way Python's \s does.
char32_t code_point_at(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  n = std::min(n, s.size() - i);
  std::u32string d = unicode::decode(s.substr(i, n));
  *len = n;
  return d.empty() ? 0xFFFD : d[0];
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    size_t n = 0;
    if (!unicode::is_space(code_point_at(s, i, &n))) break;
    i += n;
  }
  return i;
}

// Python str.rstrip(): the length of `s` without trailing whitespace.
size_t rstrip_length(std::string_view s) {
  std::u32string t = unicode::decode(s);
  size_t keep = t.size();
  while (keep > 0 && unicode::is_space(t[keep - 1])) --keep;
  return unicode::byte_offset(s, keep);
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : unicode::decode(s)) {
    if (!unicode::is_space(c)) return false;
  }
  return true;
}

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_text(pos, src_.substr(pos));
        break;
      }
      char kind = src_[start + 1];
      char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')
                      ? src_[start + 2]
                      : 0;
      size_t raw_end = kind == '%' ? match_raw_begin(start) : 0;
      std::string text = src_.substr(pos, start - pos);
      apply_left_control(text, sign, kind != '{', line_starting);
      emit_text(pos, text);
      size_t inner = start + 2 + (sign ? 1 : 0);
      if (raw_end) {
        pos = lex_raw(raw_end);
      } else if (kind == '#') {
        pos = lex_comment(start, inner);
      } else {
        pos = lex_tag(start, inner, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    push(Tok::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // '-' strips all whitespace before the tag; otherwise lstrip_blocks strips the spaces
  // between the line start and a block/comment tag when nothing else is on that line.
  static void apply_left_control(std::string& text, char sign, bool lstrip_applies,
                                 bool line_starting) {
    if (sign == '-') {
      text.resize(rstrip_length(text));
    } else if (sign != '+' && lstrip_applies) {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if ((l_pos > 0 || line_starting) && all_space(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
  }

  // {% raw %} / {%- raw -%}: returns the offset after the tag, or 0 when this is not one.
  size_t match_raw_begin(size_t start) const {
    size_t i = start + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_space(src_, i);
    if (src_.compare(i, 3, "raw") != 0) return 0;
    i = skip_space(src_, i + 3);
    if (src_.compare(i, 3, "-%}") == 0) return skip_space(src_, i + 3);
    if (src_.compare(i, 2, "%}") == 0) return i + 2;  // no trim_blocks after raw, as in Jinja
    return 0;
  }

  size_t lex_raw(size_t body_start) {
    // Jinja's lexer stops quietly when a raw block or comment opens at the very end.
    if (body_start >= src_.size()) return src_.size();
    for (size_t i = src_.find("{%", body_start); i != std::string::npos;
         i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      j = skip_space(src_, j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_space(src_, j + 6);
      size_t after = 0;
      if (src_.compare(j, 3, "+%}") == 0) {
        after = j + 3;
      } else if (src_.compare(j, 3, "-%}") == 0) {
        after = skip_space(src_, j + 3);
      } else if (src_.compare(j, 2, "%}") == 0) {
        after = j + 2;
        if (after < src_.size() && src_[after] == '\n') ++after;
      } else {
        continue;
      }
      std::string text = src_.substr(body_start, i - body_start);
      bool line_starting = body_start > 0 && src_[body_start - 1] == '\n';
      apply_left_control(text, sign, true, line_starting);
      emit_text(body_start, text);
      return after;
    }
    fail_at(body_start, "missing {{% endraw %}} for {{% raw %}}");
  }

  size_t lex_comment(size_t start, size_t inner) {
    if (inner >= src_.size()) return src_.size();
    size_t end = src_.find("#}", inner);
    if (end == std::string::npos) fail_at(start, "missing end of comment tag '#}}'");
    size_t after = end + 2;
    char sign = end > inner ? src_[end - 1] : 0;
    if (sign == '-') {
      after = skip_space(src_, after);
    } else if (sign != '+' && after < src_.size() && src_[after] == '\n') {
      ++after;  // trim_blocks applies to comments too
    }
    return after;
  }

  // Returns the offset after the closing delimiter if the tag ends at i.
  size_t match_tag_end(size_t i, bool block) const {
    if (block) {
      if (src_.compare(i, 3, "-%}") == 0) return skip_space(src_, i + 3);
      if (src_.compare(i, 3, "+%}") == 0) return i + 3;
      if (src_.compare(i, 2, "%}") == 0) {
        return i + 2 < src_.size() && src_[i + 2] == '\n' ? i + 3 : i + 2;
      }
    } else {
      if (src_.compare(i, 3, "-}}") == 0) return skip_space(src_, i + 3);
      if (src_.compare(i, 2, "}}") == 0) return i + 2;
    }
    return 0;
  }

  size_t lex_tag(size_t start, size_t i, bool block) {
    push(block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", start);
    std::vector<char> brackets;
    while (true) {
      if (i >= src_.size()) {
        if (block) fail_at(start, "unexpected end of template, expected '%}}' to close the tag");
        fail_at(start, "unexpected end of template, expected '}}}}' to close the expression");
      }
      if (brackets.empty()) {
        if (size_t after = match_tag_end(i, block)) {
          push(block ? Tok::kBlockEnd : Tok::kVarEnd, block ? "%}" : "}}", i);
          return after;
        }
      }
      size_t n = 0;
      if (unicode::is_space(code_point_at(src_, i, &n))) {
        i += n;
        continue;
      }
      char c = src_[i];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        i = lex_number(i);
      } else if (is_name_start(c)) {
        size_t j = i;
        while (j < src_.size() && is_name_char(src_[j])) ++j;
        push(Tok::kName, src_.substr(i, j - i), i);
        i = j;
      } else if (c == '\'' || c == '"') {
        i = lex_string(i);
      } else {
        i = lex_operator(i, brackets);
      }
    }
  }

  size_t lex_number(size_t i) {
    auto digits = [&](size_t j, auto accept) {
      // A digit run with single underscores between digits, as Python allows.
      size_t k = j;
      while (k < src_.size() && (accept(src_[k]) || (src_[k] == '_' && k > j &&
                                                     k + 1 < src_.size() && accept(src_[k + 1]))))
        ++k;
      return k;
    };
    auto dec = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
    auto strip_underscores = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    if (src_[i] == '0' && i + 1 < src_.size() && src_[i + 1] != '\0' &&
        std::strchr("bBoOxX", src_[i + 1])) {
      char base_char = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i + 1])));
      int base = base_char == 'b' ? 2 : base_char == 'o' ? 8 : 16;
      auto accept = [base](char ch) {
        return base == 16 ? std::isxdigit(static_cast<unsigned char>(ch)) != 0
                          : (ch >= '0' && ch < '0' + base);
      };
      size_t j = i + 2;
      if (j < src_.size() && src_[j] == '_') ++j;
      size_t end = digits(j, accept);
      if (end > j) {
        Token& t = push(Tok::kInt, src_.substr(i, end - i), i);
        try {
          t.int_value = std::stoll(strip_underscores(src_.substr(j, end - j)), nullptr, base);
        } catch (const std::out_of_range&) {
          fail_at(i, "integer literal {} does not fit in 64 bits", src_.substr(i, end - i));
        }
        return end;
      }
    }
    size_t end = digits(i, dec);
    bool is_float = false;
    bool after_dot = i > 0 && src_[i - 1] == '.';  // x.0.1 is two subscripts, not 0.1
    size_t f = end;
    if (!after_dot && f + 1 < src_.size() && src_[f] == '.' && dec(src_[f + 1])) {
      f = digits(f + 1, dec);
      is_float = true;
    }
    if (!after_dot && f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
      size_t e = f + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && dec(src_[e])) {
        f = digits(e, dec);
        is_float = true;
      }
    }
    std::string text = strip_underscores(src_.substr(i, (is_float ? f : end) - i));
    if (is_float) {
      Token& t = push(Tok::kFloat, text, i);
      // strtod, not stod: out of range is inf or 0 as in Python's float(), not an exception.
      t.float_value = std::strtod(text.c_str(), nullptr);
      return f;
    }
    Token& t = push(Tok::kInt, text, i);
    try {
      t.int_value = std::stoll(text);
    } catch (const std::out_of_range&) {
      fail_at(i, "integer literal {} does not fit in 64 bits", text);
    }
    return end;
  }

  // Python's unicode-escape decoding of a Jinja string literal.
  size_t lex_string(size_t i) {
    char quote = src_[i];
    std::string out;
    size_t j = i + 1;
    auto hex = [&](size_t at, int count) -> char32_t {
      if (at + count > src_.size()) fail_at(at, "truncated \\x, \\u or \\U escape");
      char32_t v = 0;
      for (int k = 0; k < count; ++k) {
        char ch = src_[at + k];
        if (!std::isxdigit(static_cast<unsigned char>(ch)))
          fail_at(at, "truncated \\x, \\u or \\U escape");
        v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(ch))
                                               ? ch - '0'
                                               : std::tolower(ch) - 'a' + 10);
      }
      return v;
    };
    while (true) {
      if (j >= src_.size()) fail_at(i, "unterminated string literal");
      char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) fail_at(i, "unterminated string literal");
      char e = src_[j + 1];
      j += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
          unicode::append_utf8(out, hex(j, 2));
          j += 2;
          break;
        case 'u':
          unicode::append_utf8(out, hex(j, 4));
          j += 4;
          break;
        case 'U':
          unicode::append_utf8(out, hex(j, 8));
          j += 8;
          break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++k)
              v = v * 8 + static_cast<char32_t>(src_[j++] - '0');
            unicode::append_utf8(out, v);
          } else {
            // Unknown escapes stay as written, as in Python ("\d" is backslash-d).
            out += '\\';
            out += e;
          }
      }
    }
    push(Tok::kString, std::move(out), i);
    return j + 1;
  }

  size_t lex_operator(size_t i, std::vector<char>& brackets) {
    static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(i, 2, op) == 0) {
        push(Tok::kOp, op, i);
        return i + 2;
      }
    }
    char c = src_[i];
    if (!std::strchr("+-/*%~[](){}<>=.:|,;", c) || c == 0) {
      size_t n = 0;
      char32_t cp = code_point_at(src_, i, &n);
      std::string shown;
      unicode::append_utf8(shown, cp);
      fail_at(i, "unexpected character '{}'", shown);
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open) fail_at(i, "unexpected '{}'", c);
      brackets.pop_back();
    }
    push(Tok::kOp, std::string(1, c), i);
    return i + 1;
  }

  void emit_text(size_t at, const std::string& text) {
    if (!text.empty()) push(Tok::kText, text, at);
  }

  Token& push(Tok type, std::string text, size_t at) {
    auto [line, col] = position(at);
    tokens_.push_back(Token{type, std::move(text), 0, 0, line, col});
    return tokens_.back();
  }

  std::pair<int, int> position(size_t at) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    size_t line_start = *(it - 1);
    int col = static_cast<int>(
                  unicode::length(std::string_view(src_).substr(line_start, at - line_start))) +
              1;
    return {static_cast<int>(it - line_starts_.begin()), col};
  }

  template <typename... Args>
  [[noreturn]] void fail_at(size_t at, fmt::format_string<Args...> f, Args&&... args) const {
    auto [line, col] = position(at);
    throw Error(fmt::format("chat template syntax error at {}:{}: {}", line, col,
                            fmt::format(f, std::forward<Args>(args)...)));
  }

  std::string src_;
  std::vector<size_t> line_starts_{0};
  std::vector<Token> tokens_;
};

// Jinja normalises \r\n and \r to \n and, without keep_trailing_newline, drops one final \n.
std::string normalize(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  return Lexer(normalize(source)).run();
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText:
      return "template text";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "end of print statement '}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "end of statement block '%}'";
    case Tok::kName:
      return "'" + t.text + "'";
    case Tok::kString:
      return "string literal";
    case Tok::kInt:
      return "integer " + t.text;
    case Tok::kFloat:
      return "float " + t.text;
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kEnd:
      return "end of template";
  }
  return "token";
}

}  // namespace tandem::jinja
