// Text filters: case, trim, replace, escape, indent, truncate, format, tojson.
#include <algorithm>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/filter_fns.h"
#include "chat_template/json_dumps.h"
#include "chat_template/operators.h"
#include "chat_template/py_format.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"
#include "chat_template/unicode.h"

namespace tandem::jinja::filters {
namespace {

Value str_value(std::string s) {
  return Value::string(std::move(s));
}

}  // namespace

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
  return str_value(
      py::replace(to_str(v), to_str(p[0]), to_str(p[1]), static_cast<long>(p.get_int(2, -1))));
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
  // Jinja appends a newline (s += "\n") first so splitlines() keeps a trailing empty line; that
  // needs a string.
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) {
    render_fail("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v));
  }
  auto lines = py::splitlines(v.str() + "\n", false);
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
  if (!v.is_string()) {
    // Jinja does not convert: a short enough sequence comes back unchanged, others fail.
    if (static_cast<int64_t>(length(v)) <= p.get_int(0, 255) + p.get_int(3, 5)) return v;
    render_fail("'{}' object has no attribute 'rsplit'", type_name(v));
  }
  std::string s = v.str();
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

// sort_keys=False).
Value f_tojson(Interp&, const Value& v, const CallArgs& a) {
  Params p("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpsOptions o;
  o.ensure_ascii = p.get_bool(0, false);
  if (p.has(1) && !p[1].is_none()) {
    if (p[1].is_string()) {
      o.indent = p[1].str();
    } else {
      o.indent =
          std::string(static_cast<size_t>(std::max<int64_t>(0, expect_int("indent", p[1]))), ' ');
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

}  // namespace tandem::jinja::filters
