// make_byte_level_tokenizer_json: the tokenizer of models that ship without a trained one.
#include <nlohmann/json.hpp>

#include <set>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

std::string make_byte_level_tokenizer_json(const std::vector<std::string>& special_tokens) {
  using nlohmann::ordered_json;
  std::set<std::string> seen;
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    const std::string& s = special_tokens[i];
    if (s.empty()) fail("make_byte_level_tokenizer_json: special token {} is empty", i);
    if (!seen.insert(s).second) {
      fail("make_byte_level_tokenizer_json: special token '{}' is listed twice", s);
    }
    added.push_back({{"id", 256 + i},
                     {"content", s},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::byte_to_utf8()[b]] = b;
  const ordered_json byte_level = {{"type", "ByteLevel"},
                                   {"add_prefix_space", false},
                                   {"trim_offsets", true},
                                   {"use_regex", true}};
  const ordered_json root = {{"version", "1.0"},
                             {"truncation", nullptr},
                             {"padding", nullptr},
                             {"added_tokens", added},
                             {"normalizer", nullptr},
                             {"pre_tokenizer", byte_level},
                             {"post_processor", byte_level},
                             {"decoder", byte_level},
                             {"model",
                              {{"type", "BPE"},
                               {"dropout", nullptr},
                               {"unk_token", nullptr},
                               {"continuing_subword_prefix", nullptr},
                               {"end_of_word_suffix", nullptr},
                               {"fuse_unk", false},
                               {"byte_fallback", false},
                               {"ignore_merges", false},
                               {"vocab", vocab},
                               {"merges", ordered_json::array()}}}};
  return root.dump(2);
}

}  // namespace tandem
