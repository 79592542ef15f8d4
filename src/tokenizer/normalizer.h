// Normalizers: rewrite text before pre-tokenization (tokenizer.json "normalizer").
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// nullptr for a null normalizer. Supports NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace,
// Strip and Sequence; anything else is an error naming `path`.
std::unique_ptr<Normalizer> parse_normalizer(const Json& j, const std::string& path);

}  // namespace tandem::tok
