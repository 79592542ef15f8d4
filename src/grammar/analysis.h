// Properties of a parsed grammar that compilation relies on: which rules can match the empty
// string (nullable), which can match anything at all (productive), and the left-recursion check
// that guarantees the matcher's call expansion terminates.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/ir.h"

namespace tandem::grammar::ir {

struct Analysis {
  std::vector<uint8_t> nullable;    // [rules] the rule matches ""
  std::vector<uint8_t> productive;  // [rules] the rule matches at least one string
  bool expr_nullable(const Grammar& g, int32_t e) const;
  bool expr_productive(const Grammar& g, int32_t e) const;
};

Analysis analyze(const Grammar& g);

// Throws GrammarError naming the cycle if some rule can reach itself without consuming a byte
// (directly, through other rules, or behind nullable prefixes), and if root matches nothing.
void check_grammar(const Grammar& g, const Analysis& a);

}  // namespace tandem::grammar::ir
