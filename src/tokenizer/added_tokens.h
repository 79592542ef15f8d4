// Added tokens (tokenizer.json "added_tokens"): strings cut out of the text before the
// normalizer and the model run, each becoming its own id (special tokens such as <|im_start|>).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;  // match only where not touching word characters
  bool lstrip = false;       // swallow the whitespace on its left
  bool rstrip = false;       // swallow the whitespace on its right
  bool normalized = true;    // match against the normalized text (else the raw text)
};

// A stretch of text: either still to be encoded, or an added token already resolved.
struct Piece {
  std::string text;
  int32_t added_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `normalizer` (may be null) normalizes the contents of normalized tokens, as HF does.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, const Normalizer* normalizer,
                    bool normalized_set);

  // Splits `text` into added-token pieces and the non-empty text between them. Matching is
  // leftmost-longest over the token contents, then single_word/lstrip/rstrip apply (HF's
  // AddedVocabulary::find_matches).
  void split(std::string_view text, std::vector<Piece>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_
  };
  int32_t child(int32_t node, unsigned char b) const;
  // The longest token starting at `pos`, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t& end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

// Parses "added_tokens" (an array; null or absent gives none).
std::vector<AddedToken> parse_added_tokens(const Json& root);

}  // namespace tandem::tok
