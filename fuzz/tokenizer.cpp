// Fuzzes tokenizer.json loading: any text either loads or throws tandem::Error naming the field.
// A tokenizer that loads must then encode and decode without faults, so the fuzzed vocabulary,
// merges, added tokens, normalizer, pre-tokenizer regexes and decoder are all exercised.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

// Text that reaches the usual pre-tokenizer branches: words, digits, punctuation, whitespace
// runs, non-ASCII, invalid UTF-8 and a chat special token.
const char kSample[] =
    "Hello, world! It's 2024-06-01.\n\n  Tabs\tand   spaces; caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd "
    "\xf0\x9f\x98\x80 \xff\xfe <|im_start|>user<|im_end|> <s></s>";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tok =
        tandem::Tokenizer::from_json(std::string(reinterpret_cast<const char*>(data), size));
    std::vector<int32_t> ids = tok.encode(kSample, /*add_special_tokens=*/true);
    (void)tok.decode(ids);
    (void)tok.decode(ids, /*skip_special_tokens=*/true);
    // Ids around and beyond the vocabulary, negative ones included, as clients may send.
    const int32_t n = tok.vocab_size();
    for (int32_t id : {-1, 0, 1, n - 1, n, n + 1}) {
      (void)tok.token_bytes(id);
      (void)tok.id_to_token(id);
      (void)tok.is_special(id);
    }
    ids.insert(ids.end(), {-5, n, n + 100});
    (void)tok.decode(ids);
  } catch (const tandem::Error&) {
  }
  return 0;
}
