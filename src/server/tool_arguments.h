// A tool call's arguments as the OpenAI API returns them: one JSON object, as text. Formats that
// write each argument separately (GLM's <arg_key>/<arg_value>, DeepSeek-V3.2's DSML parameters)
// build that object incrementally here, typing each value by the function's JSON schema.
#pragma once

#include <string>
#include <string_view>

#include "server/json_fields.h"

namespace tandem::server {

// How an argument's text becomes a JSON value.
enum class ArgType {
  kString,  // the schema says string: the text verbatim
  kJson,    // the schema names another type: parsed as JSON (text that does not parse stays a
            // string)
  kAuto,    // no usable schema: parsed as JSON when it parses, else a string
};

// The type of argument `key` in a function's parameters schema (nullptr: none).
ArgType argument_type(const Json* parameters, const std::string& key);

// The value of an argument written as text (kJson/kAuto text is trimmed before parsing).
Json argument_value(std::string_view text, ArgType type);

// JSON text as Python's json.dumps(ensure_ascii=False) writes it, SGLang's spelling of
// arguments: ", " and ": " separators, non-ASCII as is.
std::string dump_arguments_json(const Json& v);

// Builds '{"k": v, ...}' from arguments that arrive one at a time; every method returns the
// text to append to what it returned before. String values may arrive in pieces.
class ArgumentsWriter {
 public:
  std::string value(const std::string& key, const Json& v);  // a whole value
  std::string begin_string(const std::string& key);          // '"k": "'
  static std::string string_piece(std::string_view raw);     // escaped, no quotes
  static std::string end_string() { return "\""; }
  std::string finish() const { return first_ ? "{}" : "}"; }

 private:
  std::string key_prefix(const std::string& key);
  bool first_ = true;
};

}  // namespace tandem::server
