// Splits template source into text and tag tokens with Jinja's whitespace rules as transformers
// configures them: trim_blocks (drop the newline after a block or comment tag), lstrip_blocks
// (drop spaces before a block or comment tag that starts a line), '-'/'+' modifiers on tags,
// newlines normalised to \n and one trailing newline removed (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::jinja {

enum class Tok {
  kText,
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEnd,  // end of template
};

struct Token {
  Tok type;
  std::string text;  // text data, name, decoded string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

// Throws tandem::Error "line:col: ..." on an unterminated tag, comment or string.
std::vector<Token> tokenize(const std::string& source);

// Describes a token for "expected X, found Y" messages.
std::string describe(const Token& t);

}  // namespace tandem::jinja
