// Splits GLM/DeepSeek-style "<think>reasoning</think>answer" output into reasoning_content and
// content, incrementally. A marker split across deltas is held back until it is complete, so
// streaming and non-streaming give the same split. Leading whitespace of the reasoning and of
// the answer after "</think>" is dropped (templates put newlines there).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/json_fields.h"

namespace tandem::server {

class ReasoningParser {
 public:
  struct Options {
    // The output starts inside a think block: the prompt opened one (GLM-4.7/5's generation
    // prompt ends in "<think>" when thinking is on), or the format always reasons first
    // (DeepSeek-R1). A repeated start marker at the very beginning is dropped. Otherwise output
    // is reasoning only if it starts with the start marker.
    bool in_reasoning = false;
    // A marker that also ends reasoning and stays in the content (GLM's "<tool_call>": a call
    // may follow the reasoning without "</think>"). Empty: none.
    std::string tool_start;
    std::string start = "<think>";
    std::string end = "</think>";
  };
  explicit ReasoningParser(Options o);
  explicit ReasoningParser(bool in_reasoning) : ReasoningParser(Options{in_reasoning, {}}) {}

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

  Options o_;
  State state_;
  std::string pending_;
  bool skip_ws_ = true;       // drop whitespace until the first visible character of a section
  bool strip_start_ = false;  // forced reasoning: a leading start marker is dropped
};

// --reasoning-parser: SGLang's names for the formats this server separates.
enum class ReasoningFormat {
  kGlm45,       // GLM-4.5 .. GLM-5: on unless chat_template_kwargs.enable_thinking is false
  kDeepSeekR1,  // reasoning until "</think>", even without an opening tag
  kDeepSeekV3,  // DeepSeek-V3.1/V3.2: only with chat_template_kwargs.thinking true
};
// nullopt for "" and "none"; throws InvalidArgument naming the flag for an unknown name.
std::optional<ReasoningFormat> parse_reasoning_format(const std::string& name);

// How one chat request is split, or nullopt when it is not (thinking turned off for it).
// prompt_opens: the rendered prompt leaves a think block open.
std::optional<ReasoningParser::Options> reasoning_options(ReasoningFormat f,
                                                          const Json& template_kwargs,
                                                          bool prompt_opens);

}  // namespace tandem::server
