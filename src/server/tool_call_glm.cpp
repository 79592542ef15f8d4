// GLM's tool calls, as GLM-4.5 .. GLM-5's chat templates write them and the models produce them:
//   glm47 (GLM-4.7, GLM-5): <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris
//                           </arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>
//   glm45 (GLM-4.5, 4.6):   the same with a newline after the name and after each tag pair.
// Values are text: strings verbatim, other types as JSON ("3", "true", "[1, 2]"), typed here by
// the function's schema. String values are passed on as they arrive; others when complete.
#include "server/detokenizer.h"
#include "server/text_scan.h"
#include "server/tool_arguments.h"
#include "server/tool_call_formats.h"

namespace tandem::server {

namespace {

constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>", kKey = "<arg_key>",
                           kKeyEnd = "</arg_key>", kValue = "<arg_value>",
                           kValueEnd = "</arg_value>";

class GlmToolParser : public KeyValueToolParser {
 public:
  using KeyValueToolParser::KeyValueToolParser;

 private:
  enum class State { kText, kName, kBetween, kKey, kBeforeValue, kValue };

  void parse(bool final) override {
    for (;;) {
      switch (state_) {
        case State::kText: {
          const size_t at = buf_.find(kCall);
          if (at == std::string::npos) {
            const size_t keep = buf_.size() - (final ? 0 : partial_suffix(buf_, kCall));
            content(std::string_view(buf_).substr(0, keep));
            buf_.erase(0, keep);
            return;
          }
          content(std::string_view(buf_).substr(0, at));
          buf_.erase(0, at + kCall.size());
          state_ = State::kName;
          continue;
        }
        case State::kName: {
          // The name ends at the newline (glm45) or at the first tag (glm47).
          const size_t at = buf_.find_first_of("\n<");
          if (at == std::string::npos) {
            if (final) content(std::string(kCall) + std::exchange(buf_, {}));  // never a call
            return;
          }
          begin_call(trim(std::string_view(buf_).substr(0, at)));
          buf_.erase(0, at);
          args_ = ArgumentsWriter();
          state_ = State::kBetween;
          continue;
        }
        case State::kBetween: {
          skip_spaces(buf_);
          if (consume(buf_, kKey)) {
            state_ = State::kKey;
            continue;
          }
          if (consume(buf_, kCallEnd)) {
            close_call();
            continue;
          }
          if (buf_.empty() || is_partial_marker(buf_, {kKey, kCallEnd})) {
            if (final) close_call();
            return;
          }
          // Stray text inside a call is no argument: skip to the next tag.
          const size_t lt = buf_.find('<', 1);
          buf_.erase(0, lt == std::string::npos ? buf_.size() : lt);
          continue;
        }
        case State::kKey: {
          const size_t at = buf_.find(kKeyEnd);
          if (at == std::string::npos) {
            if (final) close_call();
            return;
          }
          key_ = trim(std::string_view(buf_).substr(0, at));
          buf_.erase(0, at + kKeyEnd.size());
          state_ = State::kBeforeValue;
          continue;
        }
        case State::kBeforeValue: {
          skip_spaces(buf_);
          if (consume(buf_, kValue)) {
            type_ = argument_type(call_parameters(), key_);
            if (type_ == ArgType::kString) arguments(args_.begin_string(key_));
            state_ = State::kValue;
            continue;
          }
          if (!final && (buf_.empty() || is_partial_marker(buf_, {kValue}))) return;
          state_ = State::kBetween;  // a key without a value is dropped
          continue;
        }
        case State::kValue:
          switch (read_value(kValueEnd, final)) {
            case ValueEnd::kMore:
              return;
            case ValueEnd::kCutOff:
              close_call();
              return;
            case ValueEnd::kClosed:
              state_ = State::kBetween;
              continue;
          }
          return;
      }
    }
  }

  void close_call() {
    arguments(args_.finish());
    end_call();
    state_ = State::kText;
  }

  State state_ = State::kText;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_glm_tool_parser(std::shared_ptr<const ToolSet> tools,
                                                     ToolCallParser::Options o) {
  return std::make_unique<GlmToolParser>(std::move(tools), o);
}

}  // namespace tandem::server
