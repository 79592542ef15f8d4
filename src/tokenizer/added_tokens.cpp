#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

// The last character before `end`, or kInvalidChar when there is none.
char32_t char_before(std::string_view text, size_t end) {
  if (end == 0) return kInvalidChar;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  const Utf8Char c = decode_utf8(text, start);
  return start + c.len == end ? c.cp : kInvalidChar;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const Normalizer* normalizer, bool normalized_set) {
  trie_.emplace_back();
  // HF puts special tokens ahead of the others; with leftmost-longest matching the order only
  // decides between identical contents.
  std::vector<const AddedToken*> order;
  for (const AddedToken& t : tokens) {
    if (t.special) order.push_back(&t);
  }
  for (const AddedToken& t : tokens) {
    if (!t.special) order.push_back(&t);
  }
  for (const AddedToken* t : order) {
    if (t->normalized != normalized_set || t->content.empty()) continue;
    AddedToken tok = *t;
    if (normalized_set && normalizer != nullptr) tok.content = normalizer->normalize(tok.content);
    if (tok.content.empty()) continue;
    int32_t node = 0;
    for (char ch : tok.content) {
      const auto b = static_cast<unsigned char>(ch);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        trie_.emplace_back();
        auto& kids = trie_[node].children;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{0})),
                    {b, next});
      }
      node = next;
    }
    if (trie_[node].token < 0) {
      trie_[node].token = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(std::move(tok));
      first_byte_[static_cast<unsigned char>(tokens_.back().content[0])] = true;
    }
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& kids = trie_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{0}));
  return it != kids.end() && it->first == b ? it->second : -1;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t& end) const {
  int32_t node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) {
      found = trie_[node].token;
      end = i + 1;
    }
  }
  return found;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Piece>& out) const {
  size_t done = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = 0;
    const int32_t t =
        first_byte_[static_cast<unsigned char>(text[pos])] ? longest_at(text, pos, end) : -1;
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[t];
    size_t start = pos;
    pos = end;  // a rejected match is still consumed, as HF's non-overlapping iterator does
    if (tok.single_word) {
      const bool word_before = start > 0 && is_word_char(char_before(text, start));
      const bool word_after = end < text.size() && is_word_char(decode_utf8(text, end).cp);
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > done) {
        const char32_t c = char_before(text, s);
        if (!is_whitespace(c)) break;
        s -= c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      }
      start = s;
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        const Utf8Char c = decode_utf8(text, end);
        if (!is_whitespace(c.cp)) break;
        end += c.len;
      }
      pos = end;
    }
    if (done < start) out.push_back({std::string(text.substr(done, start - done)), -1});
    out.push_back({std::string(text.substr(start, end - start)), tok.id});
    done = end;
  }
  if (done < text.size()) out.push_back({std::string(text.substr(done)), -1});
}

std::vector<AddedToken> parse_added_tokens(const Json& root) {
  std::vector<AddedToken> tokens;
  const Json* list = json_optional(root, "added_tokens");
  if (list == nullptr) return tokens;
  if (!list->is_array()) json_fail("added_tokens", "expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& j = (*list)[i];
    const std::string path = json_path("added_tokens", i);
    AddedToken t;
    t.content = json_string(j, path, "content");
    const int64_t id = json_int(j, path, "id");
    if (id < 0 || id > INT32_MAX) json_fail(json_path(path, "id"), "expected a non-negative id");
    t.id = static_cast<int32_t>(id);
    t.special = json_bool_or(j, path, "special", false);
    t.single_word = json_bool_or(j, path, "single_word", false);
    t.lstrip = json_bool_or(j, path, "lstrip", false);
    t.rstrip = json_bool_or(j, path, "rstrip", false);
    t.normalized = json_bool_or(j, path, "normalized", !t.special);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace tandem::tok
