// Helpers for the self-contained tokenizer tests: small handmade tokenizer.json documents.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {

using nlohmann::json;

// A BPE tokenizer.json with ids 0..n-1 for `vocab`, the given merges, and no other components.
inline json tiny_bpe(const std::vector<std::string>& vocab, json merges) {
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", v}, {"merges", std::move(merges)}}}};
}

// Merges in the ["a", "b"] pair format (a braced list alone would become a JSON object).
inline json merge_pairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::array();
  for (const auto& [a, b] : pairs) out.push_back(json::array({a, b}));
  return out;
}

inline Tokenizer load(const json& j) {
  return Tokenizer::from_json(j.dump());
}

// The byte-level tokenizer with `specials` at 256..., parsed so a test can add to it.
inline json byte_level(const std::vector<std::string>& specials = {}) {
  return json::parse(make_byte_level_tokenizer_json(specials));
}

inline json added_token(const std::string& content, int id, json options = json::object()) {
  json t = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", false}, {"special", false}};
  for (auto it = options.begin(); it != options.end(); ++it) t[it.key()] = it.value();
  return t;
}

// The ids of the bytes of `s` in a byte-level vocabulary (id == byte value).
inline std::vector<int32_t> byte_ids(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

// Expects `fn` to throw tandem::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
    }
    return;
  }
  ADD_FAILURE() << "no tandem::Error thrown";
}

}  // namespace tandem::test
