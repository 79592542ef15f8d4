// Python's json.dumps, which transformers installs as the tojson filter (ensure_ascii=False by
// default, ", " and ": " separators, optional indent and sort_keys). Byte-identical output
// matters: tool schemas go into the prompt through it.
#pragma once

#include <optional>
#include <string>

#include "chat_template/value.h"

namespace tandem::jinja {

struct JsonDumpsOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // None: one line; otherwise the per-level indent text
  std::optional<std::string> item_separator;  // default ", " (or "," when indenting)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
};

std::string json_dumps(const Value& v, const JsonDumpsOptions& options);

}  // namespace tandem::jinja
