// Decoders (tokenizer.json "decoder"): turn token strings back into text bytes.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace tandem::tok {

// Every supported decoder works token by token, so a token's bytes do not depend on its
// neighbours: decode(ids) is the concatenation of the tokens' bytes made valid UTF-8, and a
// streaming server can emit token_bytes() as ids arrive.
class Decoder {
 public:
  virtual ~Decoder() = default;
  // The bytes `token` (its vocab string) contributes to the text; may be partial UTF-8.
  virtual std::string token_bytes(std::string token) const = 0;
};

// nullptr for null (then tokens are joined with spaces, as HF does). Supports ByteLevel,
// ByteFallback, Fuse, Replace and Sequence of these. Strip and Metaspace are refused: they act
// on the first or last token only, so a token's bytes would depend on its position.
std::unique_ptr<Decoder> parse_decoder(const Json& j, const std::string& path);

std::unique_ptr<Decoder> make_byte_level_decoder();

}  // namespace tandem::tok
