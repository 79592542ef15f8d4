// DeepSeek-V3.2's tool calls (DSML), as its encoder (encoding_dsv32.py) writes them:
//   answer text\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n
//   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n
//   </｜DSML｜function_calls>
// string="true" values are text, verbatim; string="false" ones JSON (text that does not parse
// stays a string). String values are passed on as they arrive.
#include "server/detokenizer.h"
#include "server/text_scan.h"
#include "server/tool_arguments.h"
#include "server/tool_call_formats.h"

namespace tandem::server {

namespace {

constexpr std::string_view kCallsBegin = "<｜DSML｜function_calls>",
                           kCallsEnd = "</｜DSML｜function_calls>", kInvoke = "<｜DSML｜invoke",
                           kInvokeEnd = "</｜DSML｜invoke>", kParam = "<｜DSML｜parameter",
                           kParamEnd = "</｜DSML｜parameter>";

// The value of attribute `name` in a tag's text (` name="x" string="true"`), or "".
std::string attribute(std::string_view tag, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  size_t at = tag.find(key);
  if (at == std::string_view::npos) return "";
  at += key.size();
  const size_t end = tag.find('"', at);
  return std::string(tag.substr(at, end == std::string_view::npos ? tag.npos : end - at));
}

class DsmlToolParser : public KeyValueToolParser {
 public:
  using KeyValueToolParser::KeyValueToolParser;

 private:
  enum class State { kText, kSection, kParams, kValue };

  // Reads a tag's attributes up to its '>' after `opener` was consumed; false while incomplete.
  bool read_tag(std::string& attrs) {
    const size_t gt = buf_.find('>');
    if (gt == std::string::npos) return false;
    attrs = buf_.substr(0, gt);
    buf_.erase(0, gt + 1);
    return true;
  }

  void parse(bool final) override {
    for (;;) {
      switch (state_) {
        case State::kText: {
          const size_t at = buf_.find(kCallsBegin);
          if (at == std::string::npos) {
            const size_t keep = buf_.size() - (final ? 0 : partial_suffix(buf_, kCallsBegin));
            content(std::string_view(buf_).substr(0, keep));
            buf_.erase(0, keep);
            return;
          }
          content(std::string_view(buf_).substr(0, at));
          buf_.erase(0, at + kCallsBegin.size());
          state_ = State::kSection;
          continue;
        }
        case State::kSection: {
          skip_spaces(buf_);
          if (buf_.compare(0, kInvoke.size(), kInvoke) == 0) {
            std::string attrs;
            const std::string saved = buf_;
            buf_.erase(0, kInvoke.size());
            if (!read_tag(attrs)) {
              buf_ = saved;
              if (final) buf_.clear();  // cut off inside the tag
              return;
            }
            begin_call(attribute(attrs, "name"));
            args_ = ArgumentsWriter();
            state_ = State::kParams;
            continue;
          }
          if (consume(buf_, kCallsEnd)) {
            state_ = State::kText;
            continue;
          }
          if (!final && (buf_.empty() || is_partial_marker(buf_, {kInvoke, kCallsEnd}))) return;
          state_ = State::kText;  // the block ended without its marker: text again
          continue;
        }
        case State::kParams: {
          skip_spaces(buf_);
          if (buf_.compare(0, kParam.size(), kParam) == 0) {
            std::string attrs;
            const std::string saved = buf_;
            buf_.erase(0, kParam.size());
            if (!read_tag(attrs)) {
              buf_ = saved;
              if (final) close_call();
              return;
            }
            key_ = attribute(attrs, "name");
            // The attribute decides; a missing one falls back to the schema.
            const std::string is_string = attribute(attrs, "string");
            type_ = is_string == "true"    ? ArgType::kString
                    : is_string == "false" ? ArgType::kJson
                                           : argument_type(call_parameters(), key_);
            if (type_ == ArgType::kString) arguments(args_.begin_string(key_));
            state_ = State::kValue;
            continue;
          }
          if (consume(buf_, kInvokeEnd)) {
            close_call();
            state_ = State::kSection;
            continue;
          }
          if (buf_.empty() || is_partial_marker(buf_, {kParam, kInvokeEnd})) {
            if (final) close_call();
            return;
          }
          const size_t lt = buf_.find('<', 1);  // stray text: skip to the next tag
          buf_.erase(0, lt == std::string::npos ? buf_.size() : lt);
          continue;
        }
        case State::kValue:
          switch (read_value(kParamEnd, final)) {
            case ValueEnd::kMore:
              return;
            case ValueEnd::kCutOff:
              close_call();
              return;
            case ValueEnd::kClosed:
              state_ = State::kParams;
              continue;
          }
          return;
      }
    }
  }

  void close_call() {
    arguments(args_.finish());
    end_call();
    state_ = State::kSection;
  }

  State state_ = State::kText;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_dsml_tool_parser(std::shared_ptr<const ToolSet> tools,
                                                      ToolCallParser::Options o) {
  return std::make_unique<DsmlToolParser>(std::move(tools), o);
}

}  // namespace tandem::server
