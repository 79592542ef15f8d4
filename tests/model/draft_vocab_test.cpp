// The draft's vocabulary (--speculative-token-map): the draft proposes only the map's tokens,
// through an LM head of their rows, and nothing else changes. A map of the whole vocabulary in
// a shuffled order drafts exactly what the full head drafts (the columns map back to the right
// tokens, on the per-step path and on the one-forward draft loop); a small map only ever
// proposes its own tokens, greedy output stays that of plain decoding, with and without a
// constraint; bad map files are refused with the file and the entry named.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "engine_test_util.h"
#include "model/presets.h"
#include "runtime/draft_vocab.h"
#include "table_constraint.h"

namespace tandem::test {
namespace {

std::shared_ptr<const Model> tiny_model(ModelConfig* config) {
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  *config = preset_config("tiny-glm5.2");
  return Model::dummy(*config, lo, 5);
}

EngineOptions spec_options(bool static_batches, std::vector<int32_t> map) {
  EngineOptions o;
  o.static_batches = static_batches;
  o.spec.algorithm = "EAGLE";
  o.spec.num_steps = 3;
  o.spec.num_draft_tokens = 4;
  o.spec.adaptive = false;
  o.spec.token_map = std::move(map);
  return o;
}

TEST(DraftVocab, WholeVocabularyInAnyOrderDraftsTheSame) {
  ModelConfig c;
  const auto model = tiny_model(&c);
  auto reqs = prompts(c, 9, 10, 40, 24, 77);
  std::vector<int32_t> shuffled(static_cast<size_t>(c.vocab_size));
  for (int32_t t = 0; t < c.vocab_size; ++t) shuffled[static_cast<size_t>(t)] = t;
  Rng rng(3);
  for (size_t i = shuffled.size() - 1; i > 0; --i)
    std::swap(shuffled[i], shuffled[rng.next_u64() % (i + 1)]);
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  for (bool stat : {false, true}) {
    SCOPED_TRACE(stat ? "static batches (one-forward draft loop)" : "dynamic");
    DraftLog full, mapped;
    for (DraftLog* log : {&full, &mapped}) {
      EngineOptions o = spec_options(stat, log == &mapped ? shuffled : std::vector<int32_t>{});
      log->attach(o);
      Engine e(model, o);
      const auto got = run_all(e, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, plain[i].tokens) << i;
    }
    ASSERT_FALSE(full.drafts.empty());
    EXPECT_EQ(full.drafts, mapped.drafts);
  }
}

TEST(DraftVocab, SmallMapProposesOnlyItsTokensAndChangesNoOutput) {
  ModelConfig c;
  const auto model = tiny_model(&c);
  auto reqs = prompts(c, 7, 10, 40, 24, 91);
  // A tenth of the vocabulary, with the tokens plain decoding produces at half of its steps in
  // it (so some drafts can be accepted) and the rest outside.
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  std::set<int32_t> in;
  for (const Result& r : plain)
    for (size_t j = 0; j < r.tokens.size(); j += 2) in.insert(r.tokens[j]);
  for (int32_t t = 0; static_cast<int64_t>(in.size()) < c.vocab_size / 10; t += 7) in.insert(t);
  const std::vector<int32_t> map(in.begin(), in.end());
  for (bool stat : {false, true}) {
    SCOPED_TRACE(stat ? "static batches" : "dynamic");
    DraftLog log;
    EngineOptions o = spec_options(stat, map);
    log.attach(o);
    Engine e(model, o);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, plain[i].tokens) << i;
    ASSERT_FALSE(log.drafts.empty());
    for (const auto& [at, drafts] : log.drafts)
      for (int32_t d : drafts) ASSERT_TRUE(in.count(d)) << "draft " << d << " is not in the map";
  }
}

// Constrained requests: the masks over the vocabulary are mapped onto the map's columns; a row
// that allows none of them proposes an allowed token. Output: that of plain constrained greedy.
TEST(DraftVocab, ConstrainedOutputUnchanged) {
  ModelConfig c;
  const auto model = tiny_model(&c);
  auto reqs = prompts(c, 6, 10, 30, 16, 5);
  for (size_t i = 0; i < reqs.size(); ++i)
    reqs[i].constraint = std::make_shared<TableConstraint>(mix(i + 11), 30, 4, 16);
  auto fresh = [&] {
    auto r = reqs;
    for (size_t i = 0; i < r.size(); ++i)
      r[i].constraint = std::make_shared<TableConstraint>(mix(i + 11), 30, 4, 16);
    return r;
  };
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, fresh());
  }
  std::vector<int32_t> map;  // every fifth token: most allowed sets meet it, some may not
  for (int32_t t = 0; t < c.vocab_size; t += 5) map.push_back(t);
  Engine e(model, spec_options(false, map));
  const auto got = run_all(e, fresh());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, plain[i].tokens) << i;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DraftVocab, BadMapFilesAreRefusedNamingTheEntry) {
  auto expect_error = [](const std::string& path, const std::string& part) {
    try {
      read_token_map(path, 100);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error(write_file("map_range.json", "[1, 2, 100]"), "entry 2 (100)");
  expect_error(write_file("map_negative.json", "[-1]"), "entry 0 (-1)");
  expect_error(write_file("map_twice.json", "[4, 5, 4]"), "token 4 appears twice (entry 2)");
  expect_error(write_file("map_object.json", "{\"a\": 1}"), "expected a JSON array");
  expect_error(write_file("map_empty.json", "[]"), "no token ids");
  expect_error(write_file("map_float.json", "[1.5]"), "entry 0 (1.5)");
  expect_error(::testing::TempDir() + "no_such_map.json", "cannot open");
  EXPECT_EQ(read_token_map(write_file("map_ok.json", "[7, 3, 99]"), 100),
            (std::vector<int32_t>{7, 3, 99}));
}

}  // namespace
}  // namespace tandem::test
