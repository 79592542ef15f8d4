#include "tokenizer/decoder.h"

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

class ByteLevel : public Decoder {
 public:
  std::string token_bytes(std::string token) const override { return chars_to_bytes(token); }
};

// "<0xAB>" tokens of byte-fallback vocabularies stand for the raw byte 0xAB.
class ByteFallback : public Decoder {
 public:
  std::string token_bytes(std::string token) const override {
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
      };
      const int hi = hex(token[3]), lo = hex(token[4]);
      if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
    }
    return token;
  }
};

// Fuse joins all tokens into one string, which concatenation already does.
class Identity : public Decoder {
 public:
  std::string token_bytes(std::string token) const override { return token; }
};

class Replace : public Decoder {
 public:
  Replace(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string token_bytes(std::string token) const override {
    return replace_all(*pattern_, token, content_);
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::string content_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  std::string token_bytes(std::string token) const override {
    for (const auto& p : parts_) token = p->token_bytes(std::move(token));
    return token;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() {
  return std::make_unique<ByteLevel>();
}

std::unique_ptr<Decoder> parse_decoder(const Json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, path);
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Identity>();
  if (type == "Replace") {
    return std::make_unique<Replace>(
        parse_pattern(json_required(j, path, "pattern"), json_path(path, "pattern")),
        json_string(j, path, "content"));
  }
  if (type == "Sequence") {
    const std::string list_path = json_path(path, "decoders");
    const Json& list = json_array(j, path, "decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = parse_decoder(list[i], json_path(list_path, i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  json_fail(json_path(path, "type"), "unsupported decoder '" + type + "'");
}

}  // namespace tandem::tok
