// Python's str() and repr() of template values: what {{ x }} prints and how lists and dicts
// show inside other output (['a', 1], {'k': None}, (1,)).
#pragma once

#include <string>
#include <string_view>

#include "chat_template/value.h"

namespace tandem::jinja {

// str(v); undefined prints as the empty string, like Jinja's default Undefined.
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);
std::string repr(const Value& v);
// Python's float repr: shortest round-trip digits, "1.0" for integral values, exponent form
// below 1e-4 and from 1e16 ("1e-05", "1e+16"), "inf"/"nan".
std::string float_repr(double d);
// repr() of a str: single quotes unless the text has ' and no ", escapes for the unprintable.
std::string string_repr(std::string_view s);

}  // namespace tandem::jinja
