#include "chat_template/methods.h"

#include <algorithm>
#include <array>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/operators.h"
#include "chat_template/py_format.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"
#include "chat_template/unicode.h"

namespace tandem::jinja {
namespace {

using Fn = Value (*)(const Value& self, const CallArgs& args);

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

// Applies a Python str method's optional start/end arguments (code point slice bounds).
std::string sliced(const Value& self, const Params& p, size_t start_i) {
  if (!p.has(start_i) && !p.has(start_i + 1)) return self.str();
  Value none = Value::none();
  return get_slice(self, p.get(start_i, none), p.get(start_i + 1, none), none).str();
}

// startswith/endswith take one prefix or a tuple of them.
bool affix_match(const Value& self, const CallArgs& args, const char* fn, bool prefix) {
  Params p(fn, args, {"prefix", "start", "end"}, 1);
  std::string text = sliced(self, p, 1);
  std::vector<Value> options = p[0].is_tuple() ? p[0].items() : std::vector<Value>{p[0]};
  for (const auto& o : options) {
    if (!o.is_string()) {
      render_fail("{} first arg must be str or a tuple of str, not {}", fn, type_name(o));
    }
    if (prefix ? py::starts_with(text, o.str()) : py::ends_with(text, o.str())) return true;
  }
  return false;
}

char32_t fill_char(const Params& p, size_t i) {
  if (!p.has(i)) return U' ';
  std::u32string f = unicode::decode(expect_str("fill character", p[i]));
  if (f.size() != 1) render_fail("The fill character must be exactly one character long");
  return f[0];
}

Value strip_method(const Value& self, const CallArgs& args, const char* fn, py::Side side) {
  Params p(fn, args, {"chars"});
  return Value::string(py::strip(self.str(), p.get_str(0), side));
}

Value split_method(const Value& self, const CallArgs& args, const char* fn, bool right) {
  Params p(fn, args, {"sep", "maxsplit"});
  auto sep = p.get_str(0);
  long maxsplit = static_cast<long>(p.get_int(1, -1));
  return str_list(right ? py::rsplit(self.str(), sep, maxsplit)
                        : py::split(self.str(), sep, maxsplit));
}

Value find_method(const Value& self, const CallArgs& args, const char* fn, bool reverse,
                  bool raise) {
  Params p(fn, args, {"sub", "start", "end"}, 1);
  auto bound = [&](size_t i) -> std::optional<long> {
    if (!p.has(i) || p[i].is_none()) return std::nullopt;
    return static_cast<long>(expect_int("slice index", p[i]));
  };
  long r = py::find(self.str(), expect_str(fn, p[0]), bound(1), bound(2), reverse);
  if (r < 0 && raise) render_fail("substring not found");
  return Value::integer(r);
}

Value partition_method(const Value& self, const CallArgs& args, const char* fn, bool right) {
  Params p(fn, args, {"sep"}, 1);
  const std::string& sep = expect_str(fn, p[0]);
  if (sep.empty()) render_fail("empty separator");
  const std::string& s = self.str();
  size_t hit = right ? s.rfind(sep) : s.find(sep);
  std::vector<Value> parts;
  if (hit == std::string::npos) {
    Value empty = Value::string("");
    parts = right ? std::vector<Value>{empty, empty, self} : std::vector<Value>{self, empty, empty};
  } else {
    parts = {Value::string(s.substr(0, hit)), Value::string(sep),
             Value::string(s.substr(hit + sep.size()))};
  }
  return Value::list(std::move(parts), true);
}

Value no_args_str(const Value& self, const CallArgs& args, const char* fn,
                  std::string (*f)(std::string_view)) {
  Params p(fn, args, {});
  return Value::string(f(self.str()));
}

Value char_class(const Value& self, const CallArgs& args, const char* fn, py::CharClass k) {
  Params p(fn, args, {});
  return Value::boolean(py::all_of(self.str(), k));
}

std::optional<Value> str_method(const Value& self, std::string_view name) {
  struct Entry {
    std::string_view name;
    Fn fn;
  };
  static const Entry kMethods[] = {
      {"strip", [](const Value& s,
                   const CallArgs& a) { return strip_method(s, a, "strip", py::Side::kBoth); }},
      {"lstrip", [](const Value& s,
                    const CallArgs& a) { return strip_method(s, a, "lstrip", py::Side::kLeft); }},
      {"rstrip", [](const Value& s,
                    const CallArgs& a) { return strip_method(s, a, "rstrip", py::Side::kRight); }},
      {"split",
       [](const Value& s, const CallArgs& a) { return split_method(s, a, "split", false); }},
      {"rsplit",
       [](const Value& s, const CallArgs& a) { return split_method(s, a, "rsplit", true); }},
      {"splitlines",
       [](const Value& s, const CallArgs& a) {
         Params p("splitlines", a, {"keepends"});
         return str_list(py::splitlines(s.str(), p.get_bool(0, false)));
       }},
      {"startswith",
       [](const Value& s, const CallArgs& a) {
         return Value::boolean(affix_match(s, a, "startswith", true));
       }},
      {"endswith",
       [](const Value& s, const CallArgs& a) {
         return Value::boolean(affix_match(s, a, "endswith", false));
       }},
      {"find",
       [](const Value& s, const CallArgs& a) { return find_method(s, a, "find", false, false); }},
      {"rfind",
       [](const Value& s, const CallArgs& a) { return find_method(s, a, "rfind", true, false); }},
      {"index",
       [](const Value& s, const CallArgs& a) { return find_method(s, a, "index", false, true); }},
      {"rindex",
       [](const Value& s, const CallArgs& a) { return find_method(s, a, "rindex", true, true); }},
      {"count",
       [](const Value& s, const CallArgs& a) {
         Params p("count", a, {"sub", "start", "end"}, 1);
         return Value::integer(py::count(sliced(s, p, 1), expect_str("count", p[0])));
       }},
      {"replace",
       [](const Value& s, const CallArgs& a) {
         Params p("replace", a, {"old", "new", "count"}, 2);
         return Value::string(py::replace(s.str(), expect_str("replace", p[0]),
                                          expect_str("replace", p[1]),
                                          static_cast<long>(p.get_int(2, -1))));
       }},
      {"upper",
       [](const Value& s, const CallArgs& a) { return no_args_str(s, a, "upper", py::upper); }},
      {"lower",
       [](const Value& s, const CallArgs& a) { return no_args_str(s, a, "lower", py::lower); }},
      {"title",
       [](const Value& s, const CallArgs& a) { return no_args_str(s, a, "title", py::title); }},
      {"capitalize",
       [](const Value& s, const CallArgs& a) {
         return no_args_str(s, a, "capitalize", py::capitalize);
       }},
      {"swapcase", [](const Value& s,
                      const CallArgs& a) { return no_args_str(s, a, "swapcase", py::swapcase); }},
      {"casefold",
       [](const Value& s, const CallArgs& a) { return no_args_str(s, a, "casefold", py::lower); }},
      {"isspace",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isspace", py::CharClass::kSpace);
       }},
      {"isdigit",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isdigit", py::CharClass::kDigit);
       }},
      {"isdecimal",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isdecimal", py::CharClass::kDecimal);
       }},
      {"isnumeric",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isnumeric", py::CharClass::kNumeric);
       }},
      {"isalpha",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isalpha", py::CharClass::kAlpha);
       }},
      {"isalnum",
       [](const Value& s, const CallArgs& a) {
         return char_class(s, a, "isalnum", py::CharClass::kAlnum);
       }},
      {"islower",
       [](const Value& s, const CallArgs& a) {
         Params p("islower", a, {});
         return Value::boolean(py::is_lower(s.str()));
       }},
      {"isupper",
       [](const Value& s, const CallArgs& a) {
         Params p("isupper", a, {});
         return Value::boolean(py::is_upper(s.str()));
       }},
      {"center",
       [](const Value& s, const CallArgs& a) {
         Params p("center", a, {"width", "fillchar"}, 1);
         return Value::string(
             py::center(s.str(), static_cast<long>(p.get_int(0, 0)), fill_char(p, 1)));
       }},
      {"ljust",
       [](const Value& s, const CallArgs& a) {
         Params p("ljust", a, {"width", "fillchar"}, 1);
         return Value::string(
             py::ljust(s.str(), static_cast<long>(p.get_int(0, 0)), fill_char(p, 1)));
       }},
      {"rjust",
       [](const Value& s, const CallArgs& a) {
         Params p("rjust", a, {"width", "fillchar"}, 1);
         return Value::string(
             py::rjust(s.str(), static_cast<long>(p.get_int(0, 0)), fill_char(p, 1)));
       }},
      {"removeprefix",
       [](const Value& s, const CallArgs& a) {
         Params p("removeprefix", a, {"prefix"}, 1);
         const std::string& x = expect_str("removeprefix", p[0]);
         return py::starts_with(s.str(), x) ? Value::string(s.str().substr(x.size())) : s;
       }},
      {"removesuffix",
       [](const Value& s, const CallArgs& a) {
         Params p("removesuffix", a, {"suffix"}, 1);
         const std::string& x = expect_str("removesuffix", p[0]);
         if (x.empty() || !py::ends_with(s.str(), x)) return s;
         return Value::string(s.str().substr(0, s.str().size() - x.size()));
       }},
      {"partition", [](const Value& s,
                       const CallArgs& a) { return partition_method(s, a, "partition", false); }},
      {"rpartition", [](const Value& s,
                        const CallArgs& a) { return partition_method(s, a, "rpartition", true); }},
      {"join",
       [](const Value& s, const CallArgs& a) {
         Params p("join", a, {"iterable"}, 1);
         std::string out;
         size_t i = 0;
         for (const auto& item : iterate(p[0])) {
           if (!item.is_string()) {
             render_fail("sequence item {}: expected str instance, {} found", i, type_name(item));
           }
           if (i++) out += s.str();
           out += item.str();
         }
         return Value::string(std::move(out));
       }},
      {"format",
       [](const Value& s, const CallArgs& a) { return Value::string(str_format(s.str(), a)); }},
      {"zfill",
       [](const Value& s, const CallArgs& a) {
         Params p("zfill", a, {"width"}, 1);
         std::string text = s.str();
         std::string sign;
         if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
           sign = text.substr(0, 1);
           text.erase(0, 1);
         }
         long width = static_cast<long>(p.get_int(0, 0)) - static_cast<long>(sign.size());
         return Value::string(sign + py::rjust(text, width, U'0'));
       }},
  };
  for (const auto& e : kMethods) {
    if (e.name == name) {
      Fn fn = e.fn;
      return Value::callable("str." + std::string(name),
                             [self, fn](Interp&, CallArgs& args) { return fn(self, args); });
    }
  }
  // Python str attributes this engine does not implement: present (so `is defined` holds) but
  // calling them is an error rather than a silent empty result.
  static constexpr std::array<std::string_view, 8> kUnsupported = {
      "encode",       "expandtabs",  "format_map", "isascii",
      "isidentifier", "isprintable", "istitle",    "translate"};
  if (std::find(kUnsupported.begin(), kUnsupported.end(), name) != kUnsupported.end()) {
    std::string n(name);
    return Value::callable("str." + n, [n](Interp&, CallArgs&) -> Value {
      render_fail("str.{}() is not supported by this template engine", n);
    });
  }
  return std::nullopt;
}

Value dict_items(const Value& self) {
  std::vector<Value> out;
  for (const auto& [k, v] : self.dict().entries) out.push_back(Value::list({k, v}, true));
  return Value::list(std::move(out));
}

std::optional<Value> dict_method(const Value& self, std::string_view name) {
  std::string n(name);
  if (name == "items") {
    return Value::callable("dict.items", [self](Interp&, CallArgs& a) {
      Params p("items", a, {});
      return Value::view(dict_items(self).items(), "dict_items");
    });
  }
  if (name == "keys") {
    return Value::callable("dict.keys", [self](Interp&, CallArgs& a) {
      Params p("keys", a, {});
      return Value::view(iterate(self), "dict_keys");
    });
  }
  if (name == "values") {
    return Value::callable("dict.values", [self](Interp&, CallArgs& a) {
      Params p("values", a, {});
      std::vector<Value> out;
      for (const auto& [k, v] : self.dict().entries) out.push_back(v);
      return Value::view(std::move(out), "dict_values");
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [self](Interp&, CallArgs& a) {
      Params p("get", a, {"key", "default"}, 1);
      if (!hashable(p[0])) render_fail("unhashable type: '{}'", type_name(p[0]));
      if (const Value* v = self.dict().find(p[0])) return *v;
      return p.has(1) ? p[1] : Value::none();
    });
  }
  if (name == "copy") {
    return Value::callable("dict.copy", [self](Interp&, CallArgs&) { return self; });
  }
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
      name == "update") {
    return Value::undefined("access to attribute '" + n + "' of 'dict' object is unsafe.", true);
  }
  if (name == "fromkeys") {
    return Value::callable("dict.fromkeys", [](Interp&, CallArgs&) -> Value {
      render_fail("dict.fromkeys() is not supported by this template engine");
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, std::string_view name) {
  std::string n(name);
  if (name == "count") {
    return Value::callable("list.count", [self](Interp&, CallArgs& a) {
      Params p("count", a, {"value"}, 1);
      return Value::integer(std::count_if(self.items().begin(), self.items().end(),
                                          [&](const Value& x) { return equals(x, p[0]); }));
    });
  }
  if (name == "index") {
    return Value::callable("list.index", [self](Interp&, CallArgs& a) {
      Params p("index", a, {"value"}, 1);
      const auto& items = self.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (equals(items[i], p[0])) return Value::integer(static_cast<int64_t>(i));
      }
      render_fail("{} is not in list", repr(p[0]));
    });
  }
  if (name == "copy" && !self.is_tuple()) {
    return Value::callable("list.copy", [self](Interp&, CallArgs&) { return self; });
  }
  static constexpr std::array<std::string_view, 8> kMutating = {
      "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  if (!self.is_tuple() && std::find(kMutating.begin(), kMutating.end(), name) != kMutating.end()) {
    return Value::undefined("access to attribute '" + n + "' of 'list' object is unsafe.", true);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> method(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Value::Kind::kString:
      return str_method(self, name);
    case Value::Kind::kDict:
      return dict_method(self, name);
    case Value::Kind::kList:
      return list_method(self, name);
    default:
      return std::nullopt;
  }
}

}  // namespace tandem::jinja
