// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocab, ranked merges and
// the options GPT-2, Llama-3, Qwen3 and DeepSeek-V3 use.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/string_map.h"

namespace tandem::tok {

class BpeModel {
 public:
  // Throws tandem::Error naming the field (under `path`) that is missing or malformed.
  BpeModel(const Json& j, const std::string& path);

  // Appends the ids of one pre-tokenized word. Safe to call from many threads at once.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no vocab entry has this id.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocab.
  int32_t id_limit() const { return static_cast<int32_t>(vocab_r_.size()); }
  // The number of vocab entries (what HF calls the model's vocab size).
  int64_t vocab_count() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void add_merge(const std::string& a, const std::string& b, uint32_t rank,
                 const std::string& path);

  StringMap<int32_t> vocab_;
  std::vector<const std::string*> vocab_r_;  // id -> key in vocab_, nullptr for holes
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<std::string> prefix_;  // continuing_subword_prefix
  std::optional<std::string> suffix_;  // end_of_word_suffix
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // "<0xAB>" tokens for byte_fallback, -1 if absent

  // word -> ids, because real text repeats words. Sharded to keep threads from contending.
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheShardCapacity = 4096;
  static constexpr size_t kMaxCachedWordBytes = 256;
  struct CacheShard {
    std::mutex mu;
    StringMap<std::vector<int32_t>> map;
  };
  mutable std::unique_ptr<CacheShard[]> cache_;
};

}  // namespace tandem::tok
