// Token masks precomputed per automaton node. For every node that can be the top of a stack,
// each token is classified by a walk over the vocabulary trie confined to the node's rule
// (calls into other rules are followed, since they are known; the rule's own end is not, since
// the caller is not):
//   accepted           all its bytes are consumed inside the rule (it may end exactly there);
//   context-dependent  some path consumes at least one byte, reaches the rule's end and has
//                      bytes left: the caller decides, at run time, from the rest;
//   rejected           neither.
// Reaching the end before any byte is not context-dependent: the matcher's state already holds
// the caller's stack for that case (states are closed under popping rules that may end), and
// that stack's own masks cover the token. Context-dependent bytes that no caller anywhere could
// take (the follow of the rule over all its call sites) are rejected at compile time.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/byte_trie.h"

namespace tandem::grammar {

// A set of token ids in the smallest of three forms.
struct TokenSet {
  enum Kind : uint8_t { kList, kComplement, kBitset };
  Kind kind = kList;
  std::vector<uint32_t> data;  // sorted ids (kList: members, kComplement: non-members) or words

  // members: unsorted, no duplicates; is_member[id] != 0 for exactly those.
  static TokenSet from_members(std::vector<int32_t>& members,
                               const std::vector<uint8_t>& is_member);
  // bits |= this; scratch: [(vocab_size + 31) / 32] words of workspace.
  void or_into(uint32_t* bits, int32_t vocab_size, uint32_t* scratch) const;
  bool empty() const { return kind == kList && data.empty(); }
};

struct NodeMasks {
  TokenSet accepted;
  // Context-dependent tokens: ids are token ids, strings are the bytes left once the rule has
  // ended (one entry per place in the token where it can end).
  ByteTrie context;
  int64_t num_accepted = 0, num_context = 0;
};

struct MaskTable {
  std::vector<int32_t> node_slot;  // [nodes] index into masks; -1 if never a stack top
  std::vector<NodeMasks> masks;
};

// allowed[id]: the token may match grammar text at all (non-empty bytes; a special token only
// if its text occurs in one of the grammar's literals).
MaskTable build_masks(const Automaton& a, const ByteTrie& vocab_trie,
                      const std::vector<std::string>& token_bytes,
                      const std::vector<uint8_t>& allowed);

}  // namespace tandem::grammar
