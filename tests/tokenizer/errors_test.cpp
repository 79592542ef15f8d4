// A malformed tokenizer.json gives a tandem::Error that names the field (and the file).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace tandem::test {
namespace {

void expect_json_error(const json& j, const std::vector<std::string>& parts) {
  expect_error([&] { load(j); }, parts);
}

json valid() {
  return tiny_bpe({"a", "b", "ab"}, {"a b"});
}

TEST(TokenizerErrors, NotJson) {
  expect_error([] { Tokenizer::from_json("{\"model\": "); }, {"not valid JSON"});
}

// A file nested 100,000 deep is refused while parsing (reading it later would recurse and
// overflow the stack); 128 levels, the root object included, is the limit.
// A number beyond double's range escaped as nlohmann's out_of_range, as it did from request
// bodies (found there by fuzz/request.cpp).
TEST(TokenizerErrors, NumberOutOfRange) {
  expect_error([] { Tokenizer::from_json(R"({"version": 1e400})"); }, {"not valid JSON"});
}

TEST(TokenizerErrors, NestingIsBoundedWhileParsing) {
  const auto deep = [](int levels) {
    return "{\"normalizer\": " + std::string(static_cast<size_t>(levels), '[') +
           std::string(static_cast<size_t>(levels), ']') + "}";
  };
  expect_error([&] { Tokenizer::from_json(deep(100000)); }, {"nested deeper than 128 levels"});
  expect_error([&] { Tokenizer::from_json(deep(128)); }, {"nested deeper than 128 levels"});
  // At the limit the parse succeeds and the file is judged on its content instead.
  expect_error([&] { Tokenizer::from_json(deep(127)); }, {"'normalizer'", "expected an object"});
}

TEST(TokenizerErrors, MissingModel) {
  expect_json_error(json::object(), {"'model'", "missing"});
}

TEST(TokenizerErrors, BadMergeEntry) {
  json j = valid();
  j["model"]["merges"].push_back(5);
  expect_json_error(j, {"'model.merges[1]'", "expected a string"});
}

TEST(TokenizerErrors, MergeTokenNotInVocab) {
  json j = valid();
  j["model"]["merges"] = {"a z"};
  expect_json_error(j, {"'model.merges[0]'", "'z' is not in model.vocab"});
}

TEST(TokenizerErrors, BadVocabId) {
  json j = valid();
  j["model"]["vocab"]["c"] = "three";
  expect_json_error(j, {"'model.vocab.c'", "integer"});
}

// One id of 2^30 in a tiny file made the loader allocate its id tables for 2^30 entries (8.9 GB:
// an out-of-memory found by fuzz_tokenizer's 1M-run campaign). Ids must number the entries.
TEST(TokenizerErrors, SparseVocabIdIsRefusedBeforeAllocating) {
  json j = valid();
  j["model"]["vocab"]["c"] = 1 << 30;
  expect_json_error(j, {"'model.vocab.c'", "far beyond the vocabulary"});
  j["model"]["vocab"]["c"] = 4000;  // a few gaps are fine
  EXPECT_NO_THROW(Tokenizer::from_json(j.dump()));
}

TEST(TokenizerErrors, UnsupportedModel) {
  json j = valid();
  j["model"]["type"] = "WordPiece";
  expect_json_error(j, {"'model.type'", "WordPiece"});
}

TEST(TokenizerErrors, DropoutRefused) {
  json j = valid();
  j["model"]["dropout"] = 0.1;
  expect_json_error(j, {"'model.dropout'"});
}

TEST(TokenizerErrors, UnknownPreTokenizerInSequence) {
  json j = valid();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Digits"}}, {{"type", "Moses"}}}}};
  expect_json_error(j, {"'pre_tokenizer.pretokenizers[1].type'", "Moses"});
}

TEST(TokenizerErrors, BadRegex) {
  json j = valid();
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(unclosed"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  expect_json_error(j, {"'pre_tokenizer.pattern.Regex'", "(unclosed"});
}

TEST(TokenizerErrors, BadSplitBehavior) {
  json j = valid();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Dropped"}};
  expect_json_error(j, {"'pre_tokenizer.behavior'", "Dropped"});
}

TEST(TokenizerErrors, AddedTokenWithoutId) {
  json j = valid();
  j["added_tokens"] = {{{"content", "<s>"}, {"special", true}}};
  expect_json_error(j, {"'added_tokens[0].id'", "missing"});
}

TEST(TokenizerErrors, TemplateNamesUnknownSpecialToken) {
  json j = valid();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single",
                          {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"special_tokens", json::object()}};
  expect_json_error(j, {"'post_processor.single[0].SpecialToken.id'", "<bos>"});
}

TEST(TokenizerErrors, UnsupportedDecoder) {
  json j = valid();
  j["decoder"] = {{"type", "Metaspace"}};
  expect_json_error(j, {"'decoder.type'", "Metaspace"});
}

TEST(TokenizerErrors, FromFileNamesTheFile) {
  expect_error([] { Tokenizer::from_file("/nonexistent/tokenizer.json"); },
               {"/nonexistent/tokenizer.json"});
  const std::string path =
      (std::filesystem::temp_directory_path() / "tandem_bad_tokenizer.json").string();
  json j = valid();
  j["model"]["merges"] = {{"a"}};
  std::ofstream(path) << j.dump();
  expect_error([&] { Tokenizer::from_file(path); }, {path, "'model.merges[0]'"});
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::test
