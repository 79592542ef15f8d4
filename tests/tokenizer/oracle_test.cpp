// Checks Tandem's tokenizer against Hugging Face tokenizers itself: for every fixture tokenizer
// and every corpus text, encode must give exactly the ids HF gave and decode exactly HF's text.
// The expected files come from scripts/fetch_tokenizer_fixtures.sh DEST; point
// TANDEM_TOKENIZER_FIXTURES at DEST (default: BUILD_DIR/tokenizer-fixtures). Missing fixtures
// fail the test unless TANDEM_ALLOW_MISSING_FIXTURES=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixtures_dir() {
  const char* env = std::getenv("TANDEM_TOKENIZER_FIXTURES");
  if (env != nullptr && *env != '\0') return env;
  return fs::path(TANDEM_BINARY_DIR) / "tokenizer-fixtures";
}

bool allow_missing() {
  const char* env = std::getenv("TANDEM_ALLOW_MISSING_FIXTURES");
  return env != nullptr && std::string(env) == "1";
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

std::string show_ids(const tandem::Tokenizer& tok, const std::vector<int32_t>& ids, size_t at) {
  std::string out;
  const size_t from = at > 3 ? at - 3 : 0;
  for (size_t i = from; i < ids.size() && i < at + 4; ++i) {
    out += (i == at ? " >" : " ") + std::to_string(ids[i]) + "'" + tok.id_to_token(ids[i]) + "'";
  }
  return out;
}

// Where two id lists first differ, with the tokens around it, so a failure says what went wrong.
std::string describe_mismatch(const tandem::Tokenizer& tok, const std::vector<int32_t>& got,
                              const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "first difference at index " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " ids, HF " + std::to_string(want.size()) + ")\n  got:" + show_ids(tok, got, i) +
         "\n  HF: " + show_ids(tok, want, i);
}

void check_against_oracle(const std::string& name) {
  const fs::path dir = fixtures_dir();
  const fs::path expected_path = dir / ("expected_" + name + ".json");
  if (!fs::exists(expected_path)) {
    const std::string msg = "no oracle fixtures at " + expected_path.string() +
                            "; run scripts/fetch_tokenizer_fixtures.sh " + dir.string() +
                            " (or set TANDEM_TOKENIZER_FIXTURES)";
    if (allow_missing()) GTEST_SKIP() << msg;
    FAIL() << msg;
  }
  const json expected = read_json(expected_path);
  const std::string tokenizer_file =
      (dir / expected.at("tokenizer_file").get<std::string>()).string();
  std::optional<tandem::Tokenizer> loaded;
  try {
    loaded = tandem::Tokenizer::from_file(tokenizer_file);
  } catch (const std::exception& e) {
    FAIL() << "loading " << tokenizer_file << ": " << e.what();
  }
  const tandem::Tokenizer& tok = *loaded;
  EXPECT_EQ(tok.vocab_size(), expected.at("vocab_size").get<int32_t>());

  size_t passed = 0;
  const json& cases = expected.at("cases");
  // An empty or truncated fixture would otherwise pass with nothing checked. Every fixture
  // carries the whole corpus (scripts/tokenizer_oracle/corpus.js: 268 cases with tokenizers
  // 0.23.2); a fixture with fewer than kMinCases was cut short.
  constexpr size_t kMinCases = 250;
  ASSERT_TRUE(cases.is_array()) << expected_path << ": 'cases' is not an array";
  ASSERT_GE(cases.size(), kMinCases) << expected_path << " has only " << cases.size()
                                     << " cases; regenerate it with "
                                        "scripts/fetch_tokenizer_fixtures.sh "
                                     << dir.string();
  for (const json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const bool add_special = c.at("add_special_tokens").get<bool>();
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    const std::string label =
        name + "/" + c.at("name").get<std::string>() + (add_special ? " (add_special_tokens)" : "");
    bool ok = true;

    std::vector<int32_t> got;
    try {
      got = tok.encode(text, add_special);
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << ": encode threw " << e.what();
      continue;
    }
    if (got != want) {
      ok = false;
      ADD_FAILURE() << label << ": encode differs from HF, " << describe_mismatch(tok, got, want);
    }
    const std::string decoded = tok.decode(want, false);
    if (decoded != c.at("decoded").get<std::string>()) {
      ok = false;
      ADD_FAILURE() << label << ": decode differs from HF\n  got: " << decoded
                    << "\n  HF:  " << c.at("decoded").get<std::string>();
    }
    if (tok.decode(want, true) != c.at("decoded_skip_special").get<std::string>()) {
      ok = false;
      ADD_FAILURE() << label << ": decode(skip_special_tokens) differs from HF";
    }
    std::string concatenated;
    for (int32_t id : want) concatenated += tok.token_bytes(id);
    if (tandem::tok::to_valid_utf8(concatenated) != decoded) {
      ok = false;
      ADD_FAILURE() << label << ": token_bytes concatenation differs from decode";
    }
    passed += ok;
  }
  std::cout << "[ oracle   ] " << name << ": " << passed << "/" << cases.size() << " cases match "
            << expected.at("oracle").get<std::string>() << "\n";
  EXPECT_EQ(passed, cases.size());
  EXPECT_GT(passed, 0u);
}

TEST(TokenizerOracle, Manifest) {
  const fs::path manifest = fixtures_dir() / "manifest.json";
  if (!fs::exists(manifest)) {
    if (allow_missing()) GTEST_SKIP() << "no " << manifest;
    FAIL() << "no " << manifest << "; run scripts/fetch_tokenizer_fixtures.sh " << fixtures_dir();
  }
  const auto names = read_json(manifest).at("tokenizers").get<std::vector<std::string>>();
  for (const char* required :
       {"gpt2", "qwen3", "llama3", "deepseek_v3", "llama3_bos", "qwen3_glm_template", "gpt2_splits",
        "gpt2_contiguous", "gpt2_added", "byte_level"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end())
        << "manifest lacks " << required;
  }
}

TEST(TokenizerOracle, Gpt2) {
  check_against_oracle("gpt2");
}
TEST(TokenizerOracle, Qwen3) {
  check_against_oracle("qwen3");
}
TEST(TokenizerOracle, Llama3) {
  check_against_oracle("llama3");
}
TEST(TokenizerOracle, DeepSeekV3) {
  check_against_oracle("deepseek_v3");
}
// Derived files (scripts/tokenizer_oracle/make_variants.js) for what the real ones do not use.
TEST(TokenizerOracle, Llama3WithBosTemplate) {
  check_against_oracle("llama3_bos");
}
TEST(TokenizerOracle, Qwen3WithGlmTemplate) {
  check_against_oracle("qwen3_glm_template");
}
TEST(TokenizerOracle, Gpt2SplitBehaviors) {
  check_against_oracle("gpt2_splits");
}
TEST(TokenizerOracle, Gpt2ContiguousAndNormalizers) {
  check_against_oracle("gpt2_contiguous");
}
TEST(TokenizerOracle, Gpt2AddedTokenOptions) {
  check_against_oracle("gpt2_added");
}
// The tokenizer of Tandem's own default model (trained with HF tokenizers, GLM-style specials).
TEST(TokenizerOracle, TandemAustenDefaultModel) {
  if (!fs::exists(fs::path(TANDEM_SOURCE_DIR) / "models/tandem-austen/tokenizer.json")) {
    GTEST_SKIP() << "this checkout has no models/tandem-austen";
  }
  check_against_oracle("tandem_austen");
}
// A byte-level tokenizer written in node from make_byte_level_tokenizer_json's description.
TEST(TokenizerOracle, ByteLevel) {
  check_against_oracle("byte_level");
}

// make_byte_level_tokenizer_json writes exactly that file, so HF reads it as checked above.
TEST(TokenizerOracle, ByteLevelJsonEqualsTheFixture) {
  const fs::path file = fixtures_dir() / "byte_level" / "tokenizer.json";
  if (!fs::exists(file)) {
    if (allow_missing()) GTEST_SKIP() << "no " << file;
    FAIL() << "no " << file << "; run scripts/fetch_tokenizer_fixtures.sh " << fixtures_dir();
  }
  const json fixture = read_json(file);
  std::vector<std::string> specials;
  for (const json& t : fixture.at("added_tokens")) specials.push_back(t.at("content"));
  EXPECT_EQ(json::parse(tandem::make_byte_level_tokenizer_json(specials)), fixture);
}

}  // namespace
