// DeepSeek-V3 and V3.1 tool calls, as their chat templates write them:
//   deepseekv3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n
//                ```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>...
//                <｜tool▁calls▁end｜>
//   deepseekv31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":
//                "Paris"}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// The arguments are the model's JSON text, passed on as it arrives (whitespace and the code
// fence around it dropped), as SGLang streams them.
#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace tandem::server {

namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>",
                           kCallsEnd = "<｜tool▁calls▁end｜>", kCallBegin = "<｜tool▁call▁begin｜>",
                           kCallEnd = "<｜tool▁call▁end｜>", kSep = "<｜tool▁sep｜>";

bool is_fence_char(char c) {
  return is_space(c) || c == '`';
}

class DeepSeekToolParser : public ToolCallParser {
 public:
  DeepSeekToolParser(bool typed_header, std::shared_ptr<const ToolSet> tools, Options o)
      : ToolCallParser(std::move(tools), o), typed_header_(typed_header) {}

 private:
  enum class State { kText, kSection, kHeader, kArgsStart, kArgs };

  void parse(bool final) override {
    for (;;) {
      switch (state_) {
        case State::kText: {
          // A call without the section marker is accepted too (SGLang does).
          const size_t a = buf_.find(kCallsBegin), b = buf_.find(kCallBegin);
          const size_t at = std::min(a, b);
          if (at == std::string::npos) {
            const size_t keep =
                buf_.size() - (final ? 0 : partial_suffix(buf_, {kCallsBegin, kCallBegin}));
            content(std::string_view(buf_).substr(0, keep));
            buf_.erase(0, keep);
            return;
          }
          content(std::string_view(buf_).substr(0, at));
          buf_.erase(0, at + (at == a ? kCallsBegin.size() : 0));
          state_ = State::kSection;
          continue;
        }
        case State::kSection: {
          skip_spaces(buf_);
          if (consume(buf_, kCallBegin)) {
            state_ = State::kHeader;
            continue;
          }
          if (consume(buf_, kCallsEnd)) {
            state_ = State::kText;
            continue;
          }
          if (!final && (buf_.empty() || is_partial_marker(buf_, {kCallBegin, kCallsEnd}))) return;
          state_ = State::kText;  // the section ended without its marker: text again
          continue;
        }
        case State::kHeader: {
          const size_t sep = buf_.find(kSep);
          if (sep == std::string::npos) {
            if (final) buf_.clear();  // a call cut off before its name: nothing to return
            return;
          }
          size_t name_begin = sep + kSep.size(), name_end = name_begin;
          if (typed_header_) {  // "function<sep>name\n"
            name_end = buf_.find('\n', name_begin);
            if (name_end == std::string::npos) {
              if (!final) return;
              name_end = buf_.size();
            }
          } else {  // "name<sep>"
            name_begin = 0;
            name_end = sep;
          }
          begin_call(trim(std::string_view(buf_).substr(name_begin, name_end - name_begin)));
          buf_.erase(0, typed_header_ ? name_end : sep + kSep.size());
          emitted_ = false;
          state_ = State::kArgsStart;
          continue;
        }
        case State::kArgsStart: {
          skip_spaces(buf_);
          if (!final && is_partial_marker(buf_, {"```json"})) return;
          if (!consume(buf_, "```json")) consume(buf_, "```");
          state_ = State::kArgs;
          continue;
        }
        case State::kArgs: {
          if (!emitted_) skip_spaces(buf_);  // the newline after the opening fence
          const size_t at = buf_.find(kCallEnd);
          size_t end = at != std::string::npos ? at
                       : final                 ? buf_.size()
                                               : buf_.size() - partial_suffix(buf_, kCallEnd);
          // Whitespace and backticks at the end may be the closing fence: held back, and
          // dropped at the end of the call.
          while (end > 0 && is_fence_char(buf_[end - 1])) --end;
          if (end > 0) {
            arguments(std::string_view(buf_).substr(0, end));
            emitted_ = true;
            buf_.erase(0, end);
          }
          if (at == std::string::npos && !final) return;
          if (!emitted_) arguments("{}");
          end_call();
          const size_t close = buf_.find(kCallEnd);
          buf_.erase(0, close == std::string::npos ? buf_.size() : close + kCallEnd.size());
          state_ = State::kSection;
          continue;
        }
      }
    }
  }

  bool typed_header_;
  State state_ = State::kText;
  bool emitted_ = false;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_deepseek_tool_parser(bool typed_header,
                                                          std::shared_ptr<const ToolSet> tools,
                                                          ToolCallParser::Options o) {
  return std::make_unique<DeepSeekToolParser>(typed_header, std::move(tools), o);
}

}  // namespace tandem::server
