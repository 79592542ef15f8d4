// The reasoning parser gives the same split however the text is cut into deltas.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/reasoning_parser.h"

namespace tandem::server {
namespace {

ReasoningParser::Delta parse(bool open, const std::vector<std::string>& deltas) {
  ReasoningParser p(open);
  ReasoningParser::Delta all;
  for (const std::string& d : deltas) {
    auto r = p.push(d);
    all.reasoning += r.reasoning;
    all.content += r.content;
  }
  auto r = p.flush();
  all.reasoning += r.reasoning;
  all.content += r.content;
  return all;
}

// Every way of cutting `text` into two or three pieces.
void expect_split_invariant(bool open, const std::string& text, const std::string& reasoning,
                            const std::string& content) {
  for (size_t i = 0; i <= text.size(); ++i)
    for (size_t j = i; j <= text.size(); ++j) {
      auto d = parse(open, {text.substr(0, i), text.substr(i, j - i), text.substr(j)});
      ASSERT_EQ(d.reasoning, reasoning) << "cuts " << i << "," << j;
      ASSERT_EQ(d.content, content) << "cuts " << i << "," << j;
    }
}

TEST(ReasoningParser, OpenedByOutput) {
  expect_split_invariant(false, "<think>\nLet me see.</think>\n\nThe answer.", "Let me see.",
                         "The answer.");
}

TEST(ReasoningParser, OpenedByPrompt) {
  expect_split_invariant(true, "thinking hard</think>Done", "thinking hard", "Done");
}

TEST(ReasoningParser, NoReasoning) {
  expect_split_invariant(false, "Just an answer with <b>tags</b>.", "",
                         "Just an answer with <b>tags</b>.");
}

TEST(ReasoningParser, UnclosedReasoningIsAllReasoning) {
  expect_split_invariant(true, "still thinking </thi", "still thinking </thi", "");
}

TEST(ReasoningParser, ContentThatStartsLikeTheMarker) {
  expect_split_invariant(false, "<thin ice", "", "<thin ice");
}

TEST(ReasoningParser, HoldsPartialEndMarker) {
  ReasoningParser p(true);
  EXPECT_EQ(p.push("abc</th").reasoning, "abc");
  auto d = p.push("ink>xyz");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "xyz");
}

TEST(ReasoningParser, PromptOpensReasoning) {
  EXPECT_TRUE(ReasoningParser::prompt_opens_reasoning("<|user|>hi<|assistant|><think>"));
  EXPECT_FALSE(ReasoningParser::prompt_opens_reasoning("<|user|>hi<|assistant|></think>"));
  EXPECT_FALSE(ReasoningParser::prompt_opens_reasoning(
      "<|assistant|><think>old</think>x<|user|>hi<|assistant|>"));
  EXPECT_FALSE(ReasoningParser::prompt_opens_reasoning("no markers"));
}

ReasoningParser::Delta parse_with(ReasoningParser::Options o, const std::string& text, size_t cut) {
  ReasoningParser p(o);
  ReasoningParser::Delta all = p.push(text.substr(0, cut));
  for (auto d : {p.push(text.substr(cut)), p.flush()}) {
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  return all;
}

TEST(ReasoningParser, ToolCallEndsReasoning) {
  // GLM may start a call without closing its reasoning: the call is content.
  ReasoningParser::Options o{true, "<tool_call>"};
  const std::string text = "weighing it<tool_call>get_time</tool_call>";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    auto d = parse_with(o, text, cut);
    ASSERT_EQ(d.reasoning, "weighing it") << cut;
    ASSERT_EQ(d.content, "<tool_call>get_time</tool_call>") << cut;
  }
  // A closed think block keeps a later call in the content too.
  auto d = parse_with(o, "a</think>b<tool_call>x", 3);
  EXPECT_EQ(d.reasoning, "a");
  EXPECT_EQ(d.content, "b<tool_call>x");
}

TEST(ReasoningParser, ForcedReasoningDropsARepeatedStartMarker) {
  // DeepSeek-R1: reasoning until </think>, with or without an opening tag.
  for (const std::string text : {"<think>\nhmm</think>\n\nyes", "hmm</think>yes"})
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto d = parse_with({true, ""}, text, cut);
      ASSERT_EQ(d.reasoning, "hmm") << text << " " << cut;
      ASSERT_EQ(d.content, "yes") << text << " " << cut;
    }
  // Never closed: all reasoning (the answer was cut off).
  EXPECT_EQ(parse_with({true, ""}, "still going", 3).reasoning, "still going");
}

TEST(ReasoningFormat, NamesAndPerRequestOptions) {
  EXPECT_FALSE(parse_reasoning_format("").has_value());
  EXPECT_FALSE(parse_reasoning_format("none").has_value());
  EXPECT_EQ(parse_reasoning_format("glm45"), ReasoningFormat::kGlm45);
  EXPECT_EQ(parse_reasoning_format("deepseek-r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(parse_reasoning_format("deepseek-v3"), ReasoningFormat::kDeepSeekV3);
  EXPECT_THROW(parse_reasoning_format("auto"), InvalidArgument);
  const Json none = Json::object();
  const Json off = {{"enable_thinking", false}}, on = {{"thinking", true}};
  // glm45: on unless enable_thinking is false; inside reasoning when the prompt opened it.
  auto g = reasoning_options(ReasoningFormat::kGlm45, none, true);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->in_reasoning);
  EXPECT_EQ(g->tool_start, "<tool_call>");
  EXPECT_FALSE(reasoning_options(ReasoningFormat::kGlm45, none, false)->in_reasoning);
  EXPECT_FALSE(reasoning_options(ReasoningFormat::kGlm45, off, true));
  // deepseek-r1: always, from the first token.
  EXPECT_TRUE(reasoning_options(ReasoningFormat::kDeepSeekR1, off, false)->in_reasoning);
  // deepseek-v3: only with thinking: true (or a prompt that opened a think block).
  EXPECT_FALSE(reasoning_options(ReasoningFormat::kDeepSeekV3, none, false));
  EXPECT_TRUE(reasoning_options(ReasoningFormat::kDeepSeekV3, on, false)->in_reasoning);
  EXPECT_TRUE(reasoning_options(ReasoningFormat::kDeepSeekV3, none, true));
}

}  // namespace
}  // namespace tandem::server
