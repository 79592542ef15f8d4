// A Hugging Face tokenizer.json tokenizer (byte-level BPE as used by GPT-2, Llama-3, Qwen3,
// DeepSeek-V3 and GLM-4/5). encode() gives the same ids as HF tokenizers for valid UTF-8; see
// docs/tokenizer.md for what is supported and how that is checked against HF itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// Immutable after construction: encode/decode may be called from many threads at once. Copies
// are cheap and share the loaded vocabulary.
class Tokenizer {
 public:
  // Errors (tandem::Error) name the file and the offending field, e.g. "model.merges[12]".
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(const std::string& json_text);

  // Splits out added/special tokens, normalizes, pre-tokenizes and runs BPE.
  // add_special_tokens applies the post_processor (e.g. Llama-3's BOS). Any bytes are accepted;
  // invalid UTF-8 is carried through as raw bytes (a byte-level model can encode them).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // The text of `ids`, always valid UTF-8 (broken sequences become U+FFFD). Ids that no token
  // has are skipped, as HF does.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // The raw bytes one token contributes after the decoder (may be a partial UTF-8 sequence);
  // concatenating them gives decode()'s bytes before U+FFFD repair. Empty for unknown ids.
  std::string token_bytes(int32_t id) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // vocab or added token
  std::string id_to_token(int32_t id) const;  // the vocab string as stored; empty if unknown
  int32_t vocab_size() const;                 // max id + 1, added tokens included
  bool is_special(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// JSON text of a minimal byte-level BPE tokenizer.json: the 256 byte tokens in GPT-2
// byte-to-unicode order as ids 0..255, no merges, ByteLevel pre-tokenizer and decoder, then
// `special_tokens` as added special tokens with ids 256, 257, ...
std::string make_byte_level_tokenizer_json(const std::vector<std::string>& special_tokens);

}  // namespace tandem
