#include "chat_template/predicates.h"

#include <utility>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/filters.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"

namespace tandem::jinja {
namespace {

// The single `other` argument of a comparison test, validated like a Python call.
const Value& other(const CallArgs& a, const char* name) {
  Params p(name, a, {"other"}, 1);
  return a.args.empty() ? a.kwargs[0].second : a.args[0];
}

bool compare_test(const CallArgs& a, const char* name, CmpOp op, const Value& v) {
  return compare(op, v, other(a, name));
}

bool no_args(const CallArgs& a, const char* name) {
  Params p(name, a, {});
  return true;
}

// Jinja: odd is value % 2 == 1, even is value % 2 == 0 (so 2.5 is neither).
bool is_odd_even(const Value& v, bool odd) {
  Value r = binary_op(BinOp::kMod, v, Value::integer(2));
  return equals(r, Value::integer(odd ? 1 : 0));
}

// Jinja's 'sameas' is Python identity: exact for None/True/False, by shared storage otherwise.
bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return true;
    case Value::Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Value::Kind::kInt:
      // CPython caches small ints, so `1 is 1` holds.
      return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
    case Value::Kind::kString:
      return &a.str() == &b.str();
    case Value::Kind::kList:
      return &a.list_data() == &b.list_data();
    case Value::Kind::kDict:
      return &a.dict() == &b.dict();
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    case Value::Kind::kObject:
      return a.object() == b.object();
    case Value::Kind::kIter:
      return &a.iter() == &b.iter();
    default:
      return false;
  }
}

struct Entry {
  std::string_view name;
  TestFn fn;
};

#define TD_TEST(body) [](Interp&, const Value& v, const CallArgs& a) -> bool { body }

const Entry kTests[] = {
    {"defined", TD_TEST(no_args(a, "defined"); return !v.is_undefined();)},
    {"undefined", TD_TEST(no_args(a, "undefined"); return v.is_undefined();)},
    {"none", TD_TEST(no_args(a, "none"); return v.is_none();)},
    {"boolean", TD_TEST(no_args(a, "boolean"); return v.is_bool();)},
    {"true", TD_TEST(no_args(a, "true"); return v.is_bool() && v.as_bool();)},
    {"false", TD_TEST(no_args(a, "false"); return v.is_bool() && !v.as_bool();)},
    {"integer", TD_TEST(no_args(a, "integer"); return v.is_int();)},
    {"float", TD_TEST(no_args(a, "float"); return v.is_float();)},
    {"number", TD_TEST(no_args(a, "number"); return v.is_number();)},
    {"string", TD_TEST(no_args(a, "string"); return v.is_string();)},
    {"mapping", TD_TEST(no_args(a, "mapping"); return v.is_dict();)},
    // Undefined iterates as empty and has a length, so Jinja counts it as both.
    {"iterable",
     TD_TEST(no_args(a, "iterable"); return v.is_undefined() || v.is_string() || v.is_list() ||
                                            v.is_dict() || v.is_iter();)},
    {"sequence", TD_TEST(no_args(a, "sequence");
                         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();)},
    {"callable", TD_TEST(no_args(a, "callable"); return v.is_callable() || v.is_undefined();)},
    {"escaped", TD_TEST(no_args(a, "escaped"); return v.is_markup();)},
    {"lower", TD_TEST(no_args(a, "lower"); return py::is_lower(to_str(v));)},
    {"upper", TD_TEST(no_args(a, "upper"); return py::is_upper(to_str(v));)},
    {"odd", TD_TEST(no_args(a, "odd"); return is_odd_even(v, true);)},
    {"even", TD_TEST(no_args(a, "even"); return is_odd_even(v, false);)},
    {"divisibleby", TD_TEST(Params p("divisibleby", a, {"num"}, 1);
                            return equals(binary_op(BinOp::kMod, v, p[0]), Value::integer(0));)},
    {"sameas", TD_TEST(return same_as(v, other(a, "sameas"));)},
    {"in", TD_TEST(Params p("in", a, {"seq"}, 1); return contains(p[0], v);)},
    {"filter", TD_TEST(no_args(a, "filter");
                       return v.is_string() &&
                              (find_filter(v.str()) || is_unsupported_jinja_filter(v.str()));)},
    {"test", TD_TEST(no_args(a, "test"); return v.is_string() && find_test(v.str()) != nullptr;)},
    {"eq", TD_TEST(return compare_test(a, "eq", CmpOp::kEq, v);)},
    {"equalto", TD_TEST(return compare_test(a, "equalto", CmpOp::kEq, v);)},
    {"==", TD_TEST(return compare_test(a, "==", CmpOp::kEq, v);)},
    {"ne", TD_TEST(return compare_test(a, "ne", CmpOp::kNe, v);)},
    {"!=", TD_TEST(return compare_test(a, "!=", CmpOp::kNe, v);)},
    {"lt", TD_TEST(return compare_test(a, "lt", CmpOp::kLt, v);)},
    {"lessthan", TD_TEST(return compare_test(a, "lessthan", CmpOp::kLt, v);)},
    {"<", TD_TEST(return compare_test(a, "<", CmpOp::kLt, v);)},
    {"le", TD_TEST(return compare_test(a, "le", CmpOp::kLe, v);)},
    {"<=", TD_TEST(return compare_test(a, "<=", CmpOp::kLe, v);)},
    {"gt", TD_TEST(return compare_test(a, "gt", CmpOp::kGt, v);)},
    {"greaterthan", TD_TEST(return compare_test(a, "greaterthan", CmpOp::kGt, v);)},
    {">", TD_TEST(return compare_test(a, ">", CmpOp::kGt, v);)},
    {"ge", TD_TEST(return compare_test(a, "ge", CmpOp::kGe, v);)},
    {">=", TD_TEST(return compare_test(a, ">=", CmpOp::kGe, v);)},
};

#undef TD_TEST

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& e : kTests) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace tandem::jinja
