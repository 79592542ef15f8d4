// PCRE2-backed regular expressions that split text the way Hugging Face tokenizers' Oniguruma
// (SysRegex) does: same leftmost-backtracking semantics, Unicode properties (UTF + UCP), the
// same find_iter rules for empty matches, and Oniguruma's meaning of \s and \h.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace tandem::tok {

struct Span {
  size_t start;
  size_t end;
};

class Regex {
 public:
  // `literal`: the pattern is plain text to find (a Split/Replace "String" pattern).
  // Throws tandem::Error with PCRE2's message when the pattern does not compile.
  Regex(std::string_view pattern, bool literal);

  // All non-overlapping matches, left to right (the Rust onig crate's find_iter). Safe to call
  // from many threads at once.
  void find_all(std::string_view text, std::vector<Span>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<pcre2_real_code_8> code_;
};

// Rewrites the escapes whose meaning differs between Oniguruma and PCRE2: \s/\S (PCRE2 also
// counts U+180E as space), \h/\H (hex digits in Oniguruma, horizontal space in PCRE2), and
// general-category properties (\p{L}, \p{N}, \d, ...), widened to Unicode 16.0 with the
// characters PCRE2's older tables lack (see unicode_catchup.h).
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace tandem::tok
