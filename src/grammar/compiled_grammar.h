// What compile() produces (grammar.h): the automaton, which tokens may ever match, and the
// per-node token masks. Immutable once built; matchers share it.
#pragma once

#include <memory>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/token_masks.h"

namespace tandem::grammar {

class CompiledGrammar {
 public:
  Automaton automaton;
  std::shared_ptr<const TokenVocab> vocab;
  std::vector<uint8_t> allowed;  // [V] non-empty bytes, and not a special token outside literals
  MaskTable masks;
  GrammarStats stats;
};

// compile() with the automaton's options spelled out (tests compare inlining on and off).
std::shared_ptr<const CompiledGrammar> compile_with(std::string_view ebnf,
                                                    std::shared_ptr<const TokenVocab> vocab,
                                                    const AutomatonOptions& opt);

}  // namespace tandem::grammar
