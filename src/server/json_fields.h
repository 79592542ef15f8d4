// Typed reads of request fields. A field that is absent or null takes its default, as Pydantic's
// Optional fields do in SGLang/vLLM; a field of the wrong type is a 400 that names it. Unknown
// fields are never looked at, so they are ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/json_limits.h"

namespace tandem::server {

// Request bodies keep their key order: chat templates print tool schemas with tojson, and
// Python keeps dict order.
using Json = nlohmann::ordered_json;

// Parses a request body that must be a JSON object; anything else is a 400, and so is nesting
// deeper than kMaxJsonDepth (refused while parsing, so no deep value is ever built).
Json parse_json_object(const std::string& body);

// Parses JSON text that may be anything (model output, a tool call's arguments): nullopt when it
// is not valid JSON, is nested deeper than kMaxJsonDepth, or holds an out-of-range number.
std::optional<Json> parse_json_bounded(std::string_view text);

// Dumps a client value for an error message: at most kMaxQuotedValueChars characters, then
// "...". Values nested deeper than that many levels are never walked to their bottom.
std::string quote_json(const Json& j);

// Dumps JSON as UTF-8 text (never \u-escaping non-ASCII, like the Python servers' responses).
std::string dump_json(const Json& j);

class Fields {
 public:
  // prefix names the object in error messages, e.g. "sampling_params."
  explicit Fields(const Json& obj, std::string prefix = "")
      : obj_(obj), prefix_(std::move(prefix)) {}

  bool has(const char* key) const;         // present and not null
  const Json* get(const char* key) const;  // nullptr when absent or null
  std::string param(const char* key) const { return prefix_ + key; }

  std::optional<double> number(const char* key) const;
  // Integral numbers only (5.0 is accepted as 5, 5.5 is not).
  std::optional<int64_t> integer(const char* key) const;
  std::optional<bool> boolean(const char* key) const;
  std::optional<std::string> string(const char* key) const;
  // A string or a list of strings ("stop").
  std::vector<std::string> string_or_list(const char* key) const;
  std::vector<int32_t> int_list(const char* key) const;
  // An object field, or nullptr when absent/null; another type is a 400.
  const Json* object(const char* key) const;

  [[noreturn]] void fail_type(const char* key, const char* expected) const;

 private:
  const Json& obj_;
  std::string prefix_;
};

// Whether a JSON number holds an integral value that fits int64.
bool is_integral(const Json& v);

}  // namespace tandem::server
