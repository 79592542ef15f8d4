// Splits GLM/DeepSeek-style "<think>reasoning</think>answer" output into reasoning_content and
// content, incrementally. A marker split across deltas is held back until it is complete, so
// streaming and non-streaming give the same split. Leading whitespace of the reasoning and of
// the answer after "</think>" is dropped (templates put newlines there).
#pragma once

#include <string>
#include <string_view>

namespace tandem::server {

class ReasoningParser {
 public:
  // in_reasoning: the prompt already opened a think block (GLM-5's generation prompt ends in
  // "<think>" when thinking is on), so output is reasoning until "</think>".
  explicit ReasoningParser(bool in_reasoning, std::string start = "<think>",
                           std::string end = "</think>");

  struct Delta {
    std::string reasoning, content;
  };
  Delta push(std::string_view text);
  Delta flush();  // end of output: whatever was held back

  // Whether a rendered prompt leaves a think block open (its last start marker comes after its
  // last end marker).
  static bool prompt_opens_reasoning(std::string_view prompt, std::string_view start = "<think>",
                                     std::string_view end = "</think>");

 private:
  enum class State { kStart, kReasoning, kContent };
  void run(Delta& d, bool final);

  State state_;
  std::string start_, end_;
  std::string pending_;
  bool skip_ws_;  // drop whitespace until the first visible character of a section
};

}  // namespace tandem::server
