#include "server/chat_template/filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "server/chat_template/args.h"
#include "server/chat_template/errors.h"
#include "server/chat_template/json_dumps.h"
#include "server/chat_template/methods.h"
#include "server/chat_template/operators.h"
#include "server/chat_template/py_format.h"
#include "server/chat_template/py_repr.h"
#include "server/chat_template/py_string.h"
#include "server/chat_template/renderer.h"
#include "server/chat_template/unicode.h"

namespace tandem::jinja {

Value attribute_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  for (const auto& part : py::split(attribute.str(), std::string("."), -1)) {
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = get_item(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return v;
}

namespace {

Value str_value(std::string s) { return Value::string(std::move(s)); }

// Jinja's ignore_case post-processing for sort/unique/min/max keys.
Value fold_case(const Value& v) { return v.is_string() ? str_value(py::lower(v.str())) : v; }

// make_attrgetter(attribute, postprocess, default): the sort/group/select key of an item.
struct KeyFn {
  Value attribute;  // undefined or none: the item itself
  bool ignore_case = false;
  Value fallback;  // used when the looked-up value is undefined (if not none/undefined)

  Value operator()(const Value& item) const {
    Value v = item;
    if (!attribute.is_undefined() && !attribute.is_none()) {
      v = attribute_path(item, attribute);
      if (v.is_undefined() && !fallback.is_undefined() && !fallback.is_none()) v = fallback;
    }
    return ignore_case ? fold_case(v) : v;
  }
};

bool py_less(const Value& a, const Value& b) { return compare(CmpOp::kLt, a, b); }

// ---- strings ----

Value f_upper(Interp&, const Value& v, const CallArgs& a) {
  Params p("upper", a, {});
  return str_value(py::upper(to_str(v)));
}
Value f_lower(Interp&, const Value& v, const CallArgs& a) {
  Params p("lower", a, {});
  return str_value(py::lower(to_str(v)));
}
Value f_title(Interp&, const Value& v, const CallArgs& a) {
  Params p("title", a, {});
  return str_value(py::jinja_title(to_str(v)));
}
Value f_capitalize(Interp&, const Value& v, const CallArgs& a) {
  Params p("capitalize", a, {});
  return str_value(py::capitalize(to_str(v)));
}
Value f_trim(Interp&, const Value& v, const CallArgs& a) {
  Params p("trim", a, {"chars"});
  return str_value(py::strip(to_str(v), p.get_str(0), py::Side::kBoth));
}
Value f_replace(Interp&, const Value& v, const CallArgs& a) {
  Params p("replace", a, {"old", "new", "count"}, 2);
  return str_value(py::replace(to_str(v), to_str(p[0]), to_str(p[1]),
                               static_cast<long>(p.get_int(2, -1))));
}
Value f_string(Interp&, const Value& v, const CallArgs& a) {
  Params p("string", a, {});
  return v.is_string() ? v : str_value(to_str(v));
}
Value f_safe(Interp&, const Value& v, const CallArgs& a) {
  Params p("safe", a, {});
  return Value::string(to_str(v), true);
}
Value f_escape(Interp&, const Value& v, const CallArgs& a) {
  Params p("escape", a, {});
  if (v.is_markup()) return v;
  return Value::string(py::html_escape(to_str(v)), true);
}
Value f_forceescape(Interp&, const Value& v, const CallArgs& a) {
  Params p("forceescape", a, {});
  return Value::string(py::html_escape(to_str(v)), true);
}
Value f_wordcount(Interp&, const Value& v, const CallArgs& a) {
  Params p("wordcount", a, {});
  return Value::integer(py::word_count(to_str(v)));
}
Value f_center(Interp&, const Value& v, const CallArgs& a) {
  Params p("center", a, {"width"});
  return str_value(py::center(to_str(v), static_cast<long>(p.get_int(0, 80)), U' '));
}

Value f_indent(Interp&, const Value& v, const CallArgs& a) {
  Params p("indent", a, {"width", "first", "blank"});
  std::string pad;
  if (p.has(0) && p[0].is_string()) {
    pad = p[0].str();
  } else {
    pad.assign(static_cast<size_t>(std::max<int64_t>(0, p.get_int(0, 4))), ' ');
  }
  bool first = p.get_bool(1, false), blank = p.get_bool(2, false);
  // Jinja appends a newline first so splitlines() keeps a trailing empty line.
  auto lines = py::splitlines(to_str(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
  }
  if (first) out = pad + out;
  return str_value(std::move(out));
}

Value f_truncate(Interp&, const Value& v, const CallArgs& a) {
  Params p("truncate", a, {"length", "killwords", "end", "leeway"});
  std::string s = to_str(v);
  int64_t length = p.get_int(0, 255);
  std::string end = p.get_str(2, "...");
  int64_t leeway = p.get_int(3, 5);
  int64_t end_len = static_cast<int64_t>(unicode::length(end));
  if (length < end_len) render_fail("expected length >= {}, got {}", end_len, length);
  if (static_cast<int64_t>(unicode::length(s)) <= length + leeway) return str_value(s);
  std::string head = s.substr(0, unicode::byte_offset(s, static_cast<size_t>(length - end_len)));
  if (p.get_bool(1, false)) return str_value(head + end);
  return str_value(py::rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_format(Interp&, const Value& v, const CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty()) {
    render_fail("can't handle positional and keyword arguments at the same time");
  }
  if (!a.kwargs.empty()) {
    DictData d;
    for (const auto& [k, x] : a.kwargs) d.set(str_value(k), x);
    return str_value(percent_format(to_str(v), Value::dict(std::move(d))));
  }
  return str_value(percent_format(to_str(v), Value::list(a.args, true)));
}

// ---- numbers ----

// Python int(str, base): surrounding whitespace, a sign and single underscores are allowed.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py::strip(text, std::nullopt, py::Side::kBoth);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || digits[0] == '-' || digits[0] == '+') return std::nullopt;
  return negative ? -r : r;
}

// Python float(str): whitespace, underscores between digits, inf/nan spellings.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py::strip(text, std::nullopt, py::Side::kBoth);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    clean += s[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value to_float_value(const Value& v) {
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value::number(*d);
  }
  return {};
}

Value f_int(Interp&, const Value& v, const CallArgs& a) {
  Params p("int", a, {"default", "base"});
  Value fallback = p.get(0, Value::integer(0));
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), static_cast<int>(p.get_int(1, 10)))) return Value::integer(*i);
  }
  // Jinja's quirk so "42.23"|int gives 42: fall back to int(float(value)).
  Value f = to_float_value(v);
  if (f.is_float()) {
    double d = f.as_double();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) render_fail("cannot convert float infinity to integer");
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value f_float(Interp&, const Value& v, const CallArgs& a) {
  Params p("float", a, {"default"});
  Value f = to_float_value(v);
  return f.is_float() ? f : p.get(0, Value::number(0.0));
}

Value f_abs(Interp&, const Value& v, const CallArgs& a) {
  Params p("abs", a, {});
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
  render_fail("bad operand type for abs(): '{}'", type_name(v));
}

// Python round(x, n): correctly rounded, ties to even on the exact binary value; printf does
// the same rounding.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(n, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Interp&, const Value& v, const CallArgs& a) {
  Params p("round", a, {"precision", "method"});
  int64_t precision = p.get_int(0, 0);
  std::string method = p.get_str(1, "common");
  if (!v.is_number()) render_fail("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_integral()) {
      if (precision >= 0) return Value::integer(v.as_int());
      return Value::integer(static_cast<int64_t>(round_float(v.as_double(), precision)));
    }
    return Value::number(round_float(v.as_double(), precision));
  }
  if (method != "ceil" && method != "floor") render_fail("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// ---- sequences ----

Value f_length(Interp&, const Value& v, const CallArgs& a) {
  Params p("length", a, {});
  return Value::integer(static_cast<int64_t>(length(v)));
}

Value f_first(Interp&, const Value& v, const CallArgs& a) {
  Params p("first", a, {});
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interp&, const Value& v, const CallArgs& a) {
  Params p("last", a, {});
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Interp&, const Value& v, const CallArgs& a) {
  Params p("list", a, {});
  return Value::list(iterate(v));
}

Value f_join(Interp&, const Value& v, const CallArgs& a) {
  Params p("join", a, {"d", "attribute"});
  std::string sep = p.has(0) ? to_str(p[0]) : "";
  KeyFn key{p.get(1, Value())};
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    append_str(out, key(item));
  }
  return str_value(std::move(out));
}

Value f_reverse(Interp&, const Value& v, const CallArgs& a) {
  Params p("reverse", a, {});
  if (v.is_string()) return get_slice(v, Value::none(), Value::none(), Value::integer(-1));
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_items(Interp&, const Value& v, const CallArgs& a) {
  Params p("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) render_fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_dictsort(Interp&, const Value& v, const CallArgs& a) {
  Params p("dictsort", a, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = p.get_bool(0, false);
  std::string by = p.get_str(1, "key");
  if (by != "key" && by != "value") render_fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) render_fail("'{}' object has no attribute 'items'", type_name(v));
  size_t pos = by == "key" ? 0 : 1;
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict().entries) pairs.push_back(Value::list({k, x}, true));
  auto key = [&](const Value& pair) {
    const Value& x = pair.items()[pos];
    return case_sensitive ? x : fold_case(x);
  };
  bool reverse = p.get_bool(2, false);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& l, const Value& r) {
    return reverse ? py_less(key(r), key(l)) : py_less(key(l), key(r));
  });
  return Value::list(std::move(pairs));
}

Value f_sort(Interp&, const Value& v, const CallArgs& a) {
  Params p("sort", a, {"reverse", "case_sensitive", "attribute"});
  bool reverse = p.get_bool(0, false);
  KeyFn key{p.get(2, Value()), !p.get_bool(1, false)};
  auto items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : items) keyed.emplace_back(key(x), x);
  // Python's sort is stable, also when reversed.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    return reverse ? py_less(r.first, l.first) : py_less(l.first, r.first);
  });
  std::vector<Value> out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return Value::list(std::move(out));
}

Value f_unique(Interp&, const Value& v, const CallArgs& a) {
  Params p("unique", a, {"case_sensitive", "attribute"});
  KeyFn key{p.get(1, Value()), !p.get_bool(0, false)};
  std::vector<Value> seen, out;
  for (const auto& item : iterate(v)) {
    Value k = key(item);
    if (!hashable(k)) render_fail("unhashable type: '{}'", type_name(k));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, const CallArgs& a, const char* name, bool want_max) {
  Params p(name, a, {"case_sensitive", "attribute"});
  KeyFn key{p.get(1, Value()), !p.get_bool(0, false)};
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}
Value f_min(Interp&, const Value& v, const CallArgs& a) { return min_max(v, a, "min", false); }
Value f_max(Interp&, const Value& v, const CallArgs& a) { return min_max(v, a, "max", true); }

Value f_sum(Interp&, const Value& v, const CallArgs& a) {
  Params p("sum", a, {"attribute", "start"});
  KeyFn key{p.get(0, Value())};
  Value total = p.get(1, Value::integer(0));
  if (total.is_string()) render_fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const auto& item : iterate(v)) total = binary_op(BinOp::kAdd, total, key(item));
  return total;
}

Value f_batch(Interp&, const Value& v, const CallArgs& a) {
  Params p("batch", a, {"linecount", "fill_with"}, 1);
  int64_t n = p.get_int(0, 1);
  if (n <= 0) render_fail("batch size must be positive");
  std::vector<Value> out, cur;
  for (const auto& item : iterate(v)) {
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
    cur.push_back(item);
  }
  if (!cur.empty()) {
    if (p.has(1) && !p[1].is_none()) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(p[1]);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_slice(Interp&, const Value& v, const CallArgs& a) {
  Params p("slice", a, {"slices", "fill_with"}, 1);
  auto seq = iterate(v);
  int64_t slices = p.get_int(0, 1);
  if (slices <= 0) render_fail("slice count must be positive");
  int64_t len = static_cast<int64_t>(seq.size());
  int64_t per = len / slices, extra = len % slices, offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (p.has(1) && !p[1].is_none() && k >= extra) part.push_back(p[1]);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

Value f_default(Interp&, const Value& v, const CallArgs& a) {
  Params p("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (p.get_bool(1, false) && !truthy(v))) {
    return p.get(0, str_value(""));
  }
  return v;
}

Value f_attr(Interp&, const Value& v, const CallArgs& a) {
  Params p("attr", a, {"name"}, 1);
  std::string name = to_str(p[0]);
  // Attributes only, no item fallback: d|attr('key') is undefined for a dict key.
  if (v.is_object()) return v.object()->attr(name);
  if (v.is_undefined()) fail_undefined(v);
  if (auto m = method(v, name)) return *m;
  return Value::undefined("'" + type_name(v) + " object' has no attribute '" + name + "'");
}

// ---- map / select ----

Value f_map(Interp& in, const Value& v, const CallArgs& a) {
  std::vector<Value> out;
  if (a.args.empty()) {
    Value attribute, fallback;
    for (const auto& [k, x] : a.kwargs) {
      if (k == "attribute") attribute = x;
      else if (k == "default") fallback = x;
      else render_fail("Unexpected keyword argument '{}'", k);
    }
    if (attribute.is_undefined()) render_fail("map requires a filter argument");
    KeyFn key{attribute, false, fallback};
    for (const auto& item : iterate(v)) out.push_back(key(item));
    return Value::list(std::move(out));
  }
  std::string name = expect_str("map filter name", a.args[0]);
  CallArgs rest{std::vector<Value>(a.args.begin() + 1, a.args.end()), a.kwargs};
  for (const auto& item : iterate(v)) out.push_back(in.apply_filter(name, item, rest));
  return Value::list(std::move(out));
}

Value select_impl(Interp& in, const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  size_t off = by_attr ? 1 : 0;
  if (by_attr && a.args.empty()) render_fail("Missing parameter for attribute name");
  KeyFn key{by_attr ? a.args[0] : Value()};
  std::optional<std::string> test;
  if (a.args.size() > off) test = expect_str("test name", a.args[off]);
  CallArgs rest{std::vector<Value>(a.args.begin() + std::min(a.args.size(), off + 1), a.args.end()),
                a.kwargs};
  std::vector<Value> out;
  for (const auto& item : iterate(v)) {
    Value x = key(item);
    bool ok = test ? in.apply_test(*test, x, rest) : truthy(x);
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, const CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, const CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, const CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, const CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_groupby(Interp&, const Value& v, const CallArgs& a) {
  Params p("groupby", a, {"attribute", "default", "case_sensitive"}, 1);
  bool case_sensitive = p.get_bool(2, false);
  KeyFn key{p[0], !case_sensitive, p.get(1, Value())};
  KeyFn shown{p[0], false, p.get(1, Value())};
  auto items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : items) keyed.emplace_back(key(x), x);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& l, const auto& r) { return py_less(l.first, r.first); });
  std::vector<Value> out;
  size_t i = 0;
  while (i < keyed.size()) {
    size_t j = i;
    std::vector<Value> group;
    while (j < keyed.size() && equals(keyed[j].first, keyed[i].first)) group.push_back(keyed[j++].second);
    Value grouper = case_sensitive ? keyed[i].first : shown(group[0]);
    out.push_back(Value::list({grouper, Value::list(std::move(group))}, true));
    i = j;
  }
  return Value::list(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Value f_tojson(Interp&, const Value& v, const CallArgs& a) {
  Params p("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpsOptions o;
  o.ensure_ascii = p.get_bool(0, false);
  if (p.has(1) && !p[1].is_none()) {
    if (p[1].is_string()) {
      o.indent = p[1].str();
    } else {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, expect_int("indent", p[1]))), ' ');
    }
  }
  if (p.has(2) && !p[2].is_none()) {
    const Value& s = p[2];
    if (!s.is_list() || s.items().size() != 2) render_fail("separators must be a pair of strings");
    o.item_separator = expect_str("separator", s.items()[0]);
    o.key_separator = expect_str("separator", s.items()[1]);
  }
  o.sort_keys = p.get_bool(3, false);
  return str_value(json_dumps(v, o));
}

Value f_unsupported(Interp&, const Value&, const CallArgs&) {
  render_fail("this Jinja filter is not supported by the chat template engine");
}

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
    // Jinja has these; they fail when used, rather than at parse time.
    {"filesizeformat", f_unsupported},
    {"pprint", f_unsupported},
    {"random", f_unsupported},
    {"striptags", f_unsupported},
    {"urlencode", f_unsupported},
    {"urlize", f_unsupported},
    {"wordwrap", f_unsupported},
    {"xmlattr", f_unsupported},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace tandem::jinja
