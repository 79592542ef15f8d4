// Structured outputs end to end inside the engine, with real grammars on the default model: a
// JSON schema and a regex compiled against its tokenizer, constrained greedy output with MTP
// (S = 1, 3, 5) identical to constrained greedy without it, and every output a sentence (or,
// cut by max_new_tokens, a prefix) of its grammar.
#include <filesystem>

#include "engine_test_util.h"
#include "grammar/grammar.h"
#include "server/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {
namespace {

using server::ConstraintSpec;

struct Grammar {
  std::string name;
  ConstraintSpec spec;
};

std::vector<Grammar> grammars() {
  ConstraintSpec schema;
  schema.kind = ConstraintSpec::Kind::kJsonSchema;
  schema.source = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 30},
      "estate": {"enum": ["Pemberley", "Netherfield", "Longbourn"]},
      "income": {"type": "integer", "minimum": 0, "maximum": 99999},
      "letters": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3}},
    "required": ["name", "estate", "income", "letters"]})";
  schema.param = "json_schema";
  ConstraintSpec regex;
  regex.kind = ConstraintSpec::Kind::kRegex;
  regex.source =
      R"((Yes|No), (Mr|Mrs|Miss) [A-Z][a-z]{2,12}( and (Mr|Mrs|Miss) [A-Z][a-z]{2,12})*\.)";
  regex.param = "regex";
  return {{"json_schema", schema}, {"regex", regex}};
}

class GrammarSpec : public ::testing::TestWithParam<int> {};

TEST_P(GrammarSpec, ConstrainedMtpGreedyEqualsPlain) {
  const int steps = GetParam();
  auto model = load_model("models/tandem-austen");
  const Tokenizer tok = Tokenizer::from_file(source_path("models/tandem-austen/tokenizer.json"));
  server::GrammarCache cache(tok);
  const auto reqs = prompts(model->config(), 4, 20, 60, 60, 300 + steps);
  for (const Grammar& g : grammars()) {
    const server::CompiledConstraint compiled = cache.get(g.spec);
    auto run = [&](bool spec) {
      EngineOptions o;
      o.max_running_requests = 8;
      o.static_batches = true;
      if (spec) {
        o.spec.algorithm = "EAGLE";
        o.spec.num_steps = steps;
        o.spec.num_draft_tokens = steps + 1;
      }
      auto rs = reqs;
      for (auto& r : rs) {
        r.constraint = std::make_shared<server::GrammarConstraint>(compiled);
        r.stop_token_ids = {0};  // <|endoftext|>: allowed once the grammar is complete
      }
      Engine e(model, o);
      auto out = run_all(e, rs);
      if (spec) {
        std::printf("  %s S=%d: accept length %.3f\n", g.name.c_str(), steps,
                    e.metrics().avg_spec_accept_length());
      }
      return out;
    };
    const auto plain = run(false), spec = run(true);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << g.name << " request " << i << " S=" << steps;
      // Replayed through a fresh matcher: every token allowed; a stop means a complete sentence.
      grammar::Matcher m(compiled.grammar);
      std::vector<int32_t> body = plain[i].tokens;
      const bool stopped = !body.empty() && body.back() == 0;
      if (stopped) body.pop_back();
      for (size_t j = 0; j < body.size(); ++j)
        ASSERT_TRUE(m.accept_token(body[j])) << g.name << " request " << i << " token " << j;
      if (stopped) {
        EXPECT_TRUE(m.can_terminate()) << g.name << " request " << i;
      }
      if (i == 0)
        std::printf("  %s: %s\n", g.name.c_str(), tok.decode(plain[i].tokens, true).c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, GrammarSpec, ::testing::Values(1, 3, 5));

}  // namespace
}  // namespace tandem::test
