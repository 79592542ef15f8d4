#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode_catchup.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and the Zs, Zl, Zp categories.
constexpr const char* kSpaceItems =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";
constexpr const char* kHexItems = "0-9a-fA-F";

// Per-thread matching state: the match data and a JIT stack larger than PCRE2's 32 KiB default,
// so patterns over long runs (a 20k-character line) do not hit the JIT stack limit.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    TD_CHECK(data && context && stack, "PCRE2: out of memory creating match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Rewrites the property escape at p[i] (\pL, \p{Name}, \p{^Name}, \P{Name}, \d or \D) so
// that it also covers the characters assigned after PCRE2's Unicode version; returns the index
// of the escape's last character.
size_t widen_property(std::string_view p, size_t i, bool in_class, std::string& out) {
  const char e = p[i + 1];
  bool negated = e == 'P' || e == 'D';
  std::string name = "Nd";  // \d is \p{Nd} in both engines (Unicode mode)
  size_t end = i + 2;       // one past the escape
  if (e == 'p' || e == 'P') {
    if (i + 2 < p.size() && p[i + 2] == '{') {
      const size_t close = p.find('}', i + 3);
      if (close == std::string_view::npos) {  // malformed: let PCRE2 report it
        out.append(p.substr(i, 2));
        return i + 1;
      }
      name = std::string(p.substr(i + 3, close - i - 3));
      end = close + 1;
    } else {
      name = std::string(p.substr(i + 2, 1));
      end = i + 3;
    }
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
  }
  const std::string_view original = p.substr(i, end - i);
  const std::string items = catchup_class_items(name);
  if (items.empty() || (negated && in_class)) {
    // Nothing to add, or a negation inside a class, which items cannot express.
    out.append(original);
  } else if (in_class) {
    out.append(original);
    out += items;
  } else {
    out += negated ? "[^" : "[";
    out += e == 'd' || e == 'D' ? "\\d" : "\\p{" + name + "}";
    out += items;
    out += "]";
  }
  return end - 1;
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'p' || e == 'P' || e == 'd' || e == 'D') {
        i = widen_property(p, i, in_class, out);
        continue;
      }
      ++i;
      const bool space = e == 's' || e == 'S';
      const bool hex = e == 'h' || e == 'H';
      if (!space && !hex) {
        out.push_back('\\');
        out.push_back(e);
        continue;
      }
      const char* items = space ? kSpaceItems : kHexItems;
      const bool negated = e == 'S' || e == 'H';
      if (!in_class) {
        out += negated ? "[^" : "[";
        out += items;
        out += "]";
      } else if (!negated) {
        out += items;
      } else {
        // A negated class inside a class cannot be spelled as items; \S and \H there are rare
        // enough that PCRE2's own meaning is kept.
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {  // a POSIX class such as [:alpha:]
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern) {
  const std::string source = literal ? std::string(pattern) : onig_to_pcre2(pattern);
  // MATCH_INVALID_UTF: invalid bytes never match and are not an error, so arbitrary bytes can
  // be split; it also skips the per-call UTF check, which would make find_all quadratic.
  // (PCRE2 refuses UCP together with LITERAL, and a literal needs no character classes.)
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    fail("bad regex '{}': {} at offset {}", pattern, pcre2_message(error), offset);
  }
  code_.reset(code, pcre2_code_free);
  // JIT is an optimization: without it (an unsupported CPU) the interpreter gives the same answers.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (from <= n) {
    const int rc = pcre2_match(code_.get(), subject, n, from, 0, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0 only says the ovector was too small for the groups; the whole match is there.
    if (rc < 0) fail("regex '{}' failed on a {}-byte input: {}", pattern_, n, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // An empty match right where the previous match ended is skipped by stepping one character.
      from += from < n ? decode_utf8(text, from).len : 1;
      continue;
    }
    from = e;
    have_last = true;
    last_end = e;
    out.push_back({s, e});
  }
}

}  // namespace tandem::tok
