// Sequence filters: first/last/join/sort/unique/min/max/sum/batch/slice, dict helpers
// (items, dictsort), map/select/reject(attr) and groupby.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/filter_fns.h"
#include "chat_template/filters.h"
#include "chat_template/methods.h"
#include "chat_template/operators.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"
#include "chat_template/renderer.h"

namespace tandem::jinja::filters {
namespace {

Value str_value(std::string s) {
  return Value::string(std::move(s));
}

// Jinja's ignore_case post-processing for sort/unique/min/max keys.
Value fold_case(const Value& v) {
  return v.is_string() ? str_value(py::lower(v.str())) : v;
}

// make_attrgetter(attribute, postprocess, default): the sort/group/select key of an item.
struct KeyFn {
  explicit KeyFn(Value attr, bool fold = false, Value dflt = Value())
      : attribute(std::move(attr)), ignore_case(fold), fallback(std::move(dflt)) {}
  Value attribute;  // undefined or none: the item itself
  bool ignore_case;
  Value fallback;  // used when the looked-up value is undefined (if not none)

  Value operator()(const Value& item) const {
    Value v = item;
    if (!attribute.is_undefined() && !attribute.is_none()) {
      v = attribute_path(item, attribute);
      if (v.is_undefined() && !fallback.is_undefined() && !fallback.is_none()) v = fallback;
    }
    return ignore_case ? fold_case(v) : v;
  }
};

bool py_less(const Value& a, const Value& b) {
  return compare(CmpOp::kLt, a, b);
}

// Jinja's items/select/map/unique/batch/slice are Python generators: their bodies run only when
// consumed. The items are made now, but an error is kept in the generator and raised when
// iteration reaches it, so `{% if xs|map('x') %}` is true without running anything, as in Jinja.
template <typename Body>
Value lazy_generator(Body body) {
  std::vector<Value> out;
  try {
    body(out);
  } catch (const RenderError& e) {
    return Value::failing_generator(std::move(out), e.message);
  }
  return Value::generator(std::move(out));
}

}  // namespace

Value f_length(Interp&, const Value& v, const CallArgs& a) {
  Params p("length", a, {});
  return Value::integer(static_cast<int64_t>(length(v)));
}

Value f_first(Interp&, const Value& v, const CallArgs& a) {
  Params p("first", a, {});
  if (v.is_generator()) {  // next(iter(gen)) takes just one item
    const IterData& it = v.iter();
    if (it.consumed < it.items.size()) return it.items[it.consumed++];
    if (it.has_deferred_error) render_fail("{}", it.deferred_error);
    return Value::undefined("No first item, sequence was empty.");
  }
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interp&, const Value& v, const CallArgs& a) {
  Params p("last", a, {});
  if (v.is_generator()) render_fail("'{}' object is not reversible", type_name(v));
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
  // reversed() gives an iterator; a generator is not reversible, so Jinja lists it instead.
  bool from_generator = v.is_generator();
  std::string name = v.is_dict() ? "dict_reversekeyiterator" : "list_reverseiterator";
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (from_generator) return Value::list(std::move(items));
  return Value::generator(std::move(items), name);
}

Value f_items(Interp&, const Value& v, const CallArgs& a) {
  Params p("items", a, {});
  return lazy_generator([&](std::vector<Value>& out) {
    if (v.is_undefined()) return;
    if (!v.is_dict()) render_fail("Can only get item pairs from a mapping.");
    for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({k, x}, true));
  });
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
  return lazy_generator([&](std::vector<Value>& out) {
    std::vector<Value> seen;
    for (const auto& item : iterate(v)) {
      Value k = key(item);
      if (!hashable(k)) render_fail("unhashable type: '{}'", type_name(k));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
  });
}

namespace {

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
}  // namespace

Value f_min(Interp&, const Value& v, const CallArgs& a) {
  return min_max(v, a, "min", false);
}
Value f_max(Interp&, const Value& v, const CallArgs& a) {
  return min_max(v, a, "max", true);
}

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
  return lazy_generator([&](std::vector<Value>& out) {
    int64_t n = p.get_int(0, 1);
    if (n <= 0) render_fail("batch size must be positive");
    std::vector<Value> cur;
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
  });
}

Value f_slice(Interp&, const Value& v, const CallArgs& a) {
  Params p("slice", a, {"slices", "fill_with"}, 1);
  return lazy_generator([&](std::vector<Value>& out) {
    auto seq = iterate(v);
    int64_t slices = p.get_int(0, 1);
    if (slices <= 0) render_fail("slice count must be positive");
    int64_t len = static_cast<int64_t>(seq.size());
    int64_t per = len / slices, extra = len % slices, offset = 0;
    for (int64_t k = 0; k < slices; ++k) {
      int64_t start = offset + k * per;
      if (k < extra) ++offset;
      int64_t end = offset + (k + 1) * per;
      std::vector<Value> part(seq.begin() + start, seq.begin() + end);
      if (p.has(1) && !p[1].is_none() && k >= extra) part.push_back(p[1]);
      out.push_back(Value::list(std::move(part)));
    }
  });
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
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(v), name));
}

// ---- map / select ----

Value f_map(Interp& in, const Value& v, const CallArgs& a) {
  return lazy_generator([&](std::vector<Value>& out) {
    if (!truthy(v)) return;  // Jinja's map starts with `if value:`
    if (a.args.empty()) {
      Value attribute, fallback;
      for (const auto& [k, x] : a.kwargs) {
        if (k == "attribute")
          attribute = x;
        else if (k == "default")
          fallback = x;
        else
          render_fail("Unexpected keyword argument '{}'", k);
      }
      if (attribute.is_undefined()) render_fail("map requires a filter argument");
      KeyFn key{attribute, false, fallback};
      for (const auto& item : iterate(v)) out.push_back(key(item));
      return;
    }
    std::string name = expect_str("map filter name", a.args[0]);
    CallArgs rest{std::vector<Value>(a.args.begin() + 1, a.args.end()), a.kwargs};
    for (const auto& item : iterate(v)) out.push_back(in.apply_filter(name, item, rest));
  });
}

namespace {

Value select_impl(Interp& in, const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  return lazy_generator([&](std::vector<Value>& out) {
    if (!truthy(v)) return;  // Jinja's select_or_reject starts with `if value:`
    size_t off = by_attr ? 1 : 0;
    if (by_attr && a.args.empty()) render_fail("Missing parameter for attribute name");
    KeyFn key{by_attr ? a.args[0] : Value()};
    std::optional<std::string> test;
    if (a.args.size() > off) test = expect_str("test name", a.args[off]);
    CallArgs rest{
        std::vector<Value>(a.args.begin() + std::min(a.args.size(), off + 1), a.args.end()),
        a.kwargs};
    for (const auto& item : iterate(v)) {
      Value x = key(item);
      bool ok = test ? in.apply_test(*test, x, rest) : truthy(x);
      if (ok == keep) out.push_back(item);
    }
  });
}
}  // namespace

Value f_select(Interp& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, false, true);
}
Value f_reject(Interp& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, false, false);
}
Value f_selectattr(Interp& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, true, true);
}
Value f_rejectattr(Interp& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, true, false);
}

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
    while (j < keyed.size() && equals(keyed[j].first, keyed[i].first))
      group.push_back(keyed[j++].second);
    Value grouper = case_sensitive ? keyed[i].first : shown(group[0]);
    out.push_back(
        Value::named_tuple({grouper, Value::list(std::move(group))}, {"grouper", "list"}));
    i = j;
  }
  return Value::list(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,

}  // namespace tandem::jinja::filters
