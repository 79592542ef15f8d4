// compile() and stats(): EBNF -> IR -> automaton -> per-node token masks.
#include <chrono>

#include "grammar/byte_trie.h"
#include "grammar/compiled_grammar.h"
#include "grammar/ir.h"

namespace tandem::grammar {

std::shared_ptr<const CompiledGrammar> compile(std::string_view ebnf,
                                               std::shared_ptr<const TokenVocab> vocab,
                                               int64_t max_nodes) {
  AutomatonOptions opt;
  opt.max_nodes = max_nodes;
  return compile_with(ebnf, std::move(vocab), opt);
}

std::shared_ptr<const CompiledGrammar> compile_with(std::string_view ebnf,
                                                    std::shared_ptr<const TokenVocab> vocab,
                                                    const AutomatonOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!vocab) throw GrammarError("compile: no vocabulary");
  if (vocab->special.size() != vocab->bytes.size()) {
    throw GrammarError("compile: vocabulary has " + std::to_string(vocab->bytes.size()) +
                       " token byte strings but " + std::to_string(vocab->special.size()) +
                       " special flags");
  }
  const ir::Grammar g = ir::parse_ebnf(ebnf);
  auto out = std::make_shared<CompiledGrammar>();
  out->automaton = build_automaton(g, opt);
  // Checked before the masks, which cost a vocabulary walk per node.
  if (out->automaton.num_nodes() > opt.max_nodes)
    throw GrammarError("grammar too large: " + std::to_string(out->automaton.num_nodes()) +
                       " automaton nodes, at most " + std::to_string(opt.max_nodes) +
                       " (bounded repetitions such as maxLength or {n,m} expand into a node per "
                       "repeat)");
  out->vocab = vocab;
  // A special token matches only as text the grammar spells out in a literal, e.g. a tool-call
  // grammar's "<tool_call>": free text such as a JSON string must never produce one.
  const std::vector<std::string> lits = ir::literals(g);
  out->allowed.assign(vocab->bytes.size(), 0);
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& b = vocab->bytes[id];
    if (b.empty()) continue;
    if (!vocab->special[id]) {
      out->allowed[id] = 1;
      continue;
    }
    for (const std::string& lit : lits) {
      if (lit.find(b) != std::string::npos) {
        out->allowed[id] = 1;
        break;
      }
    }
  }
  out->masks = build_masks(out->automaton, *vocab_trie(vocab), vocab->bytes, out->allowed);
  out->stats.rules = static_cast<int64_t>(g.rules.size());
  out->stats.nodes = out->automaton.num_nodes();
  out->stats.mask_nodes = static_cast<int64_t>(out->masks.masks.size());
  for (const NodeMasks& m : out->masks.masks) out->stats.context_tokens += m.num_context;
  out->stats.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

GrammarStats stats(const CompiledGrammar& g) {
  return g.stats;
}

}  // namespace tandem::grammar
