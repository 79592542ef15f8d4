// Jinja's built-in filters with Jinja 3.1 semantics, plus transformers' tojson override
// (json.dumps with ensure_ascii=False). Looked up by name at parse time.
#pragma once

#include <string_view>

#include "chat_template/ast.h"

namespace tandem::jinja {

// nullptr when there is no such filter here.
FilterFn find_filter(std::string_view name);
// Jinja filters this engine leaves out (wordwrap, urlize, ...): a template naming one still
// parses, and fails only if the filter is actually applied.
bool is_unsupported_jinja_filter(std::string_view name);

// Jinja's make_attrgetter: "a.b.0" looks up items a, b, then index 0.
Value attribute_path(const Value& item, const Value& attribute);

}  // namespace tandem::jinja
