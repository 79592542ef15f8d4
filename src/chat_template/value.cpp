#include "chat_template/value.h"

#include <fmt/format.h>

#include "chat_template/chat_template.h"
#include "chat_template/errors.h"

namespace tandem::jinja {

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);  // Python keeps the first key and its position
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

std::string Object::repr() const {
  return fmt::format("<{} object>", type_name());
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.data_ =
      Undef{hint.empty() ? nullptr : std::make_shared<const std::string>(std::move(hint)), unsafe};
  return v;
}

Value Value::none() {
  Value v;
  v.data_ = nullptr;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.data_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.data_ = Str{std::make_shared<const std::string>(std::move(s)), markup};
  return v;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.data_ = std::make_shared<const ListData>(ListData{std::move(items), tuple, {}});
  return v;
}

Value Value::named_tuple(std::vector<Value> items, std::vector<std::string> fields) {
  Value v;
  v.data_ = std::make_shared<const ListData>(ListData{std::move(items), true, std::move(fields)});
  return v;
}

Value Value::dict(DictData d) {
  Value v;
  v.data_ = std::make_shared<const DictData>(std::move(d));
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interp&, CallArgs&)> fn) {
  Value v;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.data_ = std::move(o);
  return v;
}

Value Value::generator(std::vector<Value> items, std::string name) {
  Value v;
  v.data_ = std::make_shared<const IterData>(
      IterData{std::move(items), IterData::Kind::kGenerator, std::move(name), 0, {}, false});
  return v;
}

Value Value::failing_generator(std::vector<Value> items, std::string error) {
  Value v;
  v.data_ = std::make_shared<const IterData>(IterData{std::move(items), IterData::Kind::kGenerator,
                                                      "generator", 0, std::move(error), true});
  return v;
}

Value Value::view(std::vector<Value> items, std::string name) {
  Value v;
  v.data_ = std::make_shared<const IterData>(
      IterData{std::move(items), IterData::Kind::kView, std::move(name), 0, {}, false});
  return v;
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_hint() const {
  static const std::string kGeneric = "value is undefined";
  const auto& u = std::get<Undef>(data_);
  return u.hint ? *u.hint : kGeneric;
}

bool Value::undefined_is_unsafe() const {
  return std::get<Undef>(data_).unsafe;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0.0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
      return !v.items().empty();
    case Value::Kind::kDict:
      return !v.dict().entries.empty();
    case Value::Kind::kCallable:
    case Value::Kind::kObject:
      return true;
    case Value::Kind::kIter:
      // A generator object is always true, even when it would yield nothing.
      return v.is_generator() || !v.iter().items.empty();
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      // A list never equals a tuple in Python.
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.dict().entries;
      if (x.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
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

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return v.is_markup() ? "Markup" : "str";
    case Value::Kind::kList:
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kCallable:
      return "function";
    case Value::Kind::kObject:
      return v.object()->type_name();
    case Value::Kind::kIter:
      return v.iter().name;
  }
  return "object";
}

bool hashable(const Value& v) {
  if (v.is_dict() || (v.is_list() && !v.is_tuple())) return false;
  if (v.is_iter()) return v.is_generator();
  if (v.is_tuple()) {
    for (const auto& x : v.items()) {
      if (!hashable(x)) return false;
    }
  }
  return true;
}

namespace {

// depth: how many arrays/objects enclose j (0 for a top-level value).
Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  using T = nlohmann::ordered_json::value_t;
  // The server refuses request bodies beyond this depth already; the bound keeps this recursion
  // (and the Value's own recursive destruction and printing) shallow for any caller.
  if (j.is_structured() && depth >= kChatTemplateMaxJsonDepth)
    render_fail("JSON value nested deeper than {} levels", kChatTemplateMaxJsonDepth);
  switch (j.type()) {
    case T::null:
      return Value::none();
    case T::boolean:
      return Value::boolean(j.get<bool>());
    case T::number_integer:
      return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) render_fail("integer {} is too large", u);
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float:
      return Value::number(j.get<double>());
    case T::string:
      return Value::string(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      DictData d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.entries.emplace_back(Value::string(it.key()), from_json_at(it.value(), depth + 1));
      }
      return Value::dict(std::move(d));
    }
    default:
      render_fail("cannot use a JSON {} value in a template", j.type_name());
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

}  // namespace tandem::jinja
