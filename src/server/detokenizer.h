// Incremental detokenization for streaming. Token bytes are buffered until they form whole UTF-8
// characters, so a delta never carries half a character, and the concatenated deltas equal
// Tokenizer::decode of all the ids (same U+FFFD repair for broken sequences, same special-token
// skipping): a streamed response reads exactly like the non-streamed one.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tandem::server {

class IncrementalDetokenizer {
 public:
  // keep_special: special ids that are emitted even when skipping special tokens (the reasoning
  // markers, which the reasoning parser needs to see).
  IncrementalDetokenizer(Tokenizer tok, bool skip_special_tokens,
                         std::unordered_set<int32_t> keep_special = {});

  // Adds one token; returns the text that became complete (possibly empty).
  std::string push(int32_t id);
  // End of the stream: an unfinished character becomes U+FFFD, as decode() does.
  std::string flush();

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::unordered_set<int32_t> keep_special_;
  std::string pending_;  // bytes that may still be the start of a character
};

// The longest prefix of `bytes` after which no later byte can change how it decodes: everything
// except a trailing truncated-but-valid UTF-8 sequence. Exposed for tests.
size_t utf8_stable_prefix(std::string_view bytes);

}  // namespace tandem::server
