// SGLang's native /generate request and its meta_info.
#include <gtest/gtest.h>

#include "protocol_test_util.h"

#include "server/sglang_protocol.h"

namespace tandem::server {
namespace {

TEST(GenerateRequest, Shapes) {
  GenerateRequest r = parse_generate_request(Json{{"text", "hi"}});
  EXPECT_EQ(r.texts.size(), 1u);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.params.max_new_tokens, 128);  // SGLang's default
  r = parse_generate_request(Json{{"input_ids", {{1, 2}, {3}}}, {"stream", true}});
  EXPECT_EQ(r.input_ids.size(), 2u);
  EXPECT_TRUE(r.batch);
  EXPECT_TRUE(r.stream);
  r = parse_generate_request(Json{{"input_ids", {1, 2}},
                                  {"sampling_params",
                                   {{"max_new_tokens", 8},
                                    {"temperature", 0},
                                    {"stop", {"a"}},
                                    {"stop_token_ids", {7}},
                                    {"no_stop_trim", true},
                                    {"sampling_seed", 3},
                                    {"n", 2}}},
                                  {"rid", "req-1"}});
  EXPECT_EQ(r.params.max_new_tokens, 8);
  EXPECT_FLOAT_EQ(r.params.temperature, 0);
  EXPECT_TRUE(r.params.no_stop_trim);
  EXPECT_EQ(r.params.seed, 3);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_TRUE(r.batch);  // n > 1 answers with a list
  EXPECT_EQ(r.rid, "req-1");
}

TEST(GenerateRequest, Errors) {
  expect_400([] { parse_generate_request(Json::object()); }, "text");
  expect_400([] { parse_generate_request(Json{{"text", "a"}, {"input_ids", {1}}}); }, "input_ids");
  expect_400([] { parse_generate_request(Json{{"text", 5}}); }, "text");
  expect_400([] { parse_generate_request(Json{{"input_ids", {1.5}}}); }, "input_ids");
  expect_400(
      [] {
        parse_generate_request(Json{{"text", "a"}, {"sampling_params", {{"temperature", -1}}}});
      },
      "sampling_params.temperature");
  expect_400(
      [] {
        parse_generate_request(Json{{"text", "a"}, {"sampling_params", {{"max_new_tokens", 0}}}});
      },
      "sampling_params.max_new_tokens");
  expect_400(
      [] {
        parse_generate_request(Json{{"text", "a"}, {"sampling_params", 3}});
      },
      "sampling_params");
  expect_400(
      [] {
        parse_generate_request(Json{{"text", "a"}, {"return_logprob", true}});
      },
      "return_logprob");
}

TEST(MetaInfo, FinishReasonsAndSpec) {
  ChoiceResult c;
  c.finished = true;
  c.finish_reason = FinishReason::kLength;
  c.completion_tokens = 9;
  c.prompt_tokens = 4;
  c.spec_verify_steps = 4;
  c.spec_accepted_drafts = 6;
  c.spec_draft_tokens = 12;  // e.g. rounds of depth 3, 3, 4 and 2 (adaptive)
  EXPECT_EQ(native_finish_reason(c), (Json{{"type", "length"}, {"length", 9}}));
  c.finish_reason = FinishReason::kStop;
  c.matched_token = 151329;
  EXPECT_EQ(native_finish_reason(c), (Json{{"type", "stop"}, {"matched", 151329}}));
  c.matched_string = "\n\n";
  EXPECT_EQ(native_finish_reason(c)["matched"], "\n\n");
  const Json m = meta_info_json(c, "rid", SpecInfo{true, 3}, false);
  EXPECT_EQ(m["spec_verify_ct"], 4);
  EXPECT_DOUBLE_EQ(m["spec_accept_length"].get<double>(), 2.5);  // (6 + 4) / 4
  EXPECT_DOUBLE_EQ(m["spec_accept_rate"].get<double>(), 0.5);    // 6 / 12
  EXPECT_EQ(m["spec_draft_token_num"], 12);
  EXPECT_EQ(m["prompt_tokens"], 4);
  EXPECT_FALSE(meta_info_json(c, "rid", SpecInfo{}, false).contains("spec_verify_ct"));
  ChoiceResult running;
  EXPECT_TRUE(native_finish_reason(running).is_null());
}

// The incrementally serialized stream event is byte for byte the one built from JSON values, as
// the text and ids grow token by token (escapes, multi-byte characters, quotes, control
// characters), with and without a batch index, and when the text does not simply grow.
TEST(CumulativeGenerateEvent, EqualsTheEventBuiltFromJson) {
  const std::vector<std::string> pieces = {
      "Hello", ",", " \"world\"", "\n", "\t\\", "\u00e9t\u00e9", "\U0001F600", "\x01", " end", ""};
  for (bool batch : {false, true}) {
    CumulativeGenerateEvent inc;
    ChoiceResult c;
    c.index = 2;
    c.prompt_tokens = 7;
    for (size_t i = 0; i < pieces.size(); ++i) {
      c.text += pieces[i];
      c.output_ids.push_back(static_cast<int32_t>(1000 + 37 * i));
      c.completion_tokens = static_cast<int64_t>(c.output_ids.size());
      c.spec_verify_steps = static_cast<int64_t>(i);
      if (i + 1 == pieces.size()) {
        c.finished = true;
        c.finish_reason = FinishReason::kLength;
      }
      Json want = generate_result_json(c, "rid", SpecInfo{true, 3}, false);
      if (batch) want["index"] = c.index;
      const std::string got =
          inc.event(c, "rid", SpecInfo{true, 3}, batch ? std::optional<size_t>(2) : std::nullopt);
      EXPECT_EQ(got, dump_json(want)) << "token " << i;
    }
    c.text = "rewritten";  // not an extension: serialized afresh
    c.output_ids = {5};
    Json want = generate_result_json(c, "rid", SpecInfo{}, false);
    EXPECT_EQ(inc.event(c, "rid", SpecInfo{}, std::nullopt), dump_json(want));
  }
}

}  // namespace
}  // namespace tandem::server
