// A plain Earley recognizer over ir::Grammar, byte by byte: the reference the compiled automata
// and token masks are tested against. It shares nothing with the compiler but the IR: classes
// are matched by decoding UTF-8 (not by the byte-range split), repeats by recursive helper
// rules. Slow and simple on purpose; tests only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ir.h"

namespace tandem::grammar {

class EarleyRecognizer {
 public:
  explicit EarleyRecognizer(const ir::Grammar& g);

  // Some sentence of the grammar starts with `bytes` (a cut inside a UTF-8 sequence counts if
  // some allowed code point starts with those bytes).
  bool is_prefix(std::string_view bytes) const;
  // `bytes` is a sentence of the grammar.
  bool is_sentence(std::string_view bytes) const;

  // Incremental use: a chart over input[0..n) whose sets never depend on later bytes, so
  // truncate() is exact. extend() then viable()/complete(), truncate() back.
  struct Item {
    int32_t prod, dot, origin;
    bool operator==(const Item&) const = default;
  };
  // Items of one set, deduplicated by an open-addressing table of packed items (the chart is
  // rebuilt millions of times by the mask tests; node-based hash maps made that malloc-bound).
  struct Set {
    std::vector<Item> items;
    std::vector<uint64_t> table;  // packed item + 1; 0 is empty
    bool insert(const Item& it);
    bool contains(const Item& it) const;
  };
  struct Chart {
    std::string input;
    std::vector<Set> sets;  // [input.size() + 1]
  };
  Chart start() const;
  void extend(Chart& c, std::string_view bytes) const;
  void truncate(Chart& c, size_t n) const;
  bool viable(const Chart& c) const;
  bool complete(const Chart& c) const;

 private:
  enum Kind : uint8_t { kByte, kClass, kNonterm };
  struct Sym {
    Kind kind;
    int32_t v;
  };

  std::vector<Sym> lower(const ir::Grammar& g, int32_t e);
  int32_t new_nonterm();
  void add_prod(int32_t lhs, std::vector<Sym> rhs);
  void reduce();
  bool in_class(int32_t c, uint32_t lo, uint32_t hi) const;
  void add(Chart& c, size_t at, Item it) const;
  void scan_class(Chart& c, size_t i, const Item& it, size_t min_end) const;
  void process(Chart& c, size_t i) const;

  std::vector<std::vector<Sym>> rhs_;                // [prods]
  std::vector<int32_t> lhs_;                         // [prods]
  std::vector<std::vector<int32_t>> prods_of_;       // [nonterms] live productions
  std::vector<uint8_t> nullable_;                    // [nonterms]
  std::vector<std::vector<ir::CodeRange>> classes_;  // [classes] allowed code points
  int32_t start_prod_ = -1;                          // S' -> root
};

}  // namespace tandem::grammar
