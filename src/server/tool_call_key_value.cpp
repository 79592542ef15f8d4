#include "server/detokenizer.h"
#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace tandem::server {

KeyValueToolParser::ValueEnd KeyValueToolParser::read_value(std::string_view end_tag, bool final) {
  const size_t at = buf_.find(end_tag);
  if (type_ == ArgType::kString) {
    // Escaping needs whole characters, so an unfinished one waits with the tag's start.
    size_t end = at;
    if (at == std::string::npos)
      end = final ? buf_.size()
                  : utf8_stable_prefix(std::string_view(buf_).substr(
                        0, buf_.size() - partial_suffix(buf_, end_tag)));
    arguments(ArgumentsWriter::string_piece(std::string_view(buf_).substr(0, end)));
    if (at == std::string::npos && !final) {
      buf_.erase(0, end);
      return ValueEnd::kMore;
    }
    arguments(ArgumentsWriter::end_string());
  } else {
    if (at == std::string::npos && !final) return ValueEnd::kMore;
    if (at != std::string::npos)
      arguments(args_.value(key_, argument_value(std::string_view(buf_).substr(0, at), type_)));
  }
  if (at == std::string::npos) {
    buf_.clear();
    return ValueEnd::kCutOff;
  }
  buf_.erase(0, at + end_tag.size());
  return ValueEnd::kClosed;
}

}  // namespace tandem::server
