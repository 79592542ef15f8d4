// Pre-tokenizers: cut normalized text into the words that the model encodes one by one
// (tokenizer.json "pre_tokenizer").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the non-empty pieces of `piece` to `out`.
  virtual void split(std::string_view piece, std::vector<std::string>& out) const = 0;
};

// nullptr for a null pre-tokenizer. Supports Split, ByteLevel, Digits, WhitespaceSplit and
// Sequence; anything else is an error naming `path`.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j, const std::string& path);

// A ByteLevel pre-tokenizer (what make_byte_level_tokenizer_json describes).
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);

}  // namespace tandem::tok
