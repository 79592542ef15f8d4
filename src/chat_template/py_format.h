// Python string formatting: the % operator ("%s: %d" % (a, b), also the |format filter) and
// str.format() with Python's format-spec mini-language.
#pragma once

#include <string>
#include <string_view>

#include "chat_template/value.h"

namespace tandem::jinja {

// fmt % args: a tuple supplies positional values, a dict supplies %(name)s values, anything
// else is the single value.
std::string percent_format(std::string_view fmt, const Value& args);
std::string str_format(std::string_view fmt, const CallArgs& args);
// format(v, spec), e.g. spec ">10" or ".2f".
std::string format_value(const Value& v, std::string_view spec);

}  // namespace tandem::jinja
