// Python operator semantics for template expressions, plus Jinja's sandboxed attribute and item
// lookup (a.b tries the attribute, then the key; a['b'] the other way round; a miss is
// undefined, and using an undefined value in arithmetic or lookups is an error).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat_template/value.h"

namespace tandem::jinja {

enum class BinOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

Value binary_op(BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
// Python's int(x) for a float: NaN and infinities raise, and so does a value beyond 64 bits (our
// integers' width; Python's are unbounded), instead of a cast past the range.
int64_t int_of_float(double d);
Value unary_plus(const Value& v);
bool compare(CmpOp op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);

// a.name
Value get_attr(const Value& obj, std::string_view name);
// a[key]
Value get_item(const Value& obj, const Value& key);
// The integer key that a run of decimal digits in an attribute path ("items.0") or a format field
// ("{0[1]}") names, as Python's int() reads it; one beyond int64 is a render error.
Value digits_key(const std::string& digits);
// a[start:stop:step]; absent bounds are passed as none.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// What `for x in v` visits: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
// len(v); undefined has length 0.
size_t length(const Value& v);

// Throws the UndefinedError an undefined value carries.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace tandem::jinja
