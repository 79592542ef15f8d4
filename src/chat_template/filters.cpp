#include "chat_template/filters.h"

#include "chat_template/errors.h"
#include "chat_template/filter_fns.h"
#include "chat_template/operators.h"
#include "chat_template/py_string.h"

namespace tandem::jinja {

Value attribute_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  for (const auto& part : py::split(attribute.str(), std::string("."), -1)) {
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = get_item(v, digits ? digits_key(part) : Value::string(part));
  }
  return v;
}

namespace {

using namespace filters;  // NOLINT: the table below names every filter function

struct Entry {
  std::string_view name;
  FilterFn fn;
};

const Entry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"groupby", f_groupby},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_slice},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

bool is_unsupported_jinja_filter(std::string_view name) {
  // Jinja has these, so templates naming them parse; using one fails at render time.
  static constexpr std::string_view kUnsupported[] = {"filesizeformat", "pprint",    "random",
                                                      "striptags",      "urlencode", "urlize",
                                                      "wordwrap",       "xmlattr"};
  for (auto u : kUnsupported) {
    if (u == name) return true;
  }
  return false;
}

FilterFn find_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace tandem::jinja
