// A trie over byte strings, each string carrying an id: the tokenizer's vocabulary (ids are
// token ids), and per automaton node the suffixes of context-dependent tokens. Nodes are
// numbered in preorder with children in byte order, so a node's subtree is the id range
// [n, subtree_end[n]) and its strings' ids are ids[id_begin[n] .. id_begin[subtree_end[n]]);
// a depth-first walk is a forward scan that jumps to subtree_end to prune.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::grammar {

struct TokenVocab;

struct ByteTrie {
  std::vector<int32_t> child_begin;  // [nodes + 1] into child_byte / child_node
  std::vector<uint8_t> child_byte;
  std::vector<int32_t> child_node;
  std::vector<int32_t> id_begin;  // [nodes + 1] into ids: the strings ending at the node
  std::vector<int32_t> ids;
  std::vector<int32_t> subtree_end;  // [nodes]
  std::vector<int32_t> parent;       // [nodes] -1 for the root
  std::vector<uint8_t> byte;         // [nodes] the byte on the edge from the parent
  std::vector<int32_t> depth;        // [nodes] string length at the node

  int32_t num_nodes() const { return static_cast<int32_t>(subtree_end.size()); }
};

// Node 0 is the empty string; empty strings themselves are left out.
ByteTrie build_byte_trie(std::vector<std::pair<std::string_view, int32_t>> strings);

// The trie of `vocab`'s non-empty token bytes, built once per vocabulary and shared while the
// vocabulary lives (grammars compiled against one tokenizer reuse it).
std::shared_ptr<const ByteTrie> vocab_trie(const std::shared_ptr<const TokenVocab>& vocab);

}  // namespace tandem::grammar
