// The reasoning parser gives the same split however the text is cut into deltas.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tandem::server
