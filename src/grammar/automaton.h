// The grammar as a recursive transition network over bytes: one epsilon-free NFA per rule whose
// edges either consume a byte range or call another rule (and continue at a return node when
// it ends). Small non-recursive rules are inlined into their callers so that more of a token
// can be decided within one rule (see token_masks.h). A call to a rule that may match "" is
// also an epsilon edge, so a node's acceptance and bytes already account for skipping it.
//
// Shape: nodes are global ids; rule r's nodes are contiguous, rule_start[r] first. Edges in CSR
// form: byte_edges[byte_begin[n] .. byte_begin[n+1]) leave node n, likewise call_edges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ir.h"

namespace tandem::grammar {

struct ByteEdge {
  uint8_t lo, hi;  // inclusive byte range
  int32_t to;      // node
};

struct CallEdge {
  int32_t rule;  // callee
  int32_t ret;   // node of the caller's rule where matching continues once the callee ends
};

struct Automaton {
  int32_t root = -1;                 // rule
  std::vector<int32_t> rule_start;   // [rules] node, -1 for rules not built (unused/inlined)
  std::vector<int32_t> node_rule;    // [nodes]
  std::vector<uint8_t> accept;       // [nodes] the node's rule may end here
  std::vector<int32_t> byte_begin;   // [nodes + 1]
  std::vector<ByteEdge> byte_edges;  // sorted by lo within a node
  std::vector<int32_t> call_begin;   // [nodes + 1]
  std::vector<CallEdge> call_edges;
  std::vector<std::vector<int32_t>> return_nodes;  // [rules] ret of every call edge into it
  std::vector<std::string> rule_names;             // [rules]

  int32_t num_nodes() const { return static_cast<int32_t>(node_rule.size()); }
};

struct AutomatonOptions {
  // Rules off every call cycle whose automaton would have at most this many nodes are copied
  // into their callers instead of called. 0 disables inlining.
  int inline_max_nodes = 48;
  // compile() refuses an automaton with more nodes than this (GrammarError).
  int64_t max_nodes = 200000;
};

// Builds only the rules reachable from root. Every node can reach its rule's end (dead paths,
// e.g. through rules that match nothing, are trimmed).
Automaton build_automaton(const ir::Grammar& g, const AutomatonOptions& opt = {});

}  // namespace tandem::grammar
