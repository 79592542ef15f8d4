#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

std::optional<std::string> optional_string(const Json& j, const std::string& path,
                                           const char* key) {
  if (json_optional(j, key) == nullptr) return std::nullopt;
  return json_string(j, path, key);
}

}  // namespace

BpeModel::BpeModel(const Json& j, const std::string& path)
    : cache_(std::make_unique<CacheShard[]>(kCacheShards)) {
  if (!j.is_object()) json_fail(path, "expected an object");
  if (j.contains("type") && json_string(j, path, "type") != "BPE") {
    json_fail(json_path(path, "type"),
              "unsupported model '" + json_string(j, path, "type") + "' (only BPE is supported)");
  }
  if (const Json* d = json_optional(j, "dropout");
      d != nullptr && (!d->is_number() || d->get<double>() != 0.0)) {
    json_fail(json_path(path, "dropout"), "BPE dropout is not supported (it makes encode random)");
  }
  prefix_ = optional_string(j, path, "continuing_subword_prefix");
  suffix_ = optional_string(j, path, "end_of_word_suffix");
  fuse_unk_ = json_bool_or(j, path, "fuse_unk", false);
  byte_fallback_ = json_bool_or(j, path, "byte_fallback", false);
  ignore_merges_ = json_bool_or(j, path, "ignore_merges", false);

  const std::string vocab_path = json_path(path, "vocab");
  const Json& vocab = json_required(j, path, "vocab");
  if (!vocab.is_object()) json_fail(vocab_path, "expected an object of token -> id");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  // Ids index tables (id -> token, id -> bytes), so they must be about dense: a real vocabulary
  // numbers its entries 0 .. n-1, and a tiny file must not make the loader allocate gigabytes
  // for one id of 2^30 (found by fuzz_tokenizer's 1M-run campaign).
  const int64_t id_bound = 2 * static_cast<int64_t>(vocab.size()) + 4096;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > INT32_MAX) {
      json_fail(json_path(vocab_path, it.key()), "expected a non-negative 32-bit integer id");
    }
    const int64_t id = it.value().get<int64_t>();
    if (id >= id_bound)
      json_fail(json_path(vocab_path, it.key()),
                fmt::format("id {} is far beyond the vocabulary's {} entries (ids must number "
                            "the entries from 0, with at most a few gaps)",
                            id, vocab.size()));
    vocab_[it.key()] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
  }
  vocab_r_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) vocab_r_[id] = &token;

  if (const Json* unk = json_optional(j, "unk_token")) {
    const std::string unk_path = json_path(path, "unk_token");
    if (!unk->is_string()) json_fail(unk_path, "expected a string");
    auto id = token_to_id(unk->get<std::string>());
    if (!id) json_fail(unk_path, "'" + unk->get<std::string>() + "' is not in model.vocab");
    unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = token_to_id(fmt::format("<0x{:02X}>", b)).value_or(-1);
  }

  const std::string merges_path = json_path(path, "merges");
  const Json& merges = json_array(j, path, "merges");
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    const std::string p = json_path(merges_path, i);
    // Two spellings exist: "a b" (older files) and ["a", "b"] (newer, allows spaces in tokens).
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos) json_fail(p, "expected \"a b\", found '" + s + "'");
      add_merge(s.substr(0, space), s.substr(space + 1), static_cast<uint32_t>(i), p);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      add_merge(m[0].get<std::string>(), m[1].get<std::string>(), static_cast<uint32_t>(i), p);
    } else {
      json_fail(p, "expected a string \"a b\" or a pair [\"a\", \"b\"]");
    }
  }
}

void BpeModel::add_merge(const std::string& a, const std::string& b, uint32_t rank,
                         const std::string& path) {
  const auto a_id = token_to_id(a);
  const auto b_id = token_to_id(b);
  if (!a_id) json_fail(path, "'" + a + "' is not in model.vocab");
  if (!b_id) json_fail(path, "'" + b + "' is not in model.vocab");
  // The right part carries the continuing-subword prefix, which the merged token has only once.
  const size_t skip = prefix_ && b.size() >= prefix_->size() ? prefix_->size() : 0;
  const std::string merged = a + b.substr(skip);
  const auto new_id = token_to_id(merged);
  if (!new_id) json_fail(path, "the merged token '" + merged + "' is not in model.vocab");
  // As in HF, a repeated pair keeps its last rank.
  merges_[pair_key(*a_id, *b_id)] = Merge{rank, *new_id};
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit()) return nullptr;
  return vocab_r_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // Llama-3: a word that is itself a vocab entry is one token, whatever the merges say.
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  CacheShard& shard = cache_[std::hash<std::string_view>{}(word) % kCacheShards];
  if (cacheable) {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(word);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(shard.mu);
    // A full shard starts over rather than tracking recency: cheap, and hot words come back.
    if (shard.map.size() >= kCacheShardCapacity) shard.map.clear();
    shard.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // A doubly linked list of symbols over a vector; merged-away symbols are marked dead.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, true});
  };

  // One symbol per character (with the subword prefix/suffix), unknown characters handled the
  // way HF does: byte fallback first, then unk (fused or not), else dropped.
  int32_t pending_unk = -1;  // an unknown-character run not yet emitted
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    const uint32_t len = decode_utf8(word, i).len;
    piece.clear();
    if (i > 0 && prefix_) piece += *prefix_;
    piece.append(word.substr(i, len));
    if (i + len == word.size() && suffix_) piece += *suffix_;
    i += len;
    if (auto id = token_to_id(piece)) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : piece) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : piece) add(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

  // Merge the lowest-ranked adjacent pair first (leftmost on ties) until none applies, with a
  // priority queue of candidate pairs: O(n log n) even for very long words.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;  // std::priority_queue is a max-heap
    }
  };
  std::priority_queue<Candidate> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) push_pair(pos);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    // Skip stale entries: the pair at this position changed since the entry was queued.
    Symbol& right = symbols[left.next];
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;

    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

}  // namespace tandem::tok
