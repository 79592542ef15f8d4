#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/string_map.h"
#include "tokenizer/utf8.h"

namespace tandem {

struct Tokenizer::Impl {
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;

  std::unordered_map<int32_t, tok::AddedToken> added_by_id;
  tok::StringMap<int32_t> added_by_content;
  // Tokens with normalized=false match the raw text, the others the normalized text.
  tok::AddedTokenMatcher raw_matcher;
  tok::AddedTokenMatcher normalized_matcher;
  int32_t vocab_size = 0;
  std::vector<std::string> bytes;        // token_bytes() of every id, computed once
  std::vector<bool> skipped_as_special;  // what decode(skip_special_tokens) drops

  explicit Impl(const tok::Json& root);
  const std::string* token_string(int32_t id) const;
  void encode_piece(std::string text, std::vector<int32_t>& ids) const;
};

namespace {

// The ids HF gives added tokens when it loads a file: a content already added keeps its id, a
// content in the model vocab takes that id, anything else gets the next free id (the vocab's
// entry count, or one past the largest added id). The "id" fields are only checked against
// this, as HF does; they differ only in hand-edited files, where HF's ids are what a model
// trained with HF saw. Returns one token per content, the last definition winning.
std::vector<tok::AddedToken> assign_added_token_ids(std::vector<tok::AddedToken> tokens,
                                                    const tok::BpeModel& model) {
  std::vector<tok::AddedToken> out;
  tok::StringMap<size_t> index;  // content -> position in `out`
  const int64_t vocab_count = model.vocab_count();
  int64_t max_added = -1;
  for (tok::AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    const int32_t file_id = t.id;
    if (auto it = index.find(t.content); it != index.end()) {
      t.id = out[it->second].id;
      out[it->second] = t;
    } else {
      if (auto id = model.token_to_id(t.content)) {
        t.id = *id;
      } else {
        t.id = static_cast<int32_t>(max_added < 0                                  ? vocab_count
                                    : max_added >= vocab_count || vocab_count == 0 ? max_added + 1
                                                                                   : vocab_count);
      }
      index[t.content] = out.size();
      out.push_back(t);
    }
    max_added = std::max<int64_t>(max_added, t.id);
    if (t.id != file_id) {
      log_warn("tokenizer.json: added token '{}' has id {} but gets id {}, as in HF tokenizers",
               t.content, file_id, t.id);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Impl::Impl(const tok::Json& root) {
  using namespace tok;
  if (!root.is_object()) json_fail("", "expected a JSON object");
  normalizer = parse_normalizer(root.value("normalizer", Json()), "normalizer");
  pre_tokenizer = parse_pre_tokenizer(root.value("pre_tokenizer", Json()), "pre_tokenizer");
  model = std::make_unique<BpeModel>(json_required(root, "", "model"), "model");
  post_processor = parse_post_processor(root.value("post_processor", Json()), "post_processor");
  decoder = parse_decoder(root.value("decoder", Json()), "decoder");
  // "truncation" and "padding" are ignored: a server decides lengths itself.

  const std::vector<AddedToken> added = assign_added_token_ids(parse_added_tokens(root), *model);
  vocab_size = model->id_limit();
  for (const AddedToken& t : added) {
    added_by_id[t.id] = t;
    added_by_content[t.content] = t.id;
    vocab_size = std::max(vocab_size, t.id + 1);
  }
  raw_matcher = AddedTokenMatcher(added, normalizer.get(), false);
  normalized_matcher = AddedTokenMatcher(added, normalizer.get(), true);

  // As HF 0.23 does, an added token with normalized=true decodes from its normalized form
  // (that is what the decoder can invert), and id_to_token shows that form too.
  for (auto& [id, t] : added_by_id) {
    if (t.normalized && normalizer) t.content = normalizer->normalize(t.content);
  }
  // HF drops a token in decode(skip_special_tokens) when its string is a special token's content.
  tok::StringMap<bool> special_contents;
  for (const AddedToken& t : added) {
    if (t.special) special_contents[t.content] = true;
  }
  bytes.resize(static_cast<size_t>(vocab_size));
  skipped_as_special.resize(static_cast<size_t>(vocab_size));
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string* s = token_string(id);
    if (s == nullptr) continue;
    bytes[id] = decoder ? decoder->token_bytes(*s) : *s;
    skipped_as_special[id] = special_contents.contains(*s);
  }
}

// The string decode works from: the added token's (normalized) content, else the vocab entry.
const std::string* Tokenizer::Impl::token_string(int32_t id) const {
  auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return &it->second.content;
  return model->id_to_token(id);
}

void Tokenizer::Impl::encode_piece(std::string text, std::vector<int32_t>& ids) const {
  if (normalizer) text = normalizer->normalize(std::move(text));
  std::vector<tok::Piece> pieces;
  normalized_matcher.split(text, pieces);
  std::vector<std::string> words;
  for (tok::Piece& p : pieces) {
    if (p.added_id >= 0) {
      ids.push_back(p.added_id);
      continue;
    }
    words.clear();
    if (pre_tokenizer) {
      pre_tokenizer->split(p.text, words);
    } else {
      words.push_back(std::move(p.text));
    }
    for (const std::string& w : words) model->tokenize(w, ids);
  }
}

Tokenizer Tokenizer::from_json(const std::string& json_text) {
  // Nesting is bounded while parsing: reading the pipeline copies subtrees, which is recursive in
  // nlohmann::json, and a deep enough file would overflow the stack.
  constexpr int kMaxDepth = 128;
  struct TooDeep {};
  tok::Json root;
  try {
    root = tok::Json::parse(json_text, [](int depth, tok::Json::parse_event_t e, tok::Json&) {
      if ((e == tok::Json::parse_event_t::object_start ||
           e == tok::Json::parse_event_t::array_start) &&
          depth >= kMaxDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    fail("tokenizer.json: JSON nested deeper than {} levels", kMaxDepth);
  } catch (const tok::Json::exception& e) {  // a syntax error, or a number such as 1e400
    fail("tokenizer.json is not valid JSON: {}", e.what());
  }
  return Tokenizer(std::make_shared<const Impl>(root));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open tokenizer file '{}'", path);
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) fail("cannot read tokenizer file '{}'", path);
  try {
    return from_json(buf.str());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Piece> pieces;
  impl_->raw_matcher.split(text, pieces);
  for (tok::Piece& p : pieces) {
    if (p.added_id >= 0) {
      ids.push_back(p.added_id);
    } else {
      impl_->encode_piece(std::move(p.text), ids);
    }
  }
  if (add_special_tokens && impl_->post_processor) {
    ids = impl_->post_processor->process(std::move(ids));
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= impl_->vocab_size) continue;
    if (skip_special_tokens && impl_->skipped_as_special[id]) continue;
    const std::string* token = impl_->token_string(id);
    if (token == nullptr) continue;
    // Without a decoder HF joins the token strings with spaces.
    if (!impl_->decoder && !first) out.push_back(' ');
    out += impl_->bytes[id];
    first = false;
  }
  return tok::to_valid_utf8(out);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size) return {};
  return impl_->bytes[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(token);
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* s = impl_->token_string(id);
  return s ? *s : std::string();
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && it->second.special;
}

}  // namespace tandem
