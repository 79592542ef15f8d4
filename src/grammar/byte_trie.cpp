#include "grammar/byte_trie.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "grammar/grammar.h"

namespace tandem::grammar {

ByteTrie build_byte_trie(std::vector<std::pair<std::string_view, int32_t>> strings) {
  std::erase_if(strings, [](const auto& s) { return s.first.empty(); });
  std::sort(strings.begin(), strings.end());
  // Sorted strings visit trie positions in preorder: each string adds the nodes past its
  // common prefix with the one before.
  std::vector<int32_t> parent{-1};
  std::vector<uint8_t> byte{0};
  std::vector<int32_t> depth{0};
  std::vector<std::vector<int32_t>> ends(1);
  std::vector<int32_t> path{0};  // path[d]: the node at depth d of the previous string
  std::string_view prev;
  for (const auto& [s, id] : strings) {
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < s.size(); ++d) {
      const int32_t n = static_cast<int32_t>(parent.size());
      parent.push_back(path.back());
      byte.push_back(static_cast<uint8_t>(s[d]));
      depth.push_back(static_cast<int32_t>(d + 1));
      ends.emplace_back();
      path.push_back(n);
    }
    ends[path.back()].push_back(id);
    prev = s;
  }
  const int32_t n = static_cast<int32_t>(parent.size());
  ByteTrie t;
  t.child_begin.assign(n + 1, 0);
  for (int32_t v = 1; v < n; ++v) ++t.child_begin[parent[v] + 1];
  for (int32_t v = 0; v < n; ++v) t.child_begin[v + 1] += t.child_begin[v];
  t.child_byte.resize(n > 0 ? n - 1 : 0);
  t.child_node.resize(t.child_byte.size());
  std::vector<int32_t> fill(t.child_begin.begin(), t.child_begin.end() - 1);
  for (int32_t v = 1; v < n; ++v) {  // preorder: siblings arrive in byte order
    const int32_t slot = fill[parent[v]]++;
    t.child_byte[slot] = byte[v];
    t.child_node[slot] = v;
  }
  t.id_begin.assign(n + 1, 0);
  for (int32_t v = 0; v < n; ++v) {
    t.id_begin[v + 1] = t.id_begin[v] + static_cast<int32_t>(ends[v].size());
    t.ids.insert(t.ids.end(), ends[v].begin(), ends[v].end());
  }
  // A subtree ends at the next node that is no deeper than its root.
  t.subtree_end.assign(n, n);
  std::vector<int32_t> open;
  for (int32_t v = 0; v < n; ++v) {
    while (!open.empty() && depth[open.back()] >= depth[v])
      t.subtree_end[open.back()] = v, open.pop_back();
    open.push_back(v);
  }
  t.parent = std::move(parent);
  t.byte = std::move(byte);
  t.depth = std::move(depth);
  return t;
}

std::shared_ptr<const ByteTrie> vocab_trie(const std::shared_ptr<const TokenVocab>& vocab) {
  struct Entry {
    std::weak_ptr<const TokenVocab> vocab;
    std::shared_ptr<const ByteTrie> trie;
  };
  static std::mutex mu;
  static std::map<const TokenVocab*, Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(cache, [](const auto& kv) { return kv.second.vocab.expired(); });
  auto it = cache.find(vocab.get());
  if (it != cache.end() && it->second.vocab.lock() == vocab) return it->second.trie;
  std::vector<std::pair<std::string_view, int32_t>> strings;
  strings.reserve(vocab->bytes.size());
  for (int32_t id = 0; id < vocab->size(); ++id) strings.emplace_back(vocab->bytes[id], id);
  auto trie = std::make_shared<const ByteTrie>(build_byte_trie(std::move(strings)));
  cache[vocab.get()] = {vocab, trie};
  return trie;
}

}  // namespace tandem::grammar
