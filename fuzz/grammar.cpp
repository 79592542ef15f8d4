// Fuzzes the grammar engine end to end: the input is EBNF text, then a NUL byte, then bytes that
// pick tokens. compile() either succeeds or throws GrammarError; a matcher then follows tokens
// chosen by the bytes, and at every step each vocabulary token must be in fill_mask exactly when
// accept_token takes it, and rollback must restore the mask. Without a NUL the tokens are
// picked from the mask itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace {

using tandem::grammar::TokenVocab;

// All single bytes, pieces that cross JSON and UTF-8 boundaries, an empty token and special
// tokens (one of them spelled by the seeds' literals).
std::shared_ptr<const TokenVocab> vocab() {
  static const auto v = [] {
    auto t = std::make_shared<TokenVocab>();
    for (int b = 0; b < 256; ++b) t->bytes.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"ab",   "\"",    "\",",  "\":",   "{\"",      "[1",
                          "12",   " \"",   "\xC3", "\xA9x", "\xC3\xA9", "\xE4\xB8\xAD\xE6",
                          "true", "null,", "  ",   "\n  ",  "\\u00",    "aaaa",
                          "0.5",  "e+1"}) {
      t->bytes.emplace_back(s);
    }
    t->special.assign(t->bytes.size(), 0);
    t->bytes.emplace_back("");
    t->special.push_back(0);
    for (const char* s : {"<tool_call>", "<|end|>"})
      t->bytes.emplace_back(s), t->special.push_back(1);
    return t;
  }();
  return v;
}

bool in_mask(const std::vector<uint32_t>& bits, int32_t id) {
  return (bits[id >> 5] >> (id & 31)) & 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view ebnf = in.substr(0, nul);
  const std::string_view picks =
      nul == std::string_view::npos ? std::string_view{} : in.substr(nul + 1);
  std::shared_ptr<const tandem::grammar::CompiledGrammar> g;
  try {
    g = tandem::grammar::compile(ebnf, vocab());
  } catch (const tandem::grammar::GrammarError&) {
    return 0;
  }
  tandem::grammar::Matcher m(g);
  const int32_t v = m.vocab_size();
  std::vector<uint32_t> bits((v + 31) / 32), again(bits.size());
  for (size_t step = 0; step < 24; ++step) {
    m.fill_mask(bits.data());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < v; ++id) {
      const bool ok = m.accept_token(id);
      if (ok) m.rollback(1), allowed.push_back(id);
      if (ok != in_mask(bits, id)) std::abort();
    }
    m.fill_mask(again.data());
    if (again != bits) std::abort();
    if (allowed.empty()) break;
    const uint8_t pick =
        step < picks.size() ? static_cast<uint8_t>(picks[step]) : static_cast<uint8_t>(step * 37);
    if (!m.accept_token(allowed[pick % allowed.size()])) std::abort();
    if (pick % 11 == 0) m.rollback(1);
  }
  (void)m.can_terminate();
  (void)m.is_terminated();
  return 0;
}
