// Jinja's built-in filters with Jinja 3.1 semantics, plus transformers' tojson override
// (json.dumps with ensure_ascii=False). Looked up by name at parse time.
#pragma once

#include <string_view>

#include "server/chat_template/ast.h"

namespace tandem::jinja {

// nullptr when Jinja has no filter of that name (a parse error, as in Jinja). Jinja filters this
// engine does not implement resolve to a function that fails when it runs.
FilterFn find_filter(std::string_view name);

// Jinja's make_attrgetter: "a.b.0" looks up items a, b, then index 0.
Value attribute_path(const Value& item, const Value& attribute);

}  // namespace tandem::jinja
